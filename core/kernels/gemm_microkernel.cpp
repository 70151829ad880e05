// The GEMM's vector tiles, written once over Highway and compiled for each target
// (core/kernels/README.md): 6 rows of C by kVecs vectors, the accumulators in registers while k
// runs, one broadcast of A[i, p] and one fused multiply-add per vector of B. The tile's width
// follows the target's vectors (6 x 16 floats on AVX2 and NEON, 6 x 32 on AVX-512); the packing
// follows the tile (Config::NR), and every C[i, j] is one fma chain over k in increasing order
// whatever the width, so every target gives the plain loops' bits (the contract at the top of
// gemm.cpp). The targets without fixed-width vectors (SCALAR, and SVE, whose sizeless vectors
// cannot be held in an array) run the plain loops of gemm_microkernel.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/gemm_microkernel.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>

#include "core/base/fma-inl.h"
#include "core/kernels/dispatch_by_type.h"
#include "core/kernels/gemm_microkernel.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::gemm_detail::HWY_NAMESPACE {

namespace {

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_HAVE_SCALABLE
template <typename T>
Config<T> TargetConfig() {
  return portable_config<T>();
}
#else
namespace hn = hwy::HWY_NAMESPACE;
using simd::HWY_NAMESPACE::Fma;

// Vectors per row of the blocked path's tile: 6 x 2 = 12 accumulators of x86's 16 (AVX2) or 32
// (AVX-512) registers; NEON's 32 registers of 4 floats take 6 x 4 = 24, a row of 16 floats as on
// AVX2.
constexpr int kVecs = HWY_ARCH_ARM ? 4 : 2;

// How a tile reads A[i, p] (i = 0..5, p = 0..kc-1).
enum class ARead {
  kPacked,   // a packed panel: a[p * 6 + i]
  kColumns,  // columns of A contiguous: a[p * ks + i]
  kRows,     // rows of A contiguous: a[i * rs + p]
};

// C[0:6, 0:kPanels * kPerPanel vectors] (+)= A-tile @ B, B in kPanels panels of kPerPanel
// vectors each (row p of panel q at b[q] + p * bs), A read as kA says. The packed panels stream
// through once, so that tile also asks for the B panel eight rows ahead.
template <typename T, ARead kA, int kPanels, int kPerPanel>
HWY_INLINE void tile(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* const (&b)[kPanels],
                     int64_t bs, T* c, int64_t ldc, bool load) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  constexpr int64_t N = hn::MaxLanes(d);
  constexpr int kCols = kPanels * kPerPanel;  // vectors per row
  V acc[6][kCols];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < kCols; ++v)
      acc[i][v] = load ? hn::LoadU(d, c + i * ldc + v * N) : hn::Zero(d);
  }
  const T* bp[kPanels];
  for (int q = 0; q < kPanels; ++q) bp[q] = b[q];
  const T* a3 = a + 3 * rs;  // kRows: rows 0, 1, 2 at a, a + rs, a + 2 rs; rows 3, 4, 5 here
  // One k step: acc += A[:, p] B[p, :].
  const auto step = [&](int64_t p) {
    if constexpr (kA == ARead::kPacked) hwy::Prefetch(bp[0] + 8 * bs);
    V x[kCols];
#pragma GCC unroll 8
    for (int v = 0; v < kCols; ++v) x[v] = hn::LoadU(d, bp[v / kPerPanel] + (v % kPerPanel) * N);
    const T* rows[6];  // A[i, p] at rows[i]
    if constexpr (kA == ARead::kRows) {
      rows[0] = a + p, rows[1] = a + rs + p, rows[2] = a + 2 * rs + p;
      rows[3] = a3 + p, rows[4] = a3 + rs + p, rows[5] = a3 + 2 * rs + p;
    } else {
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) rows[i] = a + i;
    }
    if constexpr (sizeof(T) == 4 && N == 4) {
      // Floats in 128-bit vectors (NEON): the six values of A as two vectors, rows 0..3 and rows
      // 2..5, each row's value a lane of them (Broadcast, which a lane-indexed fmla takes as its
      // operand): two registers for A where six broadcasts take six, so that the 24
      // accumulators, 4 vectors of B and A fit in NEON's 32 registers. A packed (or by columns)
      // has the six values side by side, two loads; A by rows has them a row apart, each loaded
      // into its lane (InsertLane: `ld1 {v.s}[lane]`).
      V a03, a25;
      if constexpr (kA == ARead::kRows) {
        a03 = hn::Set(d, *rows[0]);
        a03 = hn::InsertLane(a03, 1, *rows[1]);
        a03 = hn::InsertLane(a03, 2, *rows[2]);
        a03 = hn::InsertLane(a03, 3, *rows[3]);
        a25 = hn::Set(d, *rows[4]);  // lane 2: row 4
        a25 = hn::InsertLane(a25, 3, *rows[5]);
      } else {
        a03 = hn::LoadU(d, a), a25 = hn::LoadU(d, a + 2);
      }
      const V ai[6] = {hn::Broadcast<0>(a03), hn::Broadcast<1>(a03), hn::Broadcast<2>(a03),
                       hn::Broadcast<3>(a03), hn::Broadcast<2>(a25), hn::Broadcast<3>(a25)};
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 8
        for (int v = 0; v < kCols; ++v) acc[i][v] = Fma(ai[i], x[v], acc[i][v]);
      }
    } else {
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
        const V ai = hn::Set(d, *rows[i]);
#pragma GCC unroll 8
        for (int v = 0; v < kCols; ++v) acc[i][v] = Fma(ai, x[v], acc[i][v]);
      }
    }
    if constexpr (kA != ARead::kRows) a += kA == ARead::kPacked ? 6 : ks;
    for (int q = 0; q < kPanels; ++q) bp[q] += bs;
  };
  if constexpr (sizeof(T) == 4 && N == 4 && kA == ARead::kRows) {
    // NEON, A by rows: one step a loop. Unrolled, GCC 12 keeps lanes of A from the vectors
    // before their last InsertLane as well, and that spills an accumulator (README.md's table).
#pragma GCC unroll 1
    for (int64_t p = 0; p < kc; ++p) step(p);
  } else {
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) step(p);
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < kCols; ++v) hn::StoreU(acc[i][v], d, c + i * ldc + v * N);
  }
}

