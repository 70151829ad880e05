// Reductions: sum, mean, max/min, var, argmax. Negative dims count from the end.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember {

struct ValuesIndices {  // what max(t, dim) and min(t, dim) return
  Tensor values;
  Tensor indices;  // int64
};

Tensor sum(const Tensor& t);
Tensor sum(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& t);
Tensor mean(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& t);  // all elements; the gradient is shared evenly among ties
ValuesIndices max(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& t);
ValuesIndices min(const Tensor& t, int64_t dim, bool keepdim = false);
// correction=1 is the unbiased estimator (PyTorch's default).
Tensor var(const Tensor& t, int64_t correction = 1);
Tensor var(const Tensor& t, const std::vector<int64_t>& dims, int64_t correction = 1,
           bool keepdim = false);
Tensor argmax(const Tensor& t);  // index into the flattened tensor
Tensor argmax(const Tensor& t, int64_t dim, bool keepdim = false);

}  // namespace ember
