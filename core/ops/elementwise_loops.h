// The loops every elementwise op runs (core/ops/arithmetic.cpp, activations.cpp, selection.cpp,
// inplace.cpp): out = f(a, b) and out = f(x) over broadcast, strided operands, with PyTorch's
// type promotion, and a Python scalar next to a tensor made a 0-d tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>

#include "core/kernels/iterate.h"
#include "core/tensor/tensor.h"

namespace ember::detail {

// PyTorch's type promotion for two operands: a 0-d tensor (like a wrapped Python scalar) does
// not raise the dtype of a higher-dimensional tensor of the same kind (float vs. integer).
inline DType result_type(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) != (b.dim() == 0)) {
    const Tensor& big = a.dim() == 0 ? b : a;
    const Tensor& small = a.dim() == 0 ? a : b;
    if (is_floating(big.dtype()) || !is_floating(small.dtype())) {
      return big.dtype() == DType::Bool ? promote(big.dtype(), small.dtype()) : big.dtype();
    }
    // A 0-d operand of a higher category (float vs. integer) gives its own dtype: a wrapped
    // Python float is a float32 0-d tensor here (wrap_scalar), a float64 0-d tensor stays float64.
    return small.dtype();
  }
  return promote(a.dtype(), b.dtype());
}

// The same rule for any number of operands (torch.result_type of a TensorIterator's inputs):
// the promoted dtype of the operands with dims, raised by the promoted dtype of the 0-d ones
// only when those are of a higher category (or the former are bool). addcmul(x, s, y) with x and
// y float32 [n] and s a float64 0-d tensor is float32, as PyTorch's.
inline DType result_type(std::initializer_list<const Tensor*> operands) {
  std::optional<DType> dims, zero_dims;
  for (const Tensor* t : operands) {
    std::optional<DType>& group = t->dim() == 0 ? zero_dims : dims;
    group = group ? promote(*group, t->dtype()) : t->dtype();
  }
  if (!dims) return *zero_dims;
  if (!zero_dims) return *dims;
  if (is_floating(*dims) || !is_floating(*zero_dims)) {
    return *dims == DType::Bool ? promote(*dims, *zero_dims) : *dims;
  }
  return *zero_dims;
}

// int64 arithmetic wraps around on overflow as PyTorch's does (two's complement), computed in
// uint64 where wrapping is defined instead of signed overflow (undefined behaviour).
template <typename T>
T wrapping_add(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  } else {
    return x + y;
  }
}
template <typename T>
T wrapping_sub(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  } else {
    return x - y;
  }
}
template <typename T>
T wrapping_mul(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  } else if constexpr (std::is_same_v<T, bool>) {
    return x && y;
  } else {
    return x * y;
  }
}

// The loops of out = f(a, b) over the broadcast shape, computing in T (a and b converted to T's
// dtype first) and writing R (T, or bool for comparisons).
template <typename T, typename R, typename F>
Tensor binary_loops(const Tensor& a, const Tensor& b, const char* op, F f) {
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor x = a.to(dtype_of<T>()), y = b.to(dtype_of<T>());
  // binary_map writes every element of `out` (or throws, and `out` is never seen).
  Tensor out = detail::empty_for_overwrite(shape, dtype_of<R>());
  Shape xs = broadcast_strides(x.shape(), x.strides(), shape);
  Shape ys = broadcast_strides(y.shape(), y.strides(), shape);
  kernels::binary_map(out.data_ptr<R>(), x.data_ptr<T>(), xs, y.data_ptr<T>(), ys, shape,
                      [&](T u, T v) { return static_cast<R>(f(u, v)); });
  return out;
}

// out = f(a, b) in dtype `compute`, with a result of the same dtype. (One instantiation of the
// loops per dtype: the C++ type of the result is the compute type, never a second dispatch.)
template <typename F>
Tensor binary_kernel(const Tensor& a, const Tensor& b, DType compute, const char* op, F f) {
  return dispatch(compute, [&](auto tag) {
    using T = decltype(tag);
    return binary_loops<T, T>(a, b, op, f);
  });
}

// f(x) elementwise in x's dtype (after `compute` conversion).
// Bool tensors take no arithmetic here (PyTorch refuses most of it too).
template <typename F>
Tensor unary_kernel(const Tensor& t, DType compute, F f) {
  check(compute != DType::Bool, OpScope::name_or("elementwise op"),
        ": not implemented for bool tensors; convert with .to(float32) first (shape ", t.shape(),
        ")");
  Tensor x = t.to(compute);
  Tensor out = detail::empty_for_overwrite(x.shape(), compute);  // unary_map writes it all
  auto run = [&](auto tag) {
    using T = decltype(tag);
    kernels::unary_map(out.data_ptr<T>(), x.data_ptr<T>(), x.shape(), x.strides(),
                       [&](T v) { return static_cast<T>(f(v)); });
  };
  if (compute == DType::Int64) {
    run(int64_t{});
  } else {
    dispatch_floating(compute, run);
  }
  return out;
}

// Math functions work in floating point; integer inputs become the default dtype
// (get_default_dtype(): float32 unless set), as in PyTorch.
inline DType floating_type(const Tensor& t) {
  return is_floating(t.dtype()) ? t.dtype() : get_default_dtype();
}

// A Python scalar next to a tensor: a 0-d tensor of the tensor's dtype, or the default dtype when
// the tensor is integral and the scalar is not; a bool scalar a 0-d bool tensor, which the
// promotion of result_type makes the tensor's dtype (mask + true is bool, x + true is x's dtype)
// and which the subtraction refuses, as PyTorch's wrapped True.
// A float32 scalar is rounded like PyTorch's (1e300 becomes inf, no error: only fill checks).
inline Tensor wrap_scalar(Scalar scalar, const Tensor& like, const char* op = "scalar op") {
  check_defined(like, op);
  if (scalar.is_bool()) {
    Tensor t = empty({}, DType::Bool);
    *t.data_ptr<bool>() = scalar.to_int64() != 0;
    return t;
  }
  DType d = like.dtype();
  if (!scalar.is_integral() && !is_floating(d)) d = get_default_dtype();
  if (d == DType::Bool) d = DType::Int64;
  if (d == DType::Int64) {  // exact, also beyond 2^53
    Tensor t = empty({}, d);
    *t.data_ptr<int64_t>() = scalar.to_int64();
    return t;
  }
  const double value = scalar.to_double();
  if (d == DType::Float32) {
    Tensor t = empty({}, d);
    *t.data_ptr<float>() = static_cast<float>(value);
    return t;
  }
  return scalar_tensor(value, d);
}

}  // namespace ember::detail
