// Reductions: sum, mean, max/min, var, argmax. Each differentiable op is one struct, its forward
// and backward side by side; the loops themselves are in core/kernels/reduce_kernels.h.
//
// A reduction removes the dims it reduces (or keeps them with size 1 when keepdim). Its backward
// puts them back: the gradient is unsqueezed where the dims were removed, then expanded over the
// input's shape (see expand_to_input).
#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/graph/function.h"
#include "core/kernels/cascade_sum.h"
#include "core/kernels/reduce_kernels.h"
#include "core/ops/elementwise.h"
#include "core/ops/shape.h"

namespace ember {

namespace {

// ---- which dims a reduction removes, and how its input is laid out ----

// One flag per dim of t: true where the dim is reduced. Dims may be negative; a repeated dim is
// an Error. An empty list reduces every dim, as PyTorch 1.13 does for sum(dim=[]).
std::vector<bool> reduced_dims(const Tensor& t, const std::vector<int64_t>& dims, const char* op) {
  detail::check_defined(t, op);
  std::vector<bool> reduced(t.dim(), dims.empty());
  std::vector<bool> seen(std::max<int64_t>(t.dim(), 1), false);  // a 0-d tensor accepts dim 0
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, t.dim(), op);
    check(!seen[d], op, ": dim ", d, " appears multiple times in the list of dims (input shape ",
          t.shape(), ")");
    seen[d] = true;
    if (t.dim() > 0) reduced[d] = true;
  }
  return reduced;
}

std::vector<bool> all_dims(const Tensor& t) { return std::vector<bool>(t.dim(), true); }

// How many input elements go into each output element.
int64_t reduced_count(const Shape& shape, const std::vector<bool>& reduced) {
  int64_t count = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) count = mul_wrap(count, shape[d]);  // an empty tensor's other
  return count;                                         // dims may be huge
}

// The reduced dims as a sorted list, e.g. for calling mean(x, dims, keepdim) in a backward.
std::vector<int64_t> dim_list(const std::vector<bool>& reduced) {
  std::vector<int64_t> dims;
  for (std::size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

// The input of a reduction as one contiguous [outer, reduced, inner] block
// (core/kernels/reduce_kernels.h).
struct ReductionInput {
  Tensor data;  // contiguous: the input with its dims put in `order`
  kernels::ReduceShape shape;
  std::vector<int64_t> order;  // data's dim k is the input's dim order[k]
};

// A view of t with its dims in `order` (no copy).
Tensor permuted_view(const Tensor& t, const std::vector<int64_t>& order) {
  Shape shape, strides;
  for (int64_t d : order) {
    shape.push_back(t.shape()[d]);
    strides.push_back(t.strides()[d]);
  }
  return detail::make_view(t, std::move(shape), std::move(strides), t.offset());
}

// The dims of t from the largest stride to the smallest: the order its elements lie in memory.
// Reading a transposed matrix in this order makes it contiguous again.
std::vector<int64_t> memory_order(const Tensor& t) {
  std::vector<int64_t> order(t.dim());
  std::iota(order.begin(), order.end(), 0);
  if (!t.is_contiguous()) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
  }
  return order;
}

// [outer, reduced, inner] for a contiguous `shape` whose reduced dims are adjacent (size-1 dims
// may sit between them, or anywhere); nothing when a kept dim of size > 1 splits them.
std::optional<kernels::ReduceShape> as_block(const Shape& shape, const std::vector<bool>& reduced) {
  const auto ndim = static_cast<int64_t>(shape.size());
  int64_t first = ndim, last = -1;  // the first and last reduced dims not of size 1
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[d] && shape[d] != 1) {
      first = std::min(first, d);
      last = d;
    }
  }
  for (int64_t d = first + 1; d < last; ++d)
    if (!reduced[d] && shape[d] != 1) return std::nullopt;
  kernels::ReduceShape s;
  for (int64_t d = 0; d < ndim; ++d) {
    // An empty tensor's other dims may be huge: their products must not overflow.
    int64_t& part = d < first ? s.outer : (d <= last ? s.reduced : s.inner);
    part = mul_wrap(part, shape[d]);
  }
  return s;
}

