// What Ember's Highway kernels share: a fused multiply-add that is fused on every target, and
// PyTorch's eight-lane sums on vectors of any width (core/kernels/README.md, "One source for
// every CPU").
//
// Included by a kernel file after its foreach_target.h, once per Highway target: the guard
// below flips with HWY_TARGET_TOGGLE (Highway's convention for -inl.h files), so each target
// gets its own copy in its own namespace (ember::kernels::N_AVX2, N_SCALAR, ...).
#if defined(EMBER_KERNELS_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_SIMD_INL_H_
#undef EMBER_KERNELS_SIMD_INL_H_
#else
#define EMBER_KERNELS_SIMD_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include "core/kernels/reduce_kernels.h"  // lane_total
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
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

// Virtual lanes. PyTorch adds a row in eight float lanes (element j into lane j mod 8, its AVX2
// kernels', on AVX-512 machines too: vec_lane_sum in reduce_kernels.h). A sum that must give
// those bits keeps eight running sums whatever the vector width: in memory here, eight floats,
// added a vector of at most eight lanes at a time (one vector on AVX2, half of one on AVX3, two
// on NEON, eight one-lane steps on SCALAR; SVE's width is known only at run time, so no array of
// vectors). The row's length then picks the order of the final additions (lane_total).
using D8 = hn::CappedTag<float, 8>;

// Eight floats from x[0, count), the lanes from count on set to `pad`.
HWY_INLINE void copy_padded(const float* x, int64_t count, float pad, float* HWY_RESTRICT out) {
  for (int64_t j = 0; j < 8; ++j) out[j] = j < count ? x[j] : pad;
}

// vec_lane_sum(x, n, row) (reduce_kernels.h), the same bits: the first eight elements become
// the sums (lanes past n hold +0, as there); each later group of eight is added lane by lane; a
// last partial group is padded with -0, which added to any sum leaves it as it is.
HWY_INLINE float lane_sum(const float* x, int64_t n, int64_t row) {
  const D8 d;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float sums[8], block[8];
  copy_padded(x, n, 0.0f, sums);
  int64_t k = 8;
  for (; k + 8 <= n; k += 8) {
    for (size_t q = 0; q < 8; q += N)
      hn::Store(hn::Add(hn::Load(d, sums + q), hn::LoadU(d, x + k + q)), d, sums + q);
  }
  if (k < n) {
    copy_padded(x + k, n - k, -0.0f, block);
    for (size_t q = 0; q < 8; q += N)
      hn::Store(hn::Add(hn::Load(d, sums + q), hn::Load(d, block + q)), d, sums + q);
  }
  return lane_total(sums, row);
}

// vec_lane_dot(a, b, n, row) (reduce_kernels.h), the same bits: the first eight products
// rounded, every later one added with one rounding (Fma). A last partial group pads a with -0
// and b with +0: fma(-0, +0, s) = s for every sum s, +0 and -0 included.
HWY_INLINE float lane_dot(const float* a, const float* b, int64_t n, int64_t row) {
  const D8 d;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float sums[8], pa[8], pb[8];
  copy_padded(a, n, 0.0f, pa);  // lanes past n: 0 * 0 = +0, as vec_lane_dot starts them
  copy_padded(b, n, 0.0f, pb);
  for (size_t q = 0; q < 8; q += N)
    hn::Store(hn::Mul(hn::Load(d, pa + q), hn::Load(d, pb + q)), d, sums + q);
  int64_t k = 8;
  for (; k + 8 <= n; k += 8) {
    for (size_t q = 0; q < 8; q += N) {
      const auto s = Fma(hn::LoadU(d, a + k + q), hn::LoadU(d, b + k + q), hn::Load(d, sums + q));
      hn::Store(s, d, sums + q);
    }
  }
  if (k < n) {
    copy_padded(a + k, n - k, -0.0f, pa);
    copy_padded(b + k, n - k, 0.0f, pb);
    for (size_t q = 0; q < 8; q += N)
      hn::Store(Fma(hn::Load(d, pa + q), hn::Load(d, pb + q), hn::Load(d, sums + q)), d, sums + q);
  }
  return lane_total(sums, row);
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // EMBER_KERNELS_SIMD_INL_H_
