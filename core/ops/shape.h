// Shape ops: views (share storage) and the ops that build new tensors from pieces.
// The view ops are Tensor methods (view, reshape, transpose, permute, unsqueeze, squeeze,
// flatten, expand, select, slice, narrow, index, split, chunk); these are the rest.
#pragma once

#include <concepts>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Rows (along dim) picked by an int64 index vector: what Embedding does.
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
// out[i][j] = t[i][index[i][j]] (dim=1), as torch.gather.
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index);
// A dim is an integer: a bool (torch.cat(ts, True): TypeError) does not compile, rather than
// mean dim 1.
template <std::same_as<bool> B>
Tensor cat(const std::vector<Tensor>&, B) = delete;
template <std::same_as<bool> B>
Tensor stack(const std::vector<Tensor>&, B) = delete;
template <std::same_as<bool> B>
Tensor index_select(const Tensor&, B, const Tensor&) = delete;
template <std::same_as<bool> B>
Tensor gather(const Tensor&, B, const Tensor&) = delete;
// A view that autograd does not track as a view (PyTorch's _unsafe_view), used by matmul.
Tensor unsafe_view(const Tensor& t, const Shape& shape);

}  // namespace ember