// No copy when t, read in memory order, is contiguous with its reduced dims adjacent (a
// contiguous tensor over any one dim, or a transposed one). Otherwise the kept dims go first and
// the reduced dims last (inner == 1), and that view is copied unless it is already contiguous.
ReductionInput reduction_input(const Tensor& t, const std::vector<bool>& reduced) {
  NoGradGuard no_grad;  // a layout change, not part of any graph
  std::vector<int64_t> order = memory_order(t);
  Tensor in_memory_order = permuted_view(t, order);
  if (in_memory_order.is_contiguous()) {
    std::vector<bool> reduced_in_order;
    for (int64_t d : order) reduced_in_order.push_back(reduced[d]);
    if (auto block = as_block(in_memory_order.shape(), reduced_in_order)) {
      return {in_memory_order, *block, order};
    }
  }
  order.clear();
  kernels::ReduceShape s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (!reduced[d]) {
      order.push_back(d);
      s.outer = mul_wrap(s.outer, t.shape()[d]);
    }
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (reduced[d]) {
      order.push_back(d);
      s.reduced = mul_wrap(s.reduced, t.shape()[d]);
    }
  }
  return {permuted_view(t, order).contiguous(), s, order};
}

// An uninitialised result of the reduction, laid out as the kernel writes it: [outer, inner],
// that is the kept dims in the input's `order`. Contiguous unless `order` moved kept dims (then
// finish_result copies it).
Tensor empty_result(const Tensor& input, const ReductionInput& in, const std::vector<bool>& reduced,
                    bool keepdim, DType dtype) {
  // Strides of the input's dims in the result (reduced dims have size 1: any stride will do).
  std::vector<int64_t> stride_of_dim(input.dim(), 1);
  int64_t running = 1;
  for (auto k = static_cast<int64_t>(in.order.size()) - 1; k >= 0; --k) {
    const int64_t d = in.order[k];
    if (reduced[d]) continue;
    stride_of_dim[d] = running;
    running = mul_wrap(running, std::max<int64_t>(input.shape()[d], 1));
  }
  Shape shape, strides;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (!reduced[d] || keepdim) {
      shape.push_back(reduced[d] ? 1 : input.shape()[d]);
      strides.push_back(stride_of_dim[d]);
    }
  }
  Tensor storage = empty({numel_of(shape)}, dtype);
  return detail::make_view(storage, shape, strides, 0);
}

// Results are handed out contiguous, like every other op's.
Tensor finish_result(const Tensor& result) {
  NoGradGuard no_grad;
  return result.contiguous();
}

// The gradient of a reduction spread back over its input: each input element gets the gradient
// of the output element it went into. Removed dims come back as size 1, then expand.
Tensor expand_to_input(const Tensor& grad, const std::vector<bool>& reduced, bool keepdim,
                       const Shape& input_shape) {
  Tensor g = grad;
  if (!keepdim) {
    for (std::size_t d = 0; d < reduced.size(); ++d)
      if (reduced[d]) g = g.unsqueeze(static_cast<int64_t>(d));
  }
  return g.expand(input_shape);
}

// ---- sum and mean ----

// Float sums add in PyTorch's order (kernels::cascade_sum), so float32 results round exactly as
// PyTorch's do; a mean is that sum divided by the count, as PyTorch's CPU mean is.
Tensor floating_sum(const Tensor& x, const std::vector<bool>& reduced, bool keepdim, bool average) {
  Shape kept_shape = x.shape(), result_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (reduced[d]) {
      count = mul_wrap(count, x.shape()[d]);
      kept_shape[d] = 1;
      if (keepdim) result_shape.push_back(1);
    } else {
      result_shape.push_back(x.shape()[d]);
    }
  }
  Tensor out = zeros(kept_shape, x.dtype());
  Shape out_strides = out.strides();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[d]) out_strides[d] = 0;
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::cascade_sum(x.data_ptr<T>(), x.shape(), x.strides(), out.data_ptr<T>(), out_strides);
    if (average) {
      T* o = out.data_ptr<T>();
      const T n = static_cast<T>(count);
      const int64_t size = out.numel();
      for (int64_t i = 0; i < size; ++i) o[i] = o[i] / n;  // 0 / 0 = nan when empty
    }
  });
  return out.view(result_shape);
}

