// Parameter types that stop a literal from binding to the wrong parameter.
//
// C++ converts int to bool and bool to int silently, and a braced {1} is an int as readily as a
// list: var(x, {1}, 2) would mean unbiased=true, x.sum(0, 1) keepdim=true, max(x, true) dim 1.
// A flag parameter of type Bool takes a bool and nothing else, a Dim any integer but a bool, so
// those calls do not compile (tests/core/ops/test_reduce.cpp checks it).
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "core/base/error.h"

namespace ember {

namespace detail {
// An integer of any C++ type as int64, exactly, or an Error naming it: an unsigned value above
// 2^63 - 1 (a size_t from a subtraction that wrapped, uint64_t(-1)) does not wrap to a negative
// one, as Python's int refuses it ("Overflow when unpacking long"). In a constant expression
// the Error is a compile error.
template <typename I>
requires std::integral<I>
constexpr int64_t exact_int64(I value, const char* what) {
  static_assert(sizeof(I) <= sizeof(int64_t), "an integer wider than 64 bits does not fit int64");
  if constexpr (std::is_unsigned_v<I> && sizeof(I) == sizeof(int64_t)) {
    if (value > static_cast<I>(INT64_MAX)) {
      fail(what, ": the integer ", value, " is out of int64's range [", INT64_MIN, ", ", INT64_MAX,
           "] (PyTorch's integers are int64: Python says \"Overflow when unpacking ", "long\")");
    }
  }
  return static_cast<int64_t>(value);
}
}  // namespace detail

// A flag: only a bool binds (keepdim, unbiased, ...).
class Bool {
 public:
  template <typename B>
  requires std::same_as<B, bool>
  constexpr Bool(B value) : value_(value) {}  // NOLINT: implicit on purpose
  constexpr operator bool() const { return value_; }

 private:
  bool value_;
};

// A dimension index: any integer type but bool (a double or a bool does not compile); an unsigned
// value above 2^63 - 1 is an Error (size_t(-1) is not dim -1).
class Dim {
 public:
  template <typename I>
  requires(std::integral<I> && !std::same_as<I, bool>) constexpr Dim(I value)
      : value_(detail::exact_int64(value, "dim")) {}  // NOLINT: implicit on purpose
  constexpr operator int64_t() const { return value_; }

 private:
  int64_t value_;
};

// The divisor n - correction of var/std, named at the call: var(x, {1}, Correction(0)).
struct Correction {
  constexpr explicit Correction(int64_t v) : value(v) {}
  int64_t value;
};

}  // namespace ember

namespace ember {

// A number beside a tensor, as Python's: an integer keeps an integer tensor's dtype, a floating
// point number makes it float32 (torch.arange(3) + 2 is int64, torch.arange(3) + 2.0 is float32),
// as libtorch's c10::Scalar. Integers are kept exactly (int64 beyond 2^53): every C++ integer
// type (char, int8_t to uint64_t, size_t, long long) is its value as int64, and an unsigned
// value above 2^63 - 1 is an Error naming it, not a negative number. A C++ bool is a bool
// scalar, as Python's True: it counts as the integer 0 or 1 wherever an integer is taken
// (fill_(true), clamp(false, true) of an int64 tensor), keeps a bool tensor bool (mask + true is
// bool, as in PyTorch) and refuses what PyTorch refuses of a bool (x - true, alpha=true for a
// result that is not bool, a bool tensor's pow or clamp with bool arguments).
class Scalar {
 public:
  template <typename I>
  requires(std::integral<I> && !std::same_as<I, bool>) constexpr Scalar(I value)  // NOLINT
      : integral_(true),
        int_(detail::exact_int64(value, "Scalar")),
        double_(static_cast<double>(value)) {}
  template <typename B>
  requires std::same_as<B, bool>
  constexpr Scalar(B value)  // NOLINT: implicit on purpose
      : integral_(true), bool_(true), int_(value ? 1 : 0), double_(value ? 1.0 : 0.0) {}
  template <typename F>
  requires std::floating_point<F>
  constexpr Scalar(F value)  // NOLINT: implicit on purpose
      : integral_(false), double_(static_cast<double>(value)) {}

  constexpr bool is_integral() const { return integral_; }  // an integer or a bool
  constexpr bool is_bool() const { return bool_; }
  constexpr double to_double() const { return double_; }
  constexpr int64_t to_int64() const { return int_; }  // integral scalars only

 private:
  bool integral_;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_;
};

}  // namespace ember

// A chained option of an options struct, as libtorch's TORCH_ARG: inside a struct,
//   EMBER_ARG(double, momentum) = 0;
// declares a member momentum_ (here initialised to 0), a setter that returns the struct, so that
// SGDOptions(0.1).momentum(0.9).nesterov(true) chains, and a getter: options.momentum().
#define EMBER_ARG(T, name)                  \
 public:                                    \
  auto& name(const T& value) {              \
    name##_ = value;                        \
    return *this;                           \
  }                                         \
  const T& name() const { return name##_; } \
                                            \
 private:                                   \
  T name##_
