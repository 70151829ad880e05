// Functional forms of the nn layers that need randomness or several ops.
#pragma once

#include "core/tensor/tensor.h"

namespace ember {

class Generator;

// torch.nn.functional.dropout: in training, x * mask / (1 - p) with mask ~ Bernoulli(1 - p)
// drawn from `gen` (the default generator when null); x itself when p == 0 or not training.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

// The factor dropout multiplies by, in training with 0 < p: mask / (1 - p) of `shape`, drawn
// exactly as dropout draws it (all zeros, and nothing drawn, when p == 1). For fused kernels
// that apply dropout inside (core/ops/attention.cpp): same generator, same numbers.
Tensor dropout_noise(const Shape& shape, DType dtype, double p, Generator* gen = nullptr);

}  // namespace ember
