// Random tensors from a Generator that reproduces PyTorch's CPU stream bit for bit:
// ember::manual_seed(123); rand({3, 2}) gives torch.manual_seed(123); torch.rand(3, 2).
#pragma once

#include "core/base/generator.h"
#include "core/tensor/tensor.h"

namespace ember {

// `gen` null means the default generator (the one manual_seed seeds).
Tensor rand(const Shape& shape, DType dtype = get_default_dtype(), Generator* gen = nullptr);
Tensor randn(const Shape& shape, DType dtype = get_default_dtype(), Generator* gen = nullptr);
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);

// In-place fills (no autograd; use under NoGradGuard for parameters), elements drawn in memory
// order as PyTorch does, so a transposed view is filled in storage order.
Tensor& uniform_(Tensor& t, double from = 0.0, double to = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double stddev = 1.0, Generator* gen = nullptr);
Tensor& bernoulli_(Tensor& t, double p, Generator* gen = nullptr);

}  // namespace ember
