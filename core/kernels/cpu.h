// Which vector kernels run. Ember is built for x86-64-v3 (AVX2 + FMA); its AVX-512 kernels
// (function-level target attributes, core/kernels/README.md) are picked at run time on CPUs that
// have AVX-512F. EMBER_CPU_CAPABILITY=avx2 in the environment keeps the AVX2 kernels on such a
// CPU too (as PyTorch's ATEN_CPU_CAPABILITY), so that the AVX2 path can be measured and tested
// on an AVX-512 machine; it is read once, at the first kernel that asks. Any other value, or
// none, picks the best the CPU has.
#pragma once

namespace ember::kernels {

// Whether the AVX-512 kernels run: the CPU has AVX-512F and EMBER_CPU_CAPABILITY is not "avx2".
bool use_avx512();

// Whether the CPU has AVX-512F, whatever EMBER_CPU_CAPABILITY says (for tests that run both paths).
bool cpu_has_avx512f();

}  // namespace ember::kernels
