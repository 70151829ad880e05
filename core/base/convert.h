// Element conversions with PyTorch's checks, shared by Tensor's accessors (core/tensor/tensor.cpp), the
// factories (core/tensor/factories.cpp) and the copies (core/ops/copy.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

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
