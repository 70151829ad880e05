// What Ember's Highway kernels share: a fused multiply-add that is fused on every target
// (core/base/fma-inl.h, which the generator uses too), PyTorch's eight-lane sums on vectors of
// any width, and a lookup in a table of 32 entries (core/kernels/README.md, "One source for
// every CPU").
//
// Included by a kernel file after its foreach_target.h, once per Highway target: the guard
// below flips with HWY_TARGET_TOGGLE (Highway's convention for -inl.h files), so each target
// gets its own copy in its own namespace (ember::kernels::N_AVX2, N_SCALAR, ...).

#ifndef EMBER_KERNELS_SIMD_ONCE_  // (not per target: defined once)
#define EMBER_KERNELS_SIMD_ONCE_
#include <cstdint>

namespace ember::kernels {

// A table of 32 64-bit entries as look_up_32_pair reads it: the entries, and the same in their
// low and high 32-bit halves (the AVX2 lookup permutes halves).
struct Table32 {
  alignas(64) uint64_t entries[32];
  alignas(64) uint32_t lo[32];
  alignas(64) uint32_t hi[32];
};

constexpr Table32 make_table32(const uint64_t (&entries)[32]) {
  Table32 t{};
  for (int j = 0; j < 32; ++j) {
    t.entries[j] = entries[j];
    t.lo[j] = static_cast<uint32_t>(entries[j]);
    t.hi[j] = static_cast<uint32_t>(entries[j] >> 32);
  }
  return t;
}

}  // namespace ember::kernels
#endif  // EMBER_KERNELS_SIMD_ONCE_

#if defined(EMBER_KERNELS_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_SIMD_INL_H_
#undef EMBER_KERNELS_SIMD_INL_H_
#else
#define EMBER_KERNELS_SIMD_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/base/fma-inl.h"
#include "core/kernels/reduce_kernels.h"  // lane_total
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// a * b + c and a * b - c with one rounding, on every target (core/base/fma-inl.h).
using simd::HWY_NAMESPACE::Fma;
using simd::HWY_NAMESPACE::Fms;

// ta, tb = table.entries[k mod 32] for the k's in the low five bits of ka's and kb's 64-bit
// lanes (exp's 2^(j / 32)). AVX2 and AVX3 look up by permutes within registers
// (simd_x86-inl.h, for what Highway 1.0.3 lacks); the other targets gather, a load per lane
// where the target has no gather instruction (NEON, SCALAR).
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include "core/kernels/simd_x86-inl.h"
#else
template <class V>
HWY_INLINE void look_up_32_pair(const Table32& table, V ka, V kb, V& ta, V& tb) {
  const hn::DFromV<V> du;
  const hn::RebindToSigned<decltype(du)> di;
  const V mask = hn::Set(du, 31);
  ta = hn::GatherIndex(du, table.entries, hn::BitCast(di, hn::And(ka, mask)));
  tb = hn::GatherIndex(du, table.entries, hn::BitCast(di, hn::And(kb, mask)));
}
#endif

// The tail of a row: a vector of its last `count` values (count <= Lanes(d)), the other lanes 0,
// and the store of such a vector's first `count` lanes, never touching memory past x + count.
// Masked loads and stores where they cannot fault: where HWY_MEM_OPS_MIGHT_FAULT is 0 (AVX3,
// SVE), and on AVX2 for lanes of 32 or 64 bits (Highway's vmaskmov there; the flag is for its
// 8- and 16-bit lanes, which load whole vectors). Never on SCALAR and EMU128, whose MaskedLoad
// reads the whole vector and then zeroes lanes (an out-of-bounds read at count 0, which ASan
// reports). Elsewhere a copy through a buffer.
template <typename T>
constexpr bool kMaskedMemOps = HWY_TARGET != HWY_SCALAR&& HWY_TARGET != HWY_EMU128 &&
                               (!HWY_MEM_OPS_MIGHT_FAULT ||
                                (HWY_TARGET == HWY_AVX2 && sizeof(T) >= 4));

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> load_first(D d, const T* HWY_RESTRICT x, size_t count) {
  if constexpr (kMaskedMemOps<T>) {
    return hn::MaskedLoad(hn::FirstN(d, count), d, x);
  } else {
    HWY_ALIGN T buffer[hn::MaxLanes(d)];
    for (size_t i = 0; i < hn::MaxLanes(d); ++i) buffer[i] = i < count ? x[i] : T(0);
    return hn::Load(d, buffer);
  }
}

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void store_first(D d, hn::Vec<D> v, T* HWY_RESTRICT x, size_t count) {
  if constexpr (kMaskedMemOps<T>) {
    hn::BlendedStore(v, hn::FirstN(d, count), d, x);
  } else {
    HWY_ALIGN T buffer[hn::MaxLanes(d)];
    hn::Store(v, d, buffer);
    for (size_t i = 0; i < hn::MaxLanes(d); ++i) {
      if (i < count) x[i] = buffer[i];
    }
  }
}

