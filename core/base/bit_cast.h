// ember::bit_cast: std::bit_cast where the standard library has it, the compiler's builtin
// where it does not (libc++ 13, the one Debian's emscripten ships for the wasm preset). Both
// reinterpret the bytes of a value as another type of the same size, with no arithmetic.
#pragma once

#include <bit>
#include <type_traits>

namespace ember {

template <class To, class From>
requires(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> &&
         std::is_trivially_copyable_v<From>) constexpr To bit_cast(const From& from) noexcept {
#if defined(__cpp_lib_bit_cast)
  return std::bit_cast<To>(from);
#else
  return __builtin_bit_cast(To, from);
#endif
}

}  // namespace ember
