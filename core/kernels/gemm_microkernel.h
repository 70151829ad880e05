// The micro-kernels: the innermost loops of every GEMM path, a small tile of C kept in registers
// while k runs. Each C[i, j] of a tile is one chain of fused multiply-adds over k in increasing
// order, continued from C (load) or from 0: the contract stated at the top of
// core/kernels/gemm.cpp, which every kernel here keeps whatever its width or the way it reads A.
// (Internal: include only from core/kernels/gemm*.cpp.)
//
// Two kinds:
// - packed: C[0:MR, 0:NR] = (load ? C : 0) + sum_p a[p, 0:MR]^T b[p, 0:NR], a a packed panel
//   (for each p, MR values of a column of A), b a packed panel (for each p, NR values of a row
//   of B), both 64-byte aligned; C is MR full rows of NR values, row stride ldc. The blocked
//   driver (gemm.cpp) calls them through a MicroKernel pointer.
// - A read in place (gemm_packed_b.cpp): the same 6 x 16 float tile over a packed B panel,
//   with A read where it lies, by columns or by rows (ARead).
//
// The AVX2 6 x 16 float tile is written once (tile_avx2_f32) for the three ways it reads A. The
// AVX-512 kernels are compiled for AVX-512 alone with function-level target attributes and run
// only when the CPU has it (cpu_has_avx512): never -march=native, since GCC 12 with AVX-512
// miscompiles some vector constants (see CMakeLists.txt). They hold no vector constants, only
// loads, broadcasts, fmas and stores.
#pragma once

#include "core/kernels/gemm.h"
#include "core/kernels/gemm_internal.h"

namespace ember::kernels::gemm_detail {

template <typename T>
using MicroKernel = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool load);

// Portable: plain loops (any CPU), MR = 4, NR = 4.
template <typename T>
void kernel_portable(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool load) {
  T acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = load ? c[i * ldc + j] : T(0);
  for (int64_t p = 0; p < kc; ++p, a += 4, b += 4)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = fused(a[i], b[j], acc[i][j]);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) c[i * ldc + j] = acc[i][j];
}

// Portable 6 x W tile with A read in place (element (i, p) at a[i * rs + p * ks]), for the
// types without a SIMD version (the float64 of the tests).
template <typename T>
void kernel_a_strided(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b, T* c, int64_t ldc,
                      bool load) {
  constexpr int64_t W = kPanelWidth<T>;
  T acc[6][W];
  for (int i = 0; i < 6; ++i)
    for (int64_t j = 0; j < W; ++j) acc[i][j] = load ? c[i * ldc + j] : T(0);
  for (int64_t p = 0; p < kc; ++p, b += W) {
    for (int i = 0; i < 6; ++i) {
      const T ai = a[i * rs + p * ks];
      for (int64_t j = 0; j < W; ++j) acc[i][j] = fused(ai, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < 6; ++i)
    for (int64_t j = 0; j < W; ++j) c[i * ldc + j] = acc[i][j];
}

#ifdef EMBER_GEMM_X86
// How the 6 x 16 float tile reads A[i, p] (i = 0..5, p = 0..kc-1).
enum class ARead {
  kPacked,   // a packed panel: a[p * 6 + i]
  kColumns,  // columns of A contiguous: a[p * step + i] (A^T, or an edge tile packed with step 6)
  kRows,     // rows of A contiguous: a[i * step + p] (a tile just written row by row)
};

// AVX2 + FMA, float: the 6 x 16 tile (two 8-float registers per row, 12 accumulators), with A
// read as kA says. The packed panels stream through once, so that kernel also asks for the B
// panel eight rows ahead. Always inlined: each caller is one of the three kernels, whose code
// is what the three hand-written copies compiled to.
template <ARead kA>
[[gnu::always_inline]] inline void tile_avx2_f32(int64_t kc, const float* a, int64_t step,
                                                 const float* b, float* c, int64_t ldc, bool load) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
  const float* a3 = a + 3 * step;  // kRows: rows 0, 1, 2 at a, a + step, a + 2 step; 3, 4, 5 here
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, b += 16) {
    if constexpr (kA == ARead::kPacked) {
      _mm_prefetch(reinterpret_cast<const char*>(b + 16 * 8), _MM_HINT_T0);
    }
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    const float* rows[6];  // A[i, p] at rows[i]
    if constexpr (kA == ARead::kRows) {
      rows[0] = a + p, rows[1] = a + step + p, rows[2] = a + 2 * step + p;
      rows[3] = a3 + p, rows[4] = a3 + step + p, rows[5] = a3 + 2 * step + p;
    } else {
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) rows[i] = a + i;
    }
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 ai = _mm256_broadcast_ss(rows[i]);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    if constexpr (kA != ARead::kRows) a += kA == ARead::kPacked ? 6 : step;
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

// The packed 6 x 16 float kernel of the blocked driver.
inline void kernel_avx2_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                            bool load) {
  tile_avx2_f32<ARead::kPacked>(kc, a, 6, b, c, ldc, load);
}