// The raw sum (or mean, when `average`) over the flagged dims. Floats stay in their dtype; bool
// and int64 sum to int64.
Tensor sum_kernel(const Tensor& x, const std::vector<bool>& reduced, bool keepdim, bool average) {
  numel_of(x.shape(), average ? "mean" : "sum");  // an expanded view may count beyond int64
  if (is_floating(x.dtype())) return floating_sum(x, reduced, keepdim, average);
  ReductionInput in = reduction_input(x, reduced);
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  Tensor out = empty_result(x, in, reduced, keepdim, out_dtype);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    kernels::sum(in.data.data_ptr<T>(), out.data_ptr<R>(), in.shape, average);
  });
  return finish_result(out);
}

// d(sum x)/dx_i = 1: every element receives the gradient of the sum.
struct SumAll : autograd::OpFunction<SumAll> {
  static constexpr const char* name = "SumBackward0";
  static constexpr const char* formula = "y = sum_i x_i:  dy/dx_i = 1";
  Shape input_shape;
  Tensor forward(const Tensor& x) {
    input_shape = x.shape();
    return sum_kernel(x, all_dims(x), /*keepdim=*/false, /*average=*/false);
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {expand_to_input(grad, std::vector<bool>(input_shape.size(), true), false, input_shape)};
  }
};

// d(sum_dims x)/dx_i = 1: each element receives the gradient of the sum it went into.
struct SumDims : autograd::OpFunction<SumDims> {
  static constexpr const char* name = "SumBackward1";
  static constexpr const char* formula = "y = sum over dims of x:  dy/dx_i = 1 (dy broadcast back)";
  Shape input_shape;
  std::vector<bool> reduced;
  bool keepdim = false;
  Tensor forward(const Tensor& x, const std::vector<bool>& flags, bool keep) {
    input_shape = x.shape();
    reduced = flags;
    keepdim = keep;
    return sum_kernel(x, reduced, keepdim, /*average=*/false);
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {expand_to_input(grad, reduced, keepdim, input_shape)};
  }
};

void check_mean_dtype(const Tensor& t) {
  check(is_floating(t.dtype()),
        "mean(): could not infer output dtype. Input dtype must be either a floating point or "
        "complex dtype. Got: ",
        dtype_name(t.dtype()), " (input shape ", t.shape(), ")");
}

// d(mean x)/dx_i = 1/n for n elements.
struct MeanAll : autograd::OpFunction<MeanAll> {
  static constexpr const char* name = "MeanBackward0";
  static constexpr const char* formula = "y = (1/n) sum_i x_i:  dy/dx_i = 1/n";
  Shape input_shape;
  Tensor forward(const Tensor& x) {
    input_shape = x.shape();
    return sum_kernel(x, all_dims(x), /*keepdim=*/false, /*average=*/true);
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const auto n = static_cast<double>(numel_of(input_shape));
    return {
        expand_to_input(grad / n, std::vector<bool>(input_shape.size(), true), false, input_shape)};
  }
};

// d(mean_dims x)/dx_i = 1/n, n the number of elements averaged into each output element.
struct MeanDims : autograd::OpFunction<MeanDims> {
  static constexpr const char* name = "MeanBackward1";
  static constexpr const char* formula =
      "y = mean over dims of x:  dy/dx_i = 1/n (dy broadcast back)";
  Shape input_shape;
  std::vector<bool> reduced;
  bool keepdim = false;
  Tensor forward(const Tensor& x, const std::vector<bool>& flags, bool keep) {
    input_shape = x.shape();
    reduced = flags;
    keepdim = keep;
    return sum_kernel(x, reduced, keepdim, /*average=*/true);
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const auto n = static_cast<double>(reduced_count(input_shape, reduced));
    return {expand_to_input(grad / n, reduced, keepdim, input_shape)};
  }
};

