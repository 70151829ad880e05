// A template kernel written once over Highway, run for float and double. HWY_EXPORT and
// HWY_DYNAMIC_DISPATCH take the name of a plain function, not a template (Highway 1.0.3 has no
// HWY_EXPORT_T), so each type gets an entry point named Kernel##F32 / Kernel##F64. Three macros,
// one for each part of a Highway source file (tanh.cpp shows the parts):
//
// - In the part compiled once per target, after the template, inside namespace HWY_NAMESPACE:
//     EMBER_ENTRIES_BY_TYPE(MultiplyRow)
//   expands to the two entry points, names of the template's two instances:
//     constexpr auto& MultiplyRowF32 = MultiplyRow<float>;
//     constexpr auto& MultiplyRowF64 = MultiplyRow<double>;
// - In the HWY_ONCE part, at the same namespace level (ember::kernels for ember::kernels::N_AVX2):
//     EMBER_EXPORT_BY_TYPE(MultiplyRow);
//   expands to HWY_EXPORT(MultiplyRowF32); HWY_EXPORT(MultiplyRowF64), the tables of each
//   entry point's targets.
// - In a template of T in the HWY_ONCE part:
//     EMBER_DISPATCH_BY_TYPE(T, MultiplyRow, a, b, y, n);
//   runs MultiplyRowF32 or MultiplyRowF64 as T is float or double, on the best target the CPU
//   has that EMBER_CPU_CAPABILITY allows (core/base/cpu.h).
#pragma once

#include <type_traits>

#include "core/base/cpu.h"
#include "hwy/highway.h"

#define EMBER_ENTRIES_BY_TYPE(Kernel)          \
  constexpr auto& Kernel##F32 = Kernel<float>; \
  constexpr auto& Kernel##F64 = Kernel<double>;

#define EMBER_EXPORT_BY_TYPE(Kernel) \
  HWY_EXPORT(Kernel##F32);           \
  HWY_EXPORT(Kernel##F64)

#define EMBER_DISPATCH_BY_TYPE(T, Kernel, ...)        \
  do {                                                \
    ::ember::cpu::apply_capability();                 \
    if constexpr (std::is_same_v<T, float>) {         \
      HWY_DYNAMIC_DISPATCH(Kernel##F32)(__VA_ARGS__); \
    } else {                                          \
      HWY_DYNAMIC_DISPATCH(Kernel##F64)(__VA_ARGS__); \
    }                                                 \
  } while (false)