// AVX2 + FMA, double: 6 x 8.
inline void kernel_avx2_f64(int64_t kc, const double* a, const double* b, double* c, int64_t ldc,
                            bool load) {
  __m256d acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm256_loadu_pd(c + i * ldc) : _mm256_setzero_pd();
    acc[i][1] = load ? _mm256_loadu_pd(c + i * ldc + 4) : _mm256_setzero_pd();
  }
  for (int64_t p = 0; p < kc; ++p, a += 6, b += 8) {
    const __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256d ai = _mm256_broadcast_sd(a + i);
      acc[i][0] = _mm256_fmadd_pd(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_pd(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_pd(c + i * ldc, acc[i][0]);
    _mm256_storeu_pd(c + i * ldc + 4, acc[i][1]);
  }
}

// AVX-512, float: 6 x 32 (two 16-float registers per row). Compiled for AVX-512 alone, run
// only when the CPU has it (see the top of this file).
// constants here, only loads, broadcasts, fmas and stores.
__attribute__((target("avx512f"))) inline void kernel_avx512_f32(int64_t kc, const float* a,
                                                                 const float* b, float* c,
                                                                 int64_t ldc, bool load) {
  __m512 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    acc[i][1] = load ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p, a += 6, b += 32) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}

// AVX-512, float, A read in place: a 6 x 16 kPanels tile over kPanels 16-wide panels of packed
// B rows (row p of panel q at b[q] + p * bs: two adjacent 16-wide panels of gemm_packed_b with
// bs = 16, or the two halves of the blocked path's 32-wide panel with bs = 32; one panel for
// gemm_packed_b's last single panel, N = 48 being a pair and one, and its partial tiles), element
// (i, p) of A at a[i * rs + p] (kRows) or a[i + p * ks] (kColumns). One 16-float register per
// row and panel: a single panel takes half the fmas of the AVX2 6 x 16 tile for the same lanes.
// Each C[i, j] gets the same chain of fmas, in the same order, as from the packed kernel or from
// tile_avx2_f32, so the bits do not depend on which one ran.
template <ARead kA, int kPanels>
__attribute__((target("avx512f"))) inline void kernel_avx512_f32_a(int64_t kc, const float* a,
                                                                   int64_t rs, int64_t ks,
                                                                   const float* const (&b)[kPanels],
                                                                   int64_t bs, float* c,
                                                                   int64_t ldc, bool load) {
  static_assert(kA != ARead::kPacked && (kPanels == 1 || kPanels == 2));
  constexpr bool kRows = kA == ARead::kRows;
  __m512 acc[6][kPanels];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    for (int q = 0; q < kPanels; ++q) {
      acc[i][q] = load ? _mm512_loadu_ps(c + i * ldc + 16 * q) : _mm512_setzero_ps();
    }
  }
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    __m512 x[kPanels];
    for (int q = 0; q < kPanels; ++q) x[q] = _mm512_loadu_ps(b[q] + p * bs);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m512 ai = _mm512_set1_ps(kRows ? a[i * rs + p] : a[i + p * ks]);
      for (int q = 0; q < kPanels; ++q) acc[i][q] = _mm512_fmadd_ps(ai, x[q], acc[i][q]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    for (int q = 0; q < kPanels; ++q) _mm512_storeu_ps(c + i * ldc + 16 * q, acc[i][q]);
  }
}

// The blocked path's 6 x 32 AVX-512 tile with the rows of A read in place (row i at
// a + i * lda_row) over one packed 32-wide B panel: the pair kernel on its two 16-wide halves.
__attribute__((target("avx512f"))) inline void kernel_avx512_f32_in_place(
    int64_t kc, const float* a, int64_t lda_row, const float* b, float* c, int64_t ldc, bool load) {
  kernel_avx512_f32_a<ARead::kRows, 2>(kc, a, lda_row, 1, {b, b + 16}, 32, c, ldc, load);
}
#endif

// One 6 x W tile of C (+)= A-tile @ B-panel, A at a with row step rs and column step ks (one of
// them 1 for floats); avx512: the CPU has AVX-512 (cpu_has_avx512, asked once by the caller).
template <typename T>
inline void tile_a_strided(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b, T* c,
                           int64_t ldc, bool load, [[maybe_unused]] bool avx512) {
#ifdef EMBER_GEMM_X86
  if constexpr (std::is_same_v<T, float>) {
    if (avx512) {
      if (rs == 1) {
        kernel_avx512_f32_a<ARead::kColumns, 1>(kc, a, 1, ks, {b}, 16, c, ldc, load);
      } else {
        kernel_avx512_f32_a<ARead::kRows, 1>(kc, a, rs, 1, {b}, 16, c, ldc, load);
      }
      return;
    }
    if (rs == 1) {
      tile_avx2_f32<ARead::kColumns>(kc, a, ks, b, c, ldc, load);
    } else {
      tile_avx2_f32<ARead::kRows>(kc, a, rs, b, c, ldc, load);
    }
    return;
  }
#endif
  kernel_a_strided<T>(kc, a, rs, ks, b, c, ldc, load);
}

}  // namespace ember::kernels::gemm_detail
