// ember::Error: every bad input ends here, with the op's name, the shapes and what was expected.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/small_shape.h"

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "[2, 3]": how shapes appear in every message.
inline std::string shape_str(const Shape& shape) {
  std::ostringstream s;
  s << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& s, const T& first, const Rest&... rest) {
  if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, Shape>) {
    s << shape_str(first);
  } else {
    s << first;
  }
  append(s, rest...);
}
}  // namespace detail

// Builds a message from pieces (shapes print as [2, 3]) and throws ember::Error.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream s;
  detail::append(s, parts...);
  throw Error(s.str());
}

// check(cond, "matmul: shapes ", a, " and ", b, " cannot be multiplied")
template <typename... Parts>
inline void check(bool cond, const Parts&... parts) {
  if (!cond) fail(parts...);
}

// Called inside a catch block around code a client supplied (a custom Function's forward or
// backward, a tensor hook, a module hook): rethrows an ember::Error as it is, and anything else
// as an ember::Error naming `who`, with the std::exception's what() or, for an exception of
// another type (a thrown int or string literal), that type's name. A client's exception of
// another kind then reaches every `catch (const ember::Error&)` with the place it came from,
// and the exception itself stays inside it (std::throw_with_nested): std::rethrow_if_nested(e)
// throws it again, of its own type, for a caller that wants it.
[[noreturn]] void rethrow_as_error(const std::string& who);

// Runs client code `f` (a hook, a custom Function's forward) and returns what it returns; an
// exception it throws leaves as rethrow_as_error(source + ": " + role) makes it. The name is
// built only when something was thrown.
template <typename F>
decltype(auto) call_client(std::string_view source, std::string_view role, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    rethrow_as_error(std::string(source) + ": " + std::string(role));
  }
}

}  // namespace ember
