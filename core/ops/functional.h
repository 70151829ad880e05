// Functional forms of the nn layers that need randomness or several ops.
#pragma once

#include "core/tensor.h"

namespace ember {

class Generator;

// torch.nn.functional.dropout: in training, x * mask / (1 - p) with mask ~ Bernoulli(1 - p)
// drawn from `gen` (the default generator when null); x itself when p == 0 or not training.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

}  // namespace ember