// ---- max and min ----

constexpr const char* extremum_name(bool is_max) { return is_max ? "max" : "min"; }

// The max (kMax) or min of every element, and where along `dim` it is, for a non-empty dim.
template <bool kMax>
ValuesIndices extremum_kernel(const Tensor& x, const std::vector<bool>& reduced, bool keepdim,
                              const char* op) {
  numel_of(x.shape(), op);  // an expanded view may count beyond int64
  ReductionInput in = reduction_input(x, reduced);
  ValuesIndices out{empty_result(x, in, reduced, keepdim, x.dtype()),
                    empty_result(x, in, reduced, keepdim, DType::Int64)};
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::extremum<kMax>(in.data.data_ptr<T>(), out.values.data_ptr<T>(),
                            out.indices.data_ptr<int64_t>(), in.shape);
  });
  return {finish_result(out.values), finish_result(out.indices)};
}

void check_not_empty(const Tensor& t, const char* op) {
  check(numel_of(t.shape(), op) > 0, op,
        "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
        "reduction dim with the 'dim' argument. (input shape ",
        t.shape(), ")");
}

void check_dim_not_empty(const Tensor& t, int64_t dim, const char* op) {
  check(t.dim() == 0 || t.shape()[dim] > 0, op, "(): Expected reduction dim ", dim,
        " to have non-zero size. (input shape ", t.shape(), ")");
}

// d(max x)/dx_i = 1/k on the k elements equal to the max (ties share the gradient evenly, as
// PyTorch 1.13 does), 0 elsewhere. When the max is nan, the nan elements are the ties.
template <bool kMax>
struct ExtremumAll : autograd::OpFunction<ExtremumAll<kMax>> {
  static constexpr const char* name = kMax ? "MaxBackward1" : "MinBackward1";
  static constexpr const char* formula =
      kMax ? "y = max_i x_i:  dy/dx_i = 1/k on the k elements equal to the max, else 0"
           : "y = min_i x_i:  dy/dx_i = 1/k on the k elements equal to the min, else 0";
  Tensor forward(const Tensor& x) {
    check_not_empty(x, extremum_name(kMax));
    Tensor result =
        extremum_kernel<kMax>(x, all_dims(x), /*keepdim=*/false, extremum_name(kMax)).values;
    this->save_for_backward({x, result});
    return result;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = this->saved(0), result = this->saved(1);
    Tensor ties = std::isnan(result.item()) ? ne(x, x) : eq(x, result);
    const auto count = static_cast<double>(sum(ties).item());
    return {where(ties, grad / count, zeros_like(x))};
  }
};

