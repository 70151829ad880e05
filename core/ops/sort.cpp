#include "core/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/base/grad_mode.h"
#include "core/ops/shape.h"

namespace ember {

namespace {

int64_t sort_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor has one dim to sort, as PyTorch
  check(dim >= -n && dim < n, op, ": dimension out of range (expected to be in range of [", -n,
        ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

// a comes before b in ascending order: numbers by value, NaN after every number.
template <typename T>
bool less_nan_last(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// For every row along `dim` of t: the indices of its elements in the order `order` gives
// (the first `keep` of them), as an int64 tensor shaped like t with size `keep` along dim.
Tensor ordered_indices(const Tensor& t, int64_t dim, int64_t keep, bool descending,
                       const char* op) {
  detail::check_defined(t, op);
  OpScope scope(op);
  const int64_t d = sort_dim(dim, t.dim(), op);
  if (t.dim() == 0) return zeros({}, DType::Int64);
  // Rows along the last dim of a contiguous copy.
  Tensor moved = t.detach().transpose(d, -1).contiguous();
  const int64_t n = moved.size(-1);
  const int64_t rows = n == 0 ? 0 : moved.numel() / n;
  Shape out_shape = moved.shape();
  out_shape.back() = keep;
  Tensor out = empty(out_shape, DType::Int64);
  // Nothing to order (and n may be 2^62 in an empty [2^62, 0] tensor: no buffer of n indices).
  if (out.numel() == 0) return out.transpose(d, -1).contiguous();
  int64_t* result = out.data_ptr<int64_t>();
  dispatch(moved.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* data = moved.data_ptr<T>();
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = data + r * n;
      std::iota(order.begin(), order.end(), 0);
      auto compare = [&](int64_t a, int64_t b) {
        return descending ? less_nan_last(row[b], row[a]) : less_nan_last(row[a], row[b]);
      };
      // Ties keep their index order. (For topk, a partial sort would do less work, but it is
      // not stable.)
      std::stable_sort(order.begin(), order.end(), compare);
      std::copy(order.begin(), order.begin() + keep, result + r * keep);
    }
  });
  return out.transpose(d, -1).contiguous();
}

}  // namespace

ValuesIndices sort(const Tensor& t, Dim dim, Bool descending, Bool /*stable*/) {
  detail::check_defined(t, "sort");
  const int64_t n = t.dim() == 0 ? 1 : t.size(sort_dim(dim, t.dim(), "sort"));
  Tensor indices = ordered_indices(t, dim, n, descending, "sort");
  if (t.dim() == 0) return {t.clone(), indices};
  return {gather(t, dim, indices), indices};
}

Tensor argsort(const Tensor& t, Dim dim, Bool descending) {
  OpScope scope("argsort");
  return sort(t, dim, descending).indices;
}

ValuesIndices topk(const Tensor& t, Dim k, Dim dim, Bool largest, Bool /*sorted*/) {
  detail::check_defined(t, "topk");
  // PyTorch's topk kernel takes no bool tensor ("topk_cpu" not implemented for 'Bool'), while its
  // sort and argsort do.
  check(t.dtype() != DType::Bool, "topk: not implemented for bool (input shape ", t.shape(), ")");
  const int64_t d = sort_dim(dim, t.dim(), "topk");
  const int64_t n = t.dim() == 0 ? 1 : t.size(d);
  check(k >= 0 && k <= n, "topk: selected index k out of range (k = ", k, ", size ", n,
        " along dim ", d, " of a tensor of shape ", t.shape(), ")");
  Tensor indices = ordered_indices(t, dim, k, /*descending=*/largest, "topk");
  if (t.dim() == 0) return {t.clone(), indices};
  return {gather(t, dim, indices), indices};
}

Tensor nonzero(const Tensor& t) {
  detail::check_defined(t, "nonzero");
  OpScope scope("nonzero");
  const std::vector<double> values = t.contiguous().to_vector<double>();
  const Shape& shape = t.shape();
  const int64_t ndim = t.dim();
  std::vector<int64_t> flat;
  std::vector<int64_t> index(static_cast<std::size_t>(ndim), 0);
  for (double v : values) {
    if (v != 0) flat.insert(flat.end(), index.begin(), index.end());
    for (int64_t i = ndim - 1; i >= 0; --i) {  // next row-major index
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  // A 0-d tensor has one element and no index: [1, 0] if it is non-zero, [0, 0] otherwise.
  const auto count =
      ndim == 0 ? static_cast<int64_t>(values[0] != 0) : static_cast<int64_t>(flat.size()) / ndim;
  return from_vector(flat, {count, ndim});
}

std::vector<Tensor> where(const Tensor& condition) {
  detail::check_defined(condition, "where");
  Tensor nz = nonzero(condition);
  // A 0-d condition reads as one element (PyTorch: (tensor([0]),) when it is true).
  if (condition.dim() == 0) return {zeros({nz.size(0)}, DType::Int64)};
  std::vector<Tensor> out;
  for (int64_t i = 0; i < condition.dim(); ++i) out.push_back(nz.select(1, i).contiguous());
  return out;
}

}  // namespace ember