// A vector of the `count` values from x (count <= Lanes(d)) and its store: a whole vector's
// unaligned load and store, a last partial vector's load_first and store_first.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> load_lanes(D d, const T* HWY_RESTRICT x, size_t count) {
  return count == hn::Lanes(d) ? hn::LoadU(d, x) : load_first(d, x, count);
}

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void store_lanes(D d, hn::Vec<D> v, T* HWY_RESTRICT x, size_t count) {
  if (count == hn::Lanes(d)) {
    hn::StoreU(v, d, x);
  } else {
    store_first(d, v, x, count);
  }
}

// An elementwise loop over [begin, end) a vector of T at a time: f(i, d, count) for the `count`
// elements from i, count = Lanes(d) but in a last partial vector (for load_lanes and
// store_lanes).
template <typename T, class F>
HWY_INLINE void for_each_vector(int64_t begin, int64_t end, const F& f) {
  const hn::ScalableTag<T> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = begin;
  for (; i + N <= end; i += N) f(i, d, static_cast<size_t>(N));
  if (i < end) f(i, d, static_cast<size_t>(end - i));
}

// Virtual lanes. PyTorch adds a row in eight float lanes (element j into lane j mod 8, its AVX2
// kernels', on AVX-512 machines too: vec_lane_sum in reduce_kernels.h). A sum that must give
// those bits keeps eight running sums whatever the vector width: LaneSums<D>, for vectors of D of
// at most eight lanes (one vector of eight sums on AVX2 and AVX3, two of four on NEON, eight of
// one on SCALAR). The row's length then picks the order of the final additions (lane_total).
//
// update(j, f) replaces the sums of the elements j, ..., j + Lanes(d) - 1 (j a multiple of
// Lanes(d)) by f(s), s their current vector. The sums start at +0. In registers where vectors
// have a fixed width; in memory on SVE, whose vectors can be neither in an array nor in a class.
template <class D>
class LaneSums {
 public:
  LaneSums() {
#if HWY_HAVE_SCALABLE
    for (float& s : sums_) s = 0.0f;
#else
    for (auto& v : v_) v = hn::Zero(D());
#endif
  }

  template <class F>
  HWY_INLINE void update(int64_t j, const F& f) {
#if HWY_HAVE_SCALABLE
    const D d;
    float* s = sums_ + j % 8;
    hn::StoreU(f(hn::LoadU(d, s)), d, s);
#else
    auto& v = v_[static_cast<size_t>(j) / kN % kK];
    v = f(v);
#endif
  }

  // The eight sums, sum j (of the elements j mod 8) in out[j].
  HWY_INLINE void store(float* out) const {
#if HWY_HAVE_SCALABLE
    for (int i = 0; i < 8; ++i) out[i] = sums_[i];
#else
    for (size_t q = 0; q < kK; ++q) hn::StoreU(v_[q], D(), out + q * kN);
#endif
  }

  // lane_total (reduce_kernels.h) of the sums, for a row of `row` values.
  HWY_INLINE float total(int64_t row) const {
    HWY_ALIGN float sums[8];
    store(sums);
    return lane_total(sums, row);
  }

 private:
#if HWY_HAVE_SCALABLE
  HWY_ALIGN float sums_[8];
#else
  static constexpr size_t kN = hn::MaxLanes(D()), kK = 8 / kN;
  static_assert(kN <= 8 && 8 % kN == 0, "eight sums in whole vectors");
  hn::Vec<D> v_[kK];
#endif
};

using D8 = hn::CappedTag<float, 8>;

// x[i, n) as a vector of D8 (n - i lanes of it when fewer), the lanes past n set to `pad`.
HWY_INLINE hn::Vec<D8> load_padded(const float* x, int64_t i, int64_t n, float pad) {
  const D8 d;
  const size_t live = static_cast<size_t>(std::clamp<int64_t>(n - i, 0, hn::Lanes(d)));
  return hn::IfThenElse(hn::FirstN(d, live), load_first(d, x + i, live), hn::Set(d, pad));
}

// vec_lane_dot(a, b, n, row) (reduce_kernels.h), the same bits: the sums start as the first
// eight products, rounded (lanes past n: 0 * 0 = +0, as there); every later product is added
// with one rounding (Fma). A last partial group pads a with -0 and b with +0:
// fma(-0, +0, s) = s for every sum s, +0 and -0 included.
HWY_INLINE float lane_dot(const float* a, const float* b, int64_t n, int64_t row) {
  const D8 d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  using V = hn::Vec<D8>;
  LaneSums<D8> sums;
  for (int64_t i = 0; i < 8; i += N) {
    sums.update(i,
                [&](V) { return hn::Mul(load_padded(a, i, n, 0.0f), load_padded(b, i, n, 0.0f)); });
  }
  int64_t k = 8;
  for (; k + 8 <= n; k += 8) {
    for (int64_t i = k; i < k + 8; i += N) {
      sums.update(i, [&](V s) { return Fma(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s); });
    }
  }
  for (int64_t i = k; i < n; i += N) {
    sums.update(
        i, [&](V s) { return Fma(load_padded(a, i, n, -0.0f), load_padded(b, i, n, 0.0f), s); });
  }
  return sums.total(row);
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // EMBER_KERNELS_SIMD_INL_H_