// d(max_dim x)/dx = the gradient at the index of each max (the first one on ties), 0 elsewhere.
// The indices are a second output, handed out through `indices_out`.
template <bool kMax>
struct ExtremumDim : autograd::OpFunction<ExtremumDim<kMax>> {
  static constexpr const char* name = kMax ? "MaxBackward0" : "MinBackward0";
  static constexpr const char* formula =
      kMax ? "y = max along dim:  dx = dy at the index of each max, 0 elsewhere"
           : "y = min along dim:  dx = dy at the index of each min, 0 elsewhere";
  Shape input_shape;
  int64_t dim = 0;
  bool keepdim = false;
  Tensor forward(const Tensor& x, int64_t wrapped_dim, bool keep, Tensor* indices_out) {
    input_shape = x.shape();
    dim = wrapped_dim;
    keepdim = keep;
    check_dim_not_empty(x, dim, extremum_name(kMax));
    std::vector<bool> reduced(x.dim(), false);
    if (x.dim() > 0) reduced[dim] = true;
    ValuesIndices result = extremum_kernel<kMax>(x, reduced, keepdim, extremum_name(kMax));
    this->save_for_backward({result.indices});
    *indices_out = result.indices;
    return result.values;
  }
  struct Twice {
    static constexpr const char* name = kMax ? "MaxBackwardBackward0" : "MinBackwardBackward0";
  };
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor indices = this->saved(0);
    // Its own derivative (create_graph): gg read at the same indices.
    auto adjoint = [d = dim, k = keepdim, indices](const Tensor& gg) {
      Tensor picked = gather(gg, d, k || gg.dim() == 0 ? indices : indices.unsqueeze(d));
      return k || gg.dim() == 0 ? picked : picked.squeeze(d);
    };
    return {autograd::linear_in_grad<Twice>(
        grad, [&](const Tensor& g) { return scatter(g, indices); }, adjoint)};
  }
  Tensor scatter(const Tensor& grad, const Tensor& indices) const {
    // grad and indices read as [outer, 1, inner], the input as [outer, size of dim, inner].
    kernels::ReduceShape s;
    for (int64_t d = 0; d < static_cast<int64_t>(input_shape.size()); ++d) {
      if (d < dim) s.outer = mul_wrap(s.outer, input_shape[d]);
      if (d == dim) s.reduced = input_shape[d];
      if (d > dim) s.inner = mul_wrap(s.inner, input_shape[d]);
    }
    Tensor grad_data = grad.contiguous();
    Tensor grad_input = zeros(input_shape, grad.dtype());
    dispatch_floating(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::scatter_to_indices(grad_data.data_ptr<T>(), indices.data_ptr<int64_t>(),
                                  grad_input.data_ptr<T>(), s);
    });
    return grad_input;
  }
};

template <bool kMax>
ValuesIndices extremum_along_dim(const Tensor& t, int64_t dim, bool keepdim) {
  detail::check_defined(t, extremum_name(kMax));
  const int64_t d = wrap_dim(dim, t.dim(), extremum_name(kMax));
  Tensor indices;
  Tensor values = autograd::apply<ExtremumDim<kMax>>(t, d, keepdim, &indices);
  return {values, indices};
}

// ---- var ----

void check_var_dtype(const Tensor& t) {
  detail::check_defined(t, "var");
  check(is_floating(t.dtype()),
        "var: std and var only support floating point and complex dtypes (got ",
        dtype_name(t.dtype()), ", input shape ", t.shape(), ")");
}

// var x = sum (x_i - mean)^2 / (n - correction);
// d(var x)/dx_i = 2 (x_i - mean) / (n - correction) (the terms through the mean sum to zero).
Tensor variance_kernel(const Tensor& x, const std::vector<bool>& reduced, int64_t correction,
                       bool keepdim, bool take_sqrt) {
  numel_of(x.shape(), take_sqrt ? "std" : "var");  // an expanded view may count beyond int64
  ReductionInput in = reduction_input(x, reduced);
  Tensor out = empty_result(x, in, reduced, keepdim, x.dtype());
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::variance(in.data.data_ptr<T>(), out.data_ptr<T>(), in.shape, correction, take_sqrt);
  });
  return finish_result(out);
}

struct Var : autograd::OpFunction<Var> {
  static constexpr const char* name = "VarBackward0";
  static constexpr const char* formula =
      "y = sum (x_i - mean)^2 / (n - c):  dy/dx_i = 2 (x_i - mean) / (n - c)";
  std::vector<bool> reduced;
  int64_t correction = 1;
  bool keepdim = false;
  Tensor forward(const Tensor& x, const std::vector<bool>& flags, int64_t corr, bool keep) {
    reduced = flags;
    correction = corr;
    keepdim = keep;
    save_for_backward({x});
    return variance_kernel(x, reduced, correction, keepdim, /*take_sqrt=*/false);
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0);
    // As PyTorch: n - correction, not clamped at 0 as in the forward's divisor.
    const double dof = static_cast<double>(reduced_count(x.shape(), reduced)) -
                       static_cast<double>(correction);  // in double: no int64 overflow
    Tensor centered = x - mean(x, dim_list(reduced), /*keepdim=*/true);
    // In PyTorch 1.13's order (var_backward: (2.0 / dof) * grad * (self - mean)), so the float
    // roundings are its own.
    return {((2.0 / dof) * expand_to_input(grad, reduced, keepdim, x.shape())) * centered};
  }
};

