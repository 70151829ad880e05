// The call into a kernel that a file exports once per type (HWY_EXPORT takes plain functions, so
// a template kernel has entry points Kernel##F32 and Kernel##F64): in the file's HWY_ONCE part,
//   EMBER_DISPATCH_BY_TYPE(T, MultiplyRow, a, b, y, n);
// runs MultiplyRowF32 or MultiplyRowF64 as T is float or double, on the best target the CPU has
// that EMBER_CPU_CAPABILITY allows (core/base/cpu.h).
#pragma once

#include <type_traits>

#include "core/base/cpu.h"
#include "hwy/highway.h"

#define EMBER_DISPATCH_BY_TYPE(T, Kernel, ...)        \
  do {                                                \
    ::ember::cpu::apply_capability();                 \
    if constexpr (std::is_same_v<T, float>) {         \
      HWY_DYNAMIC_DISPATCH(Kernel##F32)(__VA_ARGS__); \
    } else {                                          \
      HWY_DYNAMIC_DISPATCH(Kernel##F64)(__VA_ARGS__); \
    }                                                 \
  } while (false)
