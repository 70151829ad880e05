// The element types a tensor can hold, and how they promote when mixed.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

enum class DType { Bool, Int64, Float32, Float64 };

// The default dtype a program starts with (float32, as PyTorch's). What the factories use is
// get_default_dtype(), which set_default_dtype can change.
inline constexpr DType kDefaultDType = DType::Float32;

// torch.get_default_dtype(): the dtype of a floating tensor made without one (zeros, ones, empty,
// full, rand, randn, eye, tensor, from_vector of doubles, module parameters), of integer
// inputs to math functions and true division, and of the constants PyTorch's code builds with
// torch.tensor (the book's GELU reads it at each call). Integer factories stay int64 and the
// *_like factories keep their input's dtype.
DType get_default_dtype();

// torch.set_default_dtype(d): float32 or float64; any other dtype is an ember::Error
// ("set_default_dtype: only floating-point types are supported as the default type, got int64").
// Process-global, as PyTorch's: one std::atomic, so reading it from threads that run ops while
// another thread sets it is no data race, but which value such an op sees is unspecified; set it
// before starting work, as with PyTorch.
void set_default_dtype(DType dtype);

// Sets the default dtype for a scope and restores the previous one when the scope ends, also
// when it ends by an exception (a failing test leaves the default as it found it):
//   { DefaultDtypeGuard guard(kFloat64); ... }
class DefaultDtypeGuard {
 public:
  explicit DefaultDtypeGuard(DType dtype) : previous_(get_default_dtype()) {
    set_default_dtype(dtype);
  }
  ~DefaultDtypeGuard() { set_default_dtype(previous_); }
  DefaultDtypeGuard(const DefaultDtypeGuard&) = delete;
  DefaultDtypeGuard& operator=(const DefaultDtypeGuard&) = delete;

 private:
  DType previous_;
};

inline std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::Int64:
      return 8;
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
  }
  return 0;
}

// PyTorch's spelling: "torch.float32" prints as float32 in reprs and errors.
inline std::string dtype_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int64:
      return "int64";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
  }
  return "?";
}

inline bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

// Type promotion between two tensors: bool < int64 < float32 < float64.
inline DType promote(DType a, DType b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

// The C++ type behind each dtype.
template <DType D>
struct CType;
template <>
struct CType<DType::Bool> {
  using type = bool;
};
template <>
struct CType<DType::Int64> {
  using type = int64_t;
};
template <>
struct CType<DType::Float32> {
  using type = float;
};
template <>
struct CType<DType::Float64> {
  using type = double;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}

// Calls fn with a value of the C++ type of `t` (a tag: only its type matters):
//   dispatch(t, [&](auto tag) { using T = decltype(tag); ... });
template <typename Fn>
decltype(auto) dispatch(DType t, Fn&& fn) {
  switch (t) {
    case DType::Bool:
      return fn(bool{});
    case DType::Int64:
      return fn(int64_t{});
    case DType::Float32:
      return fn(float{});
    case DType::Float64:
      break;
  }
  return fn(double{});
}

// The same, for float32 and float64 only (the caller has checked is_floating).
template <typename Fn>
decltype(auto) dispatch_floating(DType t, Fn&& fn) {
  if (t == DType::Float32) return fn(float{});
  return fn(double{});
}

}  // namespace ember
