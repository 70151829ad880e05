// Sampling with PyTorch 1.13's CPU algorithms, so the same seed draws the same numbers:
//   torch.manual_seed(123); torch.randint(0, 10, (5,)); torch.multinomial(p, 3)
//   ember::manual_seed(123); randint(0, 10, {5});      multinomial(p, 3)
#pragma once

#include <cstdint>

#include "core/base/generator.h"
#include "core/tensor/options.h"
#include "core/tensor/tensor.h"

namespace ember {

// torch.randint(low, high, size): integers in [low, high), int64 unless options say otherwise.
// Each element is (random() % (high - low)) + low (random64() when the range is 2^32 or more),
// elements in memory order.
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options = kInt64,
               Generator* gen = nullptr);
Tensor randint(int64_t high, const Shape& shape, const TensorOptions& options = kInt64,
               Generator* gen = nullptr);

// torch.multinomial(probs, num_samples, replacement): for each row of probs (1-d [n] or 2-d
// [rows, n], non-negative weights, not necessarily summing to 1), num_samples int64 category
// indices. As PyTorch's CPU kernel:
//  - without replacement: q ~ Exp(1) per weight (double draws, in memory
//    order), then the indices of the num_samples largest probs / q (argmax for one sample);
//  - with replacement: per row, the cumulative distribution normalised by its sum, and for each
//    sample one uniform double u and a binary search for the first bucket with cum >= u.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);

}  // namespace ember
