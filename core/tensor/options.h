// TensorOptions: what a factory makes, as libtorch's torch::TensorOptions:
//   rand({2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true))
//   zeros({4}, kInt64)                       // a dtype alone converts to TensorOptions
// and libtorch's dtype constants (kFloat32 = kFloat, kFloat64 = kDouble, kInt64 = kLong, kBool).
//
// The factories keep their DType overloads (zeros(shape, DType::Int64)); the TensorOptions
// overloads below sit beside them, so existing calls are unchanged.
#pragma once

#include <concepts>
#include <cstdint>
#include <vector>

#include "core/base/args.h"
#include "core/base/dtype.h"
#include "core/base/shape.h"

namespace ember {

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kBool = DType::Bool;

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}  // NOLINT: implicit, as libtorch's

  // Setters return a new TensorOptions, so they chain: TensorOptions().dtype(kFloat64)...
  TensorOptions dtype(DType dtype) const {
    TensorOptions out = *this;
    out.dtype_ = dtype;
    return out;
  }
  TensorOptions requires_grad(bool on) const {
    TensorOptions out = *this;
    out.requires_grad_ = on;
    return out;
  }

  DType dtype() const { return dtype_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = get_default_dtype();  // read when the options are made
  bool requires_grad_ = false;
};

class Tensor;
class Generator;

// ---- factories with options (the DType overloads are in core/tensor/tensor.h and core/tensor/random.h) ----
// requires_grad(true) gives a leaf that requires grad; it needs a floating point dtype.
Tensor empty(const Shape& shape, const TensorOptions& options);
Tensor zeros(const Shape& shape, const TensorOptions& options);
Tensor ones(const Shape& shape, const TensorOptions& options);
Tensor full(const Shape& shape, Scalar value, const TensorOptions& options);
Tensor eye(int64_t n, const TensorOptions& options);
Tensor rand(const Shape& shape, const TensorOptions& options, Generator* gen = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options, Generator* gen = nullptr);

// from_vector for float and int64 values (double is in core/tensor/tensor.h); int64 values are copied
// exactly (never through double). The default dtype is the values' own: float32 or int64. A
// braced list, from_vector({1, 2}, {2}), still means std::vector<double> (the default dtype).
template <typename T>
requires(std::same_as<T, float> || std::same_as<T, int64_t>) Tensor
    from_vector(const std::vector<T>& values, const Shape& shape,
                const TensorOptions& options = dtype_of<T>());
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   const TensorOptions& options);

}  // namespace ember