// The blocked path's tile: 6 x NR, NR = kVecs vectors.
template <typename T>
constexpr int64_t kNR = kVecs* hn::MaxLanes(hn::ScalableTag<T>());

template <typename T>
void packed(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool load) {
  tile<T, ARead::kPacked, 1, kVecs>(kc, a, 1, 6, {b}, kNR<T>, c, ldc, load);
}

template <typename T>
void in_place(int64_t kc, const T* a, int64_t lda_row, const T* b, T* c, int64_t ldc, bool load) {
  tile<T, ARead::kRows, 1, kVecs>(kc, a, lda_row, 1, {b}, kNR<T>, c, ldc, load);
}

// gemm_packed_b's tiles, over panels of kPanelWidth columns (kPanel vectors).
template <typename T>
constexpr int kPanel = static_cast<int>(kPanelWidth<T> / hn::MaxLanes(hn::ScalableTag<T>()));
static_assert(kPanel<float> >= 1 && kPanel<double> >= 1, "a panel is whole vectors");

template <typename T>
void strided(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b, T* c, int64_t ldc,
             bool load) {
  if (rs == 1) {
    tile<T, ARead::kColumns, 1, kPanel<T> >(kc, a, 1, ks, {b}, kPanelWidth<T>, c, ldc, load);
  } else {
    tile<T, ARead::kRows, 1, kPanel<T> >(kc, a, rs, 1, {b}, kPanelWidth<T>, c, ldc, load);
  }
}

template <typename T>
void pair(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b0, const T* b1, T* c,
          int64_t ldc, bool load) {
  if (rs == 1) {
    tile<T, ARead::kColumns, 2, kPanel<T> >(kc, a, 1, ks, {b0, b1}, kPanelWidth<T>, c, ldc, load);
  } else {
    tile<T, ARead::kRows, 2, kPanel<T> >(kc, a, rs, 1, {b0, b1}, kPanelWidth<T>, c, ldc, load);
  }
}

template <typename T>
Config<T> TargetConfig() {
  // A read in place only by a tile of 32 columns or more: a narrower tile reads the block of A
  // from as many more B panels, and reading A unpacked then costs more than packing it once
  // (bench_gemm measures it). Two panels at once where a panel is at most half the tile's
  // vectors (AVX-512's 16 floats: one register), so the pair has the tile's accumulators.
  const bool wide = kNR<T> >= 32;
  const char* isa = HWY_TARGET == HWY_AVX2 ? "avx2" : HWY_ARCH_ARM ? "neon" : "avx512";
  return {packed<T>,
          wide ? in_place<T> : nullptr,
          6,
          kNR<T>,
          256,
          sizeof(T) == 4 ? 144 : 72,
          sizeof(T) == 4 ? 4096 : 2048,
          strided<T>,
          2 * kPanel<T> <= kVecs ? pair<T> : nullptr,
          isa};
}
#endif

}  // namespace

EMBER_ENTRIES_BY_TYPE(TargetConfig)

}  // namespace ember::kernels::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/base/cpu.h"

namespace ember::kernels::gemm_detail {

EMBER_EXPORT_BY_TYPE(TargetConfig);

template <>
Config<float> config<float>() {
  cpu::apply_capability();
  return HWY_DYNAMIC_DISPATCH(TargetConfigF32)();
}

template <>
Config<double> config<double>() {
  cpu::apply_capability();
  return HWY_DYNAMIC_DISPATCH(TargetConfigF64)();
}

template <>
Config<int64_t> config<int64_t>() {
  return portable_config<int64_t>();
}

}  // namespace ember::kernels::gemm_detail
#endif  // HWY_ONCE
