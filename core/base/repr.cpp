#include "core/base/repr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <version>

namespace ember {

namespace {

// The shortest scientific digits that read back as the same double ("-1.5e-07"): std::to_chars
// where the standard library has it for floating point; elsewhere (libc++ 13, the wasm preset's)
// the first precision at which printf's correctly rounded digits read back exactly.
std::string shortest_scientific(double value) {
  char buffer[64];
#if defined(__cpp_lib_to_chars)
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  return std::string(buffer, result.ptr);
#else
  for (int precision = 0;; ++precision) {
    const int length = std::snprintf(buffer, sizeof buffer, "%.*e", precision, value);
    if (precision == 16 || std::strtod(buffer, nullptr) == value)
      return std::string(buffer, length);
  }
#endif
}

}  // namespace

// Python's float repr: the shortest digits that read back as the same double, written
// positionally when the decimal exponent is in [-4, 16), in scientific notation otherwise.
std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const std::string scientific = shortest_scientific(value);  // "-1.5e-07"
  const std::size_t e = scientific.find('e');
  std::string mantissa = scientific.substr(0, e);
  const int exponent = std::stoi(scientific.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits = mantissa;  // the significant digits, without the point
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());

  if (exponent >= -4 && exponent < 16) {
    std::string integer_part, fraction;
    if (exponent >= 0) {
      const auto integer_digits = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() <= integer_digits) {
        integer_part = digits + std::string(integer_digits - digits.size(), '0');
        fraction = "0";
      } else {
        integer_part = digits.substr(0, integer_digits);
        fraction = digits.substr(integer_digits);
      }
    } else {
      integer_part = "0";
      fraction = std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    }
    return sign + integer_part + "." + fraction;
  }
  std::string text = sign + digits.substr(0, 1);
  if (digits.size() > 1) text += "." + digits.substr(1);
  const int magnitude = std::abs(exponent);
  text += exponent < 0 ? "e-" : "e+";
  if (magnitude < 10) text += "0";
  return text + std::to_string(magnitude);
}

}  // namespace ember
