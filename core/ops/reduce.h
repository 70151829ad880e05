// Reductions: sum, mean, max/min, var, argmax. Negative dims count from the end.
#pragma once

#include <concepts>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

struct ValuesIndices {  // what max(t, dim) and min(t, dim) return
  Tensor values;
  Tensor indices;  // int64
};

Tensor sum(const Tensor& t);
// A broadcast gradient summed back to `shape` (the engine and expand's backward undo broadcasting
// with it); an Error naming `node_name` if grad's shape is not a broadcast of `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape, const std::string& node_name);
Tensor sum(const Tensor& t, const std::vector<int64_t>& dims, Bool keepdim = false);
Tensor mean(const Tensor& t);
Tensor mean(const Tensor& t, const std::vector<int64_t>& dims, Bool keepdim = false);
Tensor max(const Tensor& t);  // all elements; the gradient is shared evenly among ties
ValuesIndices max(const Tensor& t, Dim dim, Bool keepdim = false);
Tensor min(const Tensor& t);
ValuesIndices min(const Tensor& t, Dim dim, Bool keepdim = false);

// var and std as torch.var / torch.std: var(x) and var(x, unbiased) over all elements,
// var(x, 1) or var(x, {1}) along dim 1 (as torch.var(x, 1)), var(x, {0, 2}, unbiased, keepdim),
// and var(x, dims, Correction(c), keepdim) for the divisor n - c (unbiased is c = 1, the
// default). A flag must be a bool and a dim an integer: var(x, {1}, 2) or var(x, 1.5) does not
// compile.
Tensor var(const Tensor& t);
Tensor var(const Tensor& t, Correction correction);
template <typename B>
requires std::same_as<B, bool> Tensor var(const Tensor& t, B unbiased) {
  return var(t, Correction(unbiased ? 1 : 0));
}
Tensor var(const Tensor& t, int64_t dim, Bool unbiased = true, Bool keepdim = false);
Tensor var(const Tensor& t, const std::vector<int64_t>& dims, Bool unbiased = true,
           Bool keepdim = false);
Tensor var(const Tensor& t, const std::vector<int64_t>& dims, Correction correction,
           Bool keepdim = false);
template <std::floating_point F, typename... Rest>
Tensor var(const Tensor& t, F dim, Rest&&...) = delete;  // a dim is an integer

Tensor std(const Tensor& t);
Tensor std(const Tensor& t, Correction correction);
template <typename B>
requires std::same_as<B, bool> Tensor std(const Tensor& t, B unbiased) {
  return std(t, Correction(unbiased ? 1 : 0));
}
Tensor std(const Tensor& t, int64_t dim, Bool unbiased = true, Bool keepdim = false);
Tensor std(const Tensor& t, const std::vector<int64_t>& dims, Bool unbiased = true,
           Bool keepdim = false);
Tensor std(const Tensor& t, const std::vector<int64_t>& dims, Correction correction,
           Bool keepdim = false);
template <std::floating_point F, typename... Rest>
Tensor std(const Tensor& t, F dim, Rest&&...) = delete;

Tensor argmax(const Tensor& t);  // index into the flattened tensor
Tensor argmax(const Tensor& t, Dim dim, Bool keepdim = false);

}  // namespace ember
