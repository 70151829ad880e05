// A fused multiply-add that is fused on every Highway target: what the generator's normal block
// (core/base/generator_simd.cpp) and the kernels (core/kernels/simd-inl.h) write for one.
//
// Included after a file's foreach_target.h, once per Highway target: the guard below flips with
// HWY_TARGET_TOGGLE (Highway's convention for -inl.h files), so each target gets its own copy in
// its own namespace (ember::simd::N_AVX2, N_SCALAR, ...).

#if defined(EMBER_BASE_FMA_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_BASE_FMA_INL_H_
#undef EMBER_BASE_FMA_INL_H_
#else
#define EMBER_BASE_FMA_INL_H_
#endif

#include <cmath>
#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// a * b + c with one rounding, on every target. Highway's MulAdd is that only where the target
// has the instruction (HWY_NATIVE_FMA: AVX2, AVX3, NEON, SVE); on SCALAR (and WASM, EMU128) it is
// a product then a sum, two roundings. There each lane goes through std::fma instead: the bits of
// the other targets, at the price of a call per lane where the CPU has no fma.
template <class V>
HWY_INLINE V Fma(V a, V b, V c) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(a, b, c);
#else
  using T = hn::TFromV<V>;
  const hn::DFromV<V> d;
  HWY_ALIGN T va[hn::MaxLanes(d)], vb[hn::MaxLanes(d)], vc[hn::MaxLanes(d)];
  hn::Store(a, d, va);
  hn::Store(b, d, vb);
  hn::Store(c, d, vc);
  for (size_t i = 0; i < hn::Lanes(d); ++i) vc[i] = std::fma(va[i], vb[i], vc[i]);
  return hn::Load(d, vc);
#endif
}

// a * b - c with one rounding, on every target (as Fma).
template <class V>
HWY_INLINE V Fms(V a, V b, V c) {
#if HWY_NATIVE_FMA
  return hn::MulSub(a, b, c);
#else
  return Fma(a, b, hn::Neg(c));
#endif
}

}  // namespace ember::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // EMBER_BASE_FMA_INL_H_
