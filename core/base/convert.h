// Element conversions with PyTorch's checks, shared by Tensor's accessors (core/tensor/tensor.cpp), the
// factories (core/tensor/factories.cpp) and the copies (core/ops/copy.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/base/args.h"
#include "core/base/error.h"

namespace ember::detail {

// A double converted to element type T; an int64 that cannot hold it (inf, nan, out of range)
// is an Error, as in PyTorch ("value cannot be converted to type int64_t without overflow"),
// never undefined behaviour. With `fill` (fill_, full, set, masked_fill: PyTorch's Scalar
// checks), a finite value beyond float32's range is an Error too ("value cannot be converted to
// type float without overflow"); inf and nan are kept.
template <typename T>
T checked_cast(double value, const char* op, bool fill = false) {
  if constexpr (std::is_same_v<T, int64_t>) {
    check(std::isfinite(value) && value >= -9223372036854775808.0 && value < 9223372036854775808.0,
          op, ": value ", value, " cannot be converted to type int64 without overflow");
  } else if constexpr (std::is_same_v<T, float>) {
    check(!fill || !std::isfinite(value) ||
              std::fabs(value) <= static_cast<double>(std::numeric_limits<float>::max()),
          op, ": value ", value, " cannot be converted to type float without overflow");
  }
  return static_cast<T>(value);
}

// A fill value (fill_, set, full, masked_fill) as element type T: an integer into int64 exactly
// (beyond 2^53 a double is not), anything else through checked_cast's Scalar checks.
template <typename T>
T scalar_to_element(Scalar value, const char* op) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (value.is_integral()) return value.to_int64();
  }
  return checked_cast<T>(value.to_double(), op, /*fill=*/true);
}

// One element converted from S to D; a float that an int64 cannot hold is an Error.
template <typename D, typename S>
D convert_element(S v, const char* op) {
  if constexpr (std::is_same_v<D, int64_t> && std::is_floating_point_v<S>) {
    check(std::isfinite(v) && v >= S(-9223372036854775808.0) && v < S(9223372036854775808.0), op,
          ": value ", v, " cannot be converted to type int64 without overflow");
  }
  return static_cast<D>(v);
}

}  // namespace ember::detail
