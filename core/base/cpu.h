// Which vector code runs: the one place that asks the CPU and reads EMBER_CPU_CAPABILITY.
//
// Ember's vector kernels are written once over Google's Highway and compiled for several targets
// (core/kernels/README.md): AVX3 (AVX-512), AVX2 and SCALAR on x86-64; NEON, SVE, SVE2 and
// SCALAR on arm64. Highway runs the best target the CPU has. EMBER_CPU_CAPABILITY in the
// environment caps it, as PyTorch's ATEN_CPU_CAPABILITY does, so that every path can be tested
// and timed on one machine. Each value allows its target and the ones below it:
//   x86-64: avx512 (AVX3), avx2 (AVX2), scalar (SCALAR)
//   arm64:  sve2 (SVE2), sve (SVE), neon (NEON), scalar (SCALAR)
// A cap never picks a target the CPU lacks (avx512 on an AVX2 CPU runs AVX2). Any other value,
// or none, runs the best the CPU has; an unknown value is not reported (this layer sits below
// the logger, core/autograd/log.h), so check target_name() when in doubt.
// The variable is read once, at the first kernel that dispatches. use_avx512(), has_avx512f()
// and has_avx2_fma() are for the tests.
#pragma once

namespace ember::cpu {

// Applies EMBER_CPU_CAPABILITY to Highway's dispatch, once: thread-safe, whichever thread comes
// first. Every function that dispatches to a Highway kernel calls it first. (Ember's code never
// calls hwy::SupportedTargets(): in Highway 1.0.3 it leaves the target chosen for the next
// dispatch uncapped, until hwy::SetSupportedTargetsForTest or DisableTargets; see
// tests/core/kernels/test_dispatch.cpp.)
void apply_capability();

// The name of the Highway target the kernels run now, EMBER_CPU_CAPABILITY applied: "AVX3",
// "AVX2", "SCALAR" on x86-64; "SVE2", "SVE", "NEON", "SCALAR" on arm64 (hwy::TargetName).
// Tests and benchmarks print it.
const char* target_name();

// Whether the kernels run Highway's AVX3 target (the CPU has AVX-512 and EMBER_CPU_CAPABILITY
// allows it). Asked once, then fixed for the process.
bool use_avx512();

// What the CPU has, whatever EMBER_CPU_CAPABILITY says (for tests that check which path
// runs).
bool has_avx512f();
bool has_avx2_fma();

}  // namespace ember::cpu