// std x = sqrt(var x):  d(std x)/dx_i = (x_i - mean) / ((n - correction) std x), 0 where
// std x = 0 (the square root taken in double, as PyTorch's std kernel does).
struct Std : autograd::OpFunction<Std> {
  static constexpr const char* name = "StdBackward0";
  static constexpr const char* formula =
      "y = sqrt(var x):  dy/dx_i = (x_i - mean) / ((n - c) y), 0 where y = 0";
  std::vector<bool> reduced;
  int64_t correction = 1;
  bool keepdim = false;
  Tensor forward(const Tensor& x, const std::vector<bool>& flags, int64_t corr, bool keep) {
    reduced = flags;
    correction = corr;
    keepdim = keep;
    Tensor result = variance_kernel(x, reduced, correction, keepdim, /*take_sqrt=*/true);
    save_for_backward({x, result});
    return result;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0), result = saved(1);
    const double dof = static_cast<double>(reduced_count(x.shape(), reduced)) -
                       static_cast<double>(correction);  // in double: no int64 overflow
    Tensor centered = x - mean(x, dim_list(reduced), /*keepdim=*/true);
    // PyTorch 1.13's std_backward: var's backward of grad / (2 std), with 0 where std is 0 (a
    // constant row's gradient is 0, not 0 / 0), in its order of roundings.
    const Tensor grad_var = masked_fill(grad / (result * 2.0), eq(result, 0.0), 0.0);
    return {((2.0 / dof) * expand_to_input(grad_var, reduced, keepdim, x.shape())) * centered};
  }
};

// ---- argmax (not differentiable) ----

void check_argmax_dtype(const Tensor& t) {
  detail::check_defined(t, "argmax");
  check(t.dtype() != DType::Bool, "argmax: not implemented for bool tensors (input shape ",
        t.shape(), ")");
}

}  // namespace

// ---- the public functions ----

Tensor sum(const Tensor& t) { return autograd::apply<SumAll>(t); }

Tensor sum(const Tensor& t, const std::vector<int64_t>& dims, Bool keepdim) {
  return autograd::apply<SumDims>(t, reduced_dims(t, dims, "sum"), bool(keepdim));
}

Tensor mean(const Tensor& t) {
  detail::check_defined(t, "mean");
  check_mean_dtype(t);
  return autograd::apply<MeanAll>(t);
}

Tensor mean(const Tensor& t, const std::vector<int64_t>& dims, Bool keepdim) {
  detail::check_defined(t, "mean");
  check_mean_dtype(t);
  return autograd::apply<MeanDims>(t, reduced_dims(t, dims, "mean"), bool(keepdim));
}

Tensor max(const Tensor& t) { return autograd::apply<ExtremumAll<true>>(t); }
Tensor min(const Tensor& t) { return autograd::apply<ExtremumAll<false>>(t); }

ValuesIndices max(const Tensor& t, Dim dim, Bool keepdim) {
  return extremum_along_dim<true>(t, dim, keepdim);
}
ValuesIndices min(const Tensor& t, Dim dim, Bool keepdim) {
  return extremum_along_dim<false>(t, dim, keepdim);
}

