// EMBER_CPU_CAPABILITY applied to Highway, and the target that runs (core/base/cpu.h).
//
// This file is compiled once per Highway target, like every kernel file (core/kernels/README.md):
// foreach_target.h includes it again for each, so that the target can tell its own name.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/base/cpu.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::cpu::HWY_NAMESPACE {

// This target's bit (HWY_AVX2, HWY_NEON, ...).
int64_t this_target() { return HWY_TARGET; }

}  // namespace ember::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstdlib>
#include <string_view>

#include "core/base/cpu.h"

namespace ember::cpu {

namespace {

// The targets a value of EMBER_CPU_CAPABILITY allows: its own and those below it; 0 for a value
// unknown on this architecture. SCALAR is always allowed (HWY_EMU128 is its twin on compilers
// whose EMU128 works).
int64_t allowed_targets(std::string_view name) {
  const int64_t scalar = HWY_SCALAR | HWY_EMU128;
  if (name == "scalar") return scalar;
#if HWY_ARCH_X86
  if (name == "avx2") return scalar | HWY_AVX2;
  if (name == "avx512") return scalar | HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL;
#elif HWY_ARCH_ARM_A64
  const int64_t neon = scalar | HWY_NEON;
  const int64_t sve = neon | HWY_SVE | HWY_SVE_256;
  if (name == "neon") return neon;
  if (name == "sve") return sve;
  if (name == "sve2") return sve | HWY_SVE2 | HWY_SVE2_128;
#endif
  return 0;
}

HWY_EXPORT(this_target);

}  // namespace

void apply_capability() {
  // A function-local static: C++ runs its initializer once, and a second thread arriving
  // meanwhile waits for it. (hwy::DisableTargets itself is not thread-safe.)
  static const bool applied = [] {
    const char* value = std::getenv("EMBER_CPU_CAPABILITY");
    const int64_t allowed = value != nullptr ? allowed_targets(value) : 0;
    // Caps what hwy::SupportedTargets() reports, which stays what the CPU has; the next
    // HWY_DYNAMIC_DISPATCH chooses again. A build of one target (the wasm preset's EMU128) has
    // no dispatcher and nothing to choose from.
#if (HWY_TARGETS & (HWY_TARGETS - 1)) != 0
    if (allowed != 0) hwy::DisableTargets(~allowed);
#else
    (void)allowed;
#endif
    return true;
  }();
  (void)applied;
}

const char* target_name() {
  apply_capability();
  return hwy::TargetName(HWY_DYNAMIC_DISPATCH(this_target)());
}

bool use_avx512() {
  static const bool avx3 = [] {
    apply_capability();
    return (HWY_DYNAMIC_DISPATCH(this_target)() & (HWY_AVX3 | HWY_AVX3_DL)) != 0;
  }();
  return avx3;
}

bool has_avx512f() {
#if HWY_ARCH_X86 && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

bool has_avx2_fma() {
#if HWY_ARCH_X86 && (defined(__GNUC__) || defined(__clang__))
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace ember::cpu
#endif  // HWY_ONCE