Tensor var(const Tensor& t) { return var(t, Correction(1)); }
Tensor var(const Tensor& t, Correction correction) {
  check_var_dtype(t);
  return autograd::apply<Var>(t, all_dims(t), correction.value, /*keepdim=*/false);
}
Tensor var(const Tensor& t, int64_t dim, Bool unbiased, Bool keepdim) {
  return var(t, std::vector<int64_t>{dim}, Correction(unbiased ? 1 : 0), keepdim);
}
Tensor var(const Tensor& t, const std::vector<int64_t>& dims, Bool unbiased, Bool keepdim) {
  return var(t, dims, Correction(unbiased ? 1 : 0), keepdim);
}
Tensor var(const Tensor& t, const std::vector<int64_t>& dims, Correction correction, Bool keepdim) {
  check_var_dtype(t);
  return autograd::apply<Var>(t, reduced_dims(t, dims, "var"), correction.value, bool(keepdim));
}

Tensor std(const Tensor& t) { return std(t, Correction(1)); }
Tensor std(const Tensor& t, Correction correction) {
  check_var_dtype(t);
  return autograd::apply<Std>(t, all_dims(t), correction.value, /*keepdim=*/false);
}
Tensor std(const Tensor& t, int64_t dim, Bool unbiased, Bool keepdim) {
  return std(t, std::vector<int64_t>{dim}, Correction(unbiased ? 1 : 0), keepdim);
}
Tensor std(const Tensor& t, const std::vector<int64_t>& dims, Bool unbiased, Bool keepdim) {
  return std(t, dims, Correction(unbiased ? 1 : 0), keepdim);
}
Tensor std(const Tensor& t, const std::vector<int64_t>& dims, Correction correction, Bool keepdim) {
  check_var_dtype(t);
  return autograd::apply<Std>(t, reduced_dims(t, dims, "std"), correction.value, bool(keepdim));
}

Tensor argmax(const Tensor& t) {
  check_argmax_dtype(t);
  check(numel_of(t.shape(), "argmax") > 0,
        "argmax(): Expected reduction dim to be specified for input.numel() == 0. (input shape ",
        t.shape(), ")");
  // The index counts in row-major order, and the first of tied maxima wins in that order, so a
  // strided input is made contiguous first (a reduction may otherwise read it in memory order).
  NoGradGuard no_grad;
  return extremum_kernel<true>(t.contiguous(), all_dims(t), /*keepdim=*/false, "argmax").indices;
}

Tensor argmax(const Tensor& t, Dim dim, Bool keepdim) {
  check_argmax_dtype(t);
  const int64_t d = wrap_dim(dim, t.dim(), "argmax");
  check_dim_not_empty(t, d, "argmax");
  std::vector<bool> reduced(t.dim(), false);
  if (t.dim() > 0) reduced[d] = true;
  return extremum_kernel<true>(t, reduced, keepdim, "argmax").indices;
}

// ---- Tensor methods ----

Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(Dim dim, Bool keepdim) const {
  return ember::sum(*this, std::vector<int64_t>{dim}, keepdim);
}
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(Dim dim, Bool keepdim) const {
  return ember::mean(*this, std::vector<int64_t>{dim}, keepdim);
}
Tensor Tensor::argmax(Dim dim, Bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::var(Dim dim, Bool unbiased, Bool keepdim) const {
  return ember::var(*this, int64_t{dim}, unbiased, keepdim);
}
Tensor Tensor::std(Dim dim, Bool unbiased, Bool keepdim) const {
  return ember::std(*this, int64_t{dim}, unbiased, keepdim);
}

Tensor sum_to(const Tensor& grad, const Shape& shape, const std::string& node_name) {
  detail::check_defined(grad, "sum_to");
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  bool ok = lead >= 0;
  std::vector<int64_t> dims;
  for (int64_t d = 0; ok && d < grad.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && grad.shape()[d] != 1) {
      dims.push_back(d);
    } else if (shape[d - lead] != grad.shape()[d]) {
      ok = false;
    }
  }
  check(ok, node_name, ": backward returned a gradient of shape ", grad.shape(),
        " for an input of shape ", shape, " (not a broadcast of it)");
  Tensor reduced = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return reduced.reshape(shape);
}

}  // namespace ember
