// A packed, register-blocked GEMM in the style of BLIS / GotoBLAS, in three layers:
//
//   for jc over N in blocks of NC:               a block of B's columns ...
//     for pc over K in blocks of KC:             ... and of its rows
//       pack B[pc:pc+KC, jc:jc+NC] into NR-column panels  (stays in L3 / L2)
//       for ic over M in blocks of MC:
//         pack A[ic:ic+MC, pc:pc+KC] into MR-row panels   (stays in L2)
//         for jr over the block's columns in steps of NR:   one B panel (KC x NR) stays in L1
//           for ir over the block's rows in steps of MR:
//             C[ir:ir+MR, jr:jr+NR] (+)= Apanel @ Bpanel  (the micro-kernel, in registers)
//
// Packing reads A and B through their two strides, so a transposed operand (a weight read as
// W^T, a gradient's A^T) costs no extra pass: the panel is written in the order the
// micro-kernel reads it, whatever the source layout. The micro-kernel keeps an MR x NR tile of C
// in SIMD registers (6 x 16 floats = 12 AVX2 registers) and, for each k, broadcasts MR values
// of A and multiplies them by NR values of B with fused multiply-adds.
//
// Summation order (see gemm.h): each C[i, j] is accumulated over k in increasing order, one
// fma at a time; a later K block reloads the partial sums the previous one stored. So the
// result equals the reference loop's bit for bit.
//
// Threads: each product is cut into as many pieces as needed to keep every thread busy, along
// N or M (whichever has more micro-tiles: the decode shape 8 x 50257 splits N, a tall-skinny
// gradient splits M); pieces are disjoint blocks of C, and each thread packs its own panels.
//
// Float products with at most 16 rows (a linear layer at decode time: x [8, 768] @ W^T) skip
// all this and read B in place, with the lanes of a register down the rows of C: see "skinny
// products" below.
#include "core/kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_GEMM_X86 1
#endif

#include "core/kernels/parallel_for.h"
#include "core/parallel.h"

namespace ember::kernels {

namespace {

// c + a * b: one fused multiply-add for floats; for int64 wrapping on overflow as PyTorch's integer
// matmul does, computed in uint64 where wrapping is defined (signed overflow is not).
template <typename T>
inline T fused(T a, T b, T c) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fma(a, b, c);
  } else {
    return static_cast<T>(static_cast<uint64_t>(c) +
                          static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  }
}

// ---- the reference loop ----

template <typename T>
void reference(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
               const T* B, int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (!accumulate) std::fill_n(c, N, T(0));
    for (int64_t k = 0; k < K; ++k) {
      const T a = A[i * lda_row + k * lda_col];
      const T* b = B + k * ldb_row;
      if (ldb_col == 1) {
        for (int64_t j = 0; j < N; ++j) c[j] = fused(a, b[j], c[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) c[j] = fused(a, b[j * ldb_col], c[j]);
      }
    }
  }
}

// The reference's products in i-j-k order: each C[i, j] runs its whole chain over k in a
// register, then is stored once. The same fmas in the same order as `reference`, so the same
// bits; for the tiny products of the book's modules (6 x 3 @ 3 x 2) the reference's inner loop
// over j is two or three elements long and costs more in loop overhead than in arithmetic.
template <typename T>
void dot_products(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
                  const T* B, int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc,
                  bool accumulate) {
  for (int64_t i = 0; i < M; ++i) {
    const T* a = A + i * lda_row;
    for (int64_t j = 0; j < N; ++j) {
      const T* b = B + j * ldb_col;
      T sum = accumulate ? C[i * ldc + j] : T(0);
      for (int64_t k = 0; k < K; ++k) sum = fused(a[k * lda_col], b[k * ldb_row], sum);
      C[i * ldc + j] = sum;
    }
  }
}

// ---- micro-kernels: C[0:MR, 0:NR] = (load ? C : 0) + sum_p a[p, 0:MR]^T b[p, 0:NR] ----
//
// a is a packed panel (for each p, MR values of a column of A), b a packed panel (for each p,
// NR values of a row of B), both 64-byte aligned. C is MR full rows of NR values, row stride ldc.

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

#ifdef EMBER_GEMM_X86
// AVX2 + FMA, float: 6 x 16 (two 8-float registers per row, 12 accumulators).
void kernel_avx2_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool load) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, a += 6, b += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(b + 16 * 8), _MM_HINT_T0);
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

// AVX2 + FMA, double: 6 x 8.
void kernel_avx2_f64(int64_t kc, const double* a, const double* b, double* c, int64_t ldc,
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

// The same 6 x 16 float tile with A read in place instead of from a packed panel (for
// gemm_packed_b). Columns of A contiguous: element (i, p) at a[p * ks + i], the packed layout
// with a step of ks instead of 6 (A^T, or an edge tile packed with ks = 6).
void kernel_avx2_f32_a_columns(int64_t kc, const float* a, int64_t ks, const float* b, float* c,
                               int64_t ldc, bool load) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, a += ks, b += 16) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

// Rows of A contiguous: element (i, p) at a[i * rs + p] (a tile just written row by row).
void kernel_avx2_f32_a_rows(int64_t kc, const float* a, int64_t rs, const float* b, float* c,
                            int64_t ldc, bool load) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
  const float* a0 = a;           // rows 0, 1, 2 at a0, a0 + rs, a0 + 2 rs
  const float* a3 = a + 3 * rs;  // rows 3, 4, 5
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, b += 16) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    const float* rows[6] = {a0 + p, a0 + rs + p, a0 + 2 * rs + p,
                            a3 + p, a3 + rs + p, a3 + 2 * rs + p};
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 ai = _mm256_broadcast_ss(rows[i]);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

// AVX-512, float: 6 x 32 (two 16-float registers per row). Compiled for AVX-512 alone, run
// only when the CPU has it (the rest of Ember stays x86-64-v3: see CMakeLists.txt). No vector
// constants here, only loads, broadcasts, fmas and stores.
__attribute__((target("avx512f"))) void kernel_avx512_f32(int64_t kc, const float* a,
                                                          const float* b, float* c, int64_t ldc,
                                                          bool load) {
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
#endif

#ifdef EMBER_GEMM_X86
// AVX-512, float, for gemm_packed_b: a 6 x 32 tile over two adjacent 16-wide panels of a packed
// B (b0, b1: row p of each at b0 + 16 p, b1 + 16 p), A read in place, element (i, p) at
// a[i * rs + p] (kRows: a tile of rows) or a[i + p * ks] (columns). Each C[i, j] gets the same
// chain of fmas, in the same order, as from two calls of the 6 x 16 AVX2 kernels above, so
// the bits do not depend on which one ran; this one does twice the work per instruction.
template <bool kRows>
__attribute__((target("avx512f"))) void kernel_avx512_f32_a_pair(int64_t kc, const float* a,
                                                                 int64_t rs, int64_t ks,
                                                                 const float* b0, const float* b1,
                                                                 float* c, int64_t ldc, bool load) {
  __m512 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i][0] = load ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    acc[i][1] = load ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 x0 = _mm512_loadu_ps(b0 + p * 16), x1 = _mm512_loadu_ps(b1 + p * 16);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m512 ai = _mm512_set1_ps(kRows ? a[i * rs + p] : a[i + p * ks]);
      acc[i][0] = _mm512_fmadd_ps(ai, x0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, x1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}
#endif

#ifdef EMBER_GEMM_X86
// Rows r[0..7] of an 8 x 8 block of floats become its columns (r[i] = column i).
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// A full panel of NR columns of a B whose columns are contiguous (B = W^T, ldb_row == 1):
// out[p * NR + j] = b[j * ldb_col + p], 8 x 8 blocks transposed in registers. Returns the
// number of rows p done (a multiple of 8); the caller finishes the rest.
int64_t pack_b_columns_f32(const float* b, int64_t ldb_col, int64_t kc, int64_t NR, float* out) {
  const int64_t whole = kc - kc % 8;
  for (int64_t p = 0; p < whole; p += 8) {
    for (int64_t j0 = 0; j0 < NR; j0 += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(b + (j0 + j) * ldb_col + p);
      transpose8(r);
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(out + (p + q) * NR + j0, r[q]);
    }
  }
  return whole;
}

// A full panel of 6 rows of a row-major A (lda_col == 1): out[p * 6 + r] = a[r * lda_row + p].
// Each 8-float store also writes 2 floats past its 6, which the next store (or the caller's
// tail, or the next panel) overwrites: the buffer has slack for the last one.
int64_t pack_a_rows_f32(const float* a, int64_t lda_row, int64_t kc, float* out) {
  const int64_t whole = kc - kc % 8;
  for (int64_t p = 0; p < whole; p += 8) {
    __m256 r[8];
    for (int i = 0; i < 6; ++i) r[i] = _mm256_loadu_ps(a + i * lda_row + p);
    r[6] = r[7] = _mm256_setzero_ps();
    transpose8(r);
    for (int q = 0; q < 8; ++q) _mm256_storeu_ps(out + (p + q) * 6, r[q]);
  }
  return whole;
}
#endif

// A micro-kernel with its tile and the cache blocks that suit it.
template <typename T>
struct Config {
  MicroKernel<T> kernel;
  int64_t MR, NR;
  int64_t KC, MC, NC;  // KC x NR of B in L1, MC x KC of A in L2, KC x NC of B in L3
  const char* isa;
};

bool cpu_has_avx512() {
#ifdef EMBER_GEMM_X86
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

template <typename T>
Config<T> config() {
#ifdef EMBER_GEMM_X86
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx512()) return {kernel_avx512_f32, 6, 32, 256, 144, 4096, "avx512"};
    return {kernel_avx2_f32, 6, 16, 256, 144, 4096, "avx2"};
  } else if constexpr (std::is_same_v<T, double>) {
    return {kernel_avx2_f64, 6, 8, 256, 72, 2048, "avx2"};
  }
#endif
  return {kernel_portable<T>, 4, 4, 256, 64, 1024, "portable"};
}

// One product's operands.
template <typename T>
struct Product {
  int64_t M, N, K;
  const T* A;
  int64_t lda_row, lda_col;
  const T* B;
  int64_t ldb_row, ldb_col;
  T* C;
  int64_t ldc;
  bool accumulate;
};

// dst[0:n] = src[0:n] for the widths of a panel row (6, 8, 16, 32): inlined moves, not a call.
template <typename T>
inline void copy_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  switch (n) {
    case 6:
      std::copy_n(src, 6, dst);
      return;
    case 8:
      std::copy_n(src, 8, dst);
      return;
    case 16:
      std::copy_n(src, 16, dst);
      return;
    case 32:
      std::copy_n(src, 32, dst);
      return;
    default:
      std::copy_n(src, n, dst);
  }
}

// kc stored lines of `len` contiguous values (line p at src + p * stride) as ceil(len / width)
// panels of kc x width, columns past len zeros: each line is read once, in order (a stream the
// hardware prefetcher follows), its width-long pieces going to their panels. Walking panel by
// panel instead read the lines down a column of cache lines a stride apart, and stalled on every
// one. For a row-major B (lines are rows of B) and an A^T (lines are columns of A).
template <typename T>
void pack_lines(const T* src, int64_t stride, int64_t kc, int64_t len, int64_t width, T* out) {
  for (int64_t p = 0; p < kc; ++p) {
    const T* line = src + p * stride;
    for (int64_t j = 0; j < len; j += width) {
      const int64_t n = std::min(width, len - j);
      T* dst = out + j * kc + p * width;  // panel j / width, row p
      if (n == width) {
        copy_row(dst, line + j, width);
      } else {
        std::memcpy(dst, line + j, sizeof(T) * n);
        std::fill(dst + n, dst + width, T(0));
      }
    }
  }
}

// A[i0:i0+mc, p0:p0+kc] as ceil(mc / MR) panels of kc x MR (rows past mc are zeros).
template <typename T>
void pack_a(const Product<T>& op, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t MR,
            T* out) {
  if (op.lda_row == 1 && op.lda_col > 1) {  // A^T: columns of A contiguous
    pack_lines(op.A + i0 + p0 * op.lda_col, op.lda_col, kc, mc, MR, out);
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += MR, out += kc * MR) {
    const int64_t rows = std::min(MR, mc - ir);
    const T* a = op.A + (i0 + ir) * op.lda_row + p0 * op.lda_col;
    int64_t done = 0;  // rows p already packed by a SIMD path
#ifdef EMBER_GEMM_X86
    if constexpr (std::is_same_v<T, float>) {
      if (op.lda_col == 1 && MR == 6 && rows == 6) done = pack_a_rows_f32(a, op.lda_row, kc, out);
    }
#endif
    if (op.lda_col <= op.lda_row) {  // rows of A contiguous (or closer): walk along k per row
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = a + r * op.lda_row;
        for (int64_t p = done; p < kc; ++p) out[p * MR + r] = src[p * op.lda_col];
      }
    } else {  // columns of A closer than its rows: walk along rows per k
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a + p * op.lda_col;
        for (int64_t r = 0; r < rows; ++r) out[p * MR + r] = src[r * op.lda_row];
      }
    }
    if (rows < MR) {
      for (int64_t p = 0; p < kc; ++p) std::fill(out + p * MR + rows, out + (p + 1) * MR, T(0));
    }
  }
}

// B[p0:p0+kc, j0:j0+nc] as ceil(nc / NR) panels of kc x NR (columns past nc are zeros).
template <typename T>
void pack_b(const Product<T>& op, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t NR,
            T* out) {
  if (op.ldb_col == 1) {  // rows of B contiguous
    pack_lines(op.B + p0 * op.ldb_row + j0, op.ldb_row, kc, nc, NR, out);
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += NR, out += kc * NR) {
    const int64_t cols = std::min(NR, nc - jr);
    const T* b = op.B + p0 * op.ldb_row + (j0 + jr) * op.ldb_col;
    if (op.ldb_row <= op.ldb_col) {  // B transposed (W^T): walk down each column
      int64_t done = 0;              // rows p already packed by a SIMD path
#ifdef EMBER_GEMM_X86
      if constexpr (std::is_same_v<T, float>) {
        if (op.ldb_row == 1 && cols == NR && NR % 8 == 0) {
          done = pack_b_columns_f32(b, op.ldb_col, kc, NR, out);
        }
      }
#endif
      for (int64_t j = 0; j < cols; ++j) {
        const T* src = b + j * op.ldb_col;
        for (int64_t p = done; p < kc; ++p) out[p * NR + j] = src[p * op.ldb_row];
      }
      if (cols < NR) {
        for (int64_t p = 0; p < kc; ++p) std::fill(out + p * NR + cols, out + (p + 1) * NR, T(0));
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < cols; ++j) out[p * NR + j] = b[p * op.ldb_row + j * op.ldb_col];
        std::fill(out + p * NR + cols, out + (p + 1) * NR, T(0));
      }
    }
  }
}

// Per-thread packing buffers, 64-byte aligned, allocated before the parallel region (so an
// allocation failure is an exception on the calling thread, not inside OpenMP).
template <typename T>
struct Workspace {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> memory;
  int64_t per_thread = 0, a_size = 0;

  Workspace(int threads, int64_t a_elems, int64_t b_elems) {
    const int64_t align = 64 / sizeof(T);
    a_size = (a_elems + 2 * align - 1) / align * align;  // + slack for pack_a_rows_f32
    per_thread = a_size + (b_elems + align - 1) / align * align;
    const std::size_t bytes =
        sizeof(T) * static_cast<std::size_t>(per_thread * threads);  // whole lines
    memory.reset(static_cast<T*>(std::aligned_alloc(64, std::max<std::size_t>(bytes, 64))));
    if (!memory) throw std::bad_alloc();
  }
  T* a(int thread) const { return memory.get() + thread * per_thread; }
  T* b(int thread) const { return memory.get() + thread * per_thread + a_size; }
};

// A row of a partial tile (n <= a tile's width) copied by a call to memcpy. Inlined, GCC 12
// expands these copies of unknown length into `rep movsq`, whose start-up costs tens of cycles:
// in the book-size attention (6 x 6 scores, head size 3) that was half of gemm_packed_b's time.
template <typename T>
[[gnu::noinline]] void copy_partial_row(T* dst, const T* src, int64_t n) {
  std::memcpy(dst, src, sizeof(T) * static_cast<std::size_t>(n));
}

// Asks for every cache line of a rows x cols tile of C (for writing), one row after another. A
// row of a tile is NR values but not aligned to lines (a std::vector's data starts 16 bytes
// past one; a view of columns anywhere), so 32 floats can span three lines: prefetching only
// a row's first and last values left the middle line to a demand miss inside the micro-kernel.
// Every line: bench_gemm 1024x2304x768 at 1 thread 0.91-0.94x -> 0.94-0.97x of OpenBLAS (4 runs
// alternating with the old code, Xeon VM).
template <typename T>
inline void prefetch_tile(const T* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    const char* first = reinterpret_cast<const char*>(c + r * ldc);
    const char* last = reinterpret_cast<const char*>(c + r * ldc + cols - 1);
    for (const char* line = first; line < last; line += 64) __builtin_prefetch(line, 1);
    __builtin_prefetch(last, 1);
  }
}

// C[i0:i1, j0:j1] of one product, on the calling thread, with buffers a_buf and b_buf.
template <typename T>
void multiply_block(const Config<T>& cfg, const Product<T>& op, int64_t i0, int64_t i1, int64_t j0,
                    int64_t j1, T* a_buf, T* b_buf) {
  const int64_t MR = cfg.MR, NR = cfg.NR;
  if (op.K == 0) {
    if (!op.accumulate) {
      for (int64_t i = i0; i < i1; ++i)
        std::fill(op.C + i * op.ldc + j0, op.C + i * op.ldc + j1, T(0));
    }
    return;
  }
  alignas(64) T edge[6 * 32];  // a partial tile of C (MR x NR <= 6 x 32)
  // Software prefetching of C pays when C comes from beyond L2 (a block of C over 1 MiB, half a
  // 2 MiB L2); where C stays in L2 it only costs (1024x64x1024: 1.03x -> 0.99x of OpenBLAS).
  const bool prefetch_c = (i1 - i0) * (j1 - j0) * int64_t(sizeof(T)) > (int64_t{1} << 20);
  for (int64_t jc = j0; jc < j1; jc += cfg.NC) {
    const int64_t nc = std::min(cfg.NC, j1 - jc);
    for (int64_t pc = 0; pc < op.K; pc += cfg.KC) {
      const int64_t kc = std::min(cfg.KC, op.K - pc);
      const bool load = pc > 0 || op.accumulate;  // continue the chain of each C[i, j]
      pack_b(op, pc, kc, jc, nc, NR, b_buf);
      for (int64_t ic = i0; ic < i1; ic += cfg.MC) {
        const int64_t mc = std::min(cfg.MC, i1 - ic);
        pack_a(op, ic, mc, pc, kc, MR, a_buf);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t cols = std::min(NR, nc - jr);
          const T* b_panel = b_buf + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int64_t rows = std::min(MR, mc - ir);
            const T* a_panel = a_buf + ir * kc;
            T* c = op.C + (ic + ir) * op.ldc + jc + jr;
            // The next tile of C on its way while this one runs: the next rows, or after the
            // last rows the first rows of the next panel's columns.
            if (prefetch_c) {
              if (ir + MR < mc) {
                prefetch_tile(c + MR * op.ldc, std::min(MR, mc - ir - MR), cols, op.ldc);
              } else if (jr + NR < nc) {
                prefetch_tile(op.C + ic * op.ldc + jc + jr + NR, std::min(MR, mc),
                              std::min(NR, nc - jr - NR), op.ldc);
              }
            }
            if (rows == MR && cols == NR) {
              cfg.kernel(kc, a_panel, b_panel, c, op.ldc, load);
              continue;
            }
            // A partial tile: run the full tile on a copy, keep the valid part.
            if (load) {
              for (int64_t r = 0; r < rows; ++r)
                copy_partial_row(edge + r * NR, c + r * op.ldc, cols);
            }
            cfg.kernel(kc, a_panel, b_panel, edge, NR, load);
            for (int64_t r = 0; r < rows; ++r)
              copy_partial_row(c + r * op.ldc, edge + r * NR, cols);
          }
        }
      }
    }
  }
}

constexpr int64_t kTinyWork = 4096;                  // multiply-adds: the plain loop is faster
constexpr int64_t kParallelWork = int64_t{1} << 17;  // multiply-adds before a second thread pays

template <typename T>
void packed_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A, int64_t a_bs,
                    int64_t lda_row, int64_t lda_col, const T* B, int64_t b_bs, int64_t ldb_row,
                    int64_t ldb_col, T* C, int64_t c_bs, int64_t ldc, bool accumulate) {
  const Config<T> cfg = config<T>();
  const int64_t work = batch * M * N * std::max<int64_t>(K, 1);
  // Inside another kernel's parallel region (a fused attention's heads), stay on this thread.
  int threads = work >= kParallelWork && !omp_in_parallel() ? get_num_threads() : 1;

  // Pieces per product: 1 when the batch alone divides evenly over the threads, else cut
  // each product along the dimension with more micro-tiles.
  const int64_t m_tiles = (M + cfg.MR - 1) / cfg.MR, n_tiles = (N + cfg.NR - 1) / cfg.NR;
  const bool split_n = n_tiles >= m_tiles;
  int64_t pieces = 1;
  if (threads > 1 && batch % threads != 0)
    pieces = std::min<int64_t>(threads, std::max(m_tiles, n_tiles));
  const int64_t tasks = batch * pieces;
  threads = static_cast<int>(std::min<int64_t>(threads, tasks));

  const int64_t piece_m = split_n ? M : (m_tiles + pieces - 1) / pieces * cfg.MR;
  const int64_t piece_n = split_n ? (n_tiles + pieces - 1) / pieces * cfg.NR : N;
  const int64_t kc = std::min(cfg.KC, std::max<int64_t>(K, 1));
  const int64_t mc = std::min(cfg.MC, (piece_m + cfg.MR - 1) / cfg.MR * cfg.MR);
  const int64_t nc = std::min(cfg.NC, (piece_n + cfg.NR - 1) / cfg.NR * cfg.NR);
  const Workspace<T> ws(threads, mc * kc, nc * kc);

  parallel_for(tasks, threads, [&](int64_t task, int thread) {
    const int64_t b = task / pieces, piece = task % pieces;
    const Product<T> op{M,
                        N,
                        K,
                        A + b * a_bs,
                        lda_row,
                        lda_col,
                        B + b * b_bs,
                        ldb_row,
                        ldb_col,
                        C + b * c_bs,
                        ldc,
                        accumulate};
    const int64_t i0 = split_n ? 0 : std::min(M, piece * piece_m);
    const int64_t i1 = split_n ? M : std::min(M, i0 + piece_m);
    const int64_t j0 = split_n ? std::min(N, piece * piece_n) : 0;
    const int64_t j1 = split_n ? std::min(N, j0 + piece_n) : N;
    if (i0 < i1 && j0 < j1) multiply_block(cfg, op, i0, i1, j0, j1, ws.a(thread), ws.b(thread));
  });
}

// ---- skinny products: a few rows of A (M <= 16), B read in place ----
//
// A linear layer at decode time multiplies a handful of rows of activations by a weight read
// as W^T, W [N, K] row-major: the GPT's out_head is 8 x 50257 x 768, 154 MB of weights for
// 0.3 GFLOP. The product is bound by reading W from memory once; packing W into panels first
// (what the blocked path above does) would be a second pass over it, and at M <= 16 there are
// too few rows of A for a panel to be reused.
//
// So here the lanes of a SIMD register run down the rows of C instead of along them. A is
// packed once by columns (8 or 16 floats per k, rows past M zero; M x K is small), and for a
// block of NJ columns of C:
//
//   acc[j] = C[0:8R, j]                                (R registers of 8 rows; 0 or C)
//   for k = 0 .. K-1:
//     a = A[0:8R, k]                                   (R aligned loads of the packed column)
//     for j in the block:  acc[j] = fma(a, broadcast(B[k, j]), acc[j])
//
// Each lane of acc[j] is one C[i, j] and sees one fma per k, in increasing k: the summation
// order of gemm.h, so the result is the reference loop's bit for bit. B[k, j] is a scalar
// broadcast straight from memory through both strides, so W^T (ldb_row = 1: the block walks
// along NJ rows of W, each a contiguous stream) and a plain B (ldb_col = 1) need neither
// packing nor a transpose. The whole depth K runs in registers: each C[i, j] is read and
// written once. Per k: R loads of A, NJ broadcasts of B and R * NJ fmas (NJ * R = 8
// accumulators, enough independent chains to cover the fma latency).
//
// The cost is one broadcast and (at M <= 8) one fma per element of W. Measured on the shared
// 2-core Zen 3 VM this was written on (noisy): ~1.5-2 G elements of W per second inside gemm
// (6-8 GB/s), 2.5-3.3 G/s for the bare loop on a block of W in L2, while one core streams
// ~16 GB/s from memory; so the out_head shape is not at the memory bound yet, and where the
// rest goes is not established. Software prefetching of the NJ streams of W measured no gain
// there; a prototype reading W in 8 x 4 blocks transposed in registers, with A pre-broadcast as
// the fmas' memory operands, ran slower than this loop.
//
// On a 2-core Xeon VM with AVX-512 (one core streams ~11 GB/s), the same loop read W at ~8 GB/s,
// and prefetching the next tile's NJ rows of W into L2 while this tile runs (one line per row
// for every 16 k, _MM_HINT_T1) brought a stand-alone copy of the loop to ~11.6 GB/s, the
// streaming rate: the hardware prefetcher does not start the next rows' streams early enough
// by itself. In gemm, the out_head shape went from 35.7 to 60 GFLOP/s (bench_gemm, W in the
// VM's large L3) and the 124M GPT's forward from 62 to 51 ms. So the W^T kernel prefetches.
//
// Threads split N into blocks of whole column groups: a column's chain never depends on the
// split, so 1 and 2 threads give the same bits.

#ifdef EMBER_GEMM_X86
constexpr int64_t kSkinnyRows = 16;  // the most rows of A this path takes (two registers of 8)

// C^T tile of NJ columns and 8R rows: t[j * 8R + i] holds C[i, j] on entry and on exit. a is
// A packed by columns (a[k * 8R + i] = A[i, k]), 32-byte aligned; B[k, j] is at
// b[k * bk + j * bj], with bk == 1 when kColumnsContiguous (B = W^T: column j is row j of W).
template <int R, int NJ, bool kColumnsContiguous>
void skinny_kernel_f32(int64_t K, const float* a, const float* b, int64_t bk, int64_t bj,
                       float* t) {
  const int64_t step = kColumnsContiguous ? 1 : bk;
  __m256 acc[NJ][R];
  const float* col[NJ];  // B[0, j] for each column of the block
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) {
    col[j] = b + j * bj;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[j][r] = _mm256_loadu_ps(t + (j * R + r) * 8);
  }
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    if constexpr (kColumnsContiguous) {
      // The next tile's rows of W, one line (16 floats) per row for each 16 k of this one: in
      // L2 by the time it starts (see the note above skinny_kernel_f32).
#pragma GCC unroll 8
      for (int j = 0; j < NJ; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(col[j] + NJ * bj + k0), _MM_HINT_T1);
    }
    const int64_t k1 = std::min(K, k0 + 16);
    for (int64_t k = k0; k < k1; ++k) {
      __m256 av[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) av[r] = _mm256_load_ps(a + k * 8 * R + r * 8);
#pragma GCC unroll 8
      for (int j = 0; j < NJ; ++j) {
        const __m256 bv = _mm256_broadcast_ss(col[j] + k * step);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) acc[j][r] = _mm256_fmadd_ps(av[r], bv, acc[j][r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(t + (j * R + r) * 8, acc[j][r]);
  }
}

// The tile of NJ columns, with B's layout chosen at compile time.
template <int R, int NJ>
void skinny_tile_f32(int64_t K, const float* a, const float* b, int64_t ldb_row, int64_t ldb_col,
                     float* t) {
  if (ldb_row == 1) {
    skinny_kernel_f32<R, NJ, true>(K, a, b, 1, ldb_col, t);
  } else {
    skinny_kernel_f32<R, NJ, false>(K, a, b, ldb_row, ldb_col, t);
  }
}

// Rows 8 .. 8 + NT - 1 of C (M = 9..12, B = W^T, so column j of B is row j of W), for G tiles
// of eight columns: out[t * ldo + 8g + j] holds C[8 + t, 8g + j], read and written. The main
// kernel has just streamed these rows of W (8 x K floats per tile: 24 KB at K = 768, still in
// L1 or L2); here they are read again as 8 x 8 blocks and transposed in registers, so that lane
// j holds W[j, k] = B[k, j] and one fma per k updates eight columns of a tail row:
//
//   for k in steps of 8:   v[u] = (B[k + u, 0], ..., B[k + u, 7])        (8 loads, 24 shuffles)
//     for u = 0..7, t:     acc[t] = fma(A[8 + t, k + u], v[u], acc[t])
//
// Each C[8 + t, j] still sees one fma per k, in increasing k (the order of gemm.h), at one fma
// per eight elements of W and tail row, instead of the second register of a 16-row tile (one
// fma per element of W, for rows that are mostly padding). An accumulator's fmas form one chain
// (4 cycles each), so NT x G chains run side by side. at holds the tail rows of A row-major:
// at[t * K + k] = A[8 + t, k].
template <int NT, int G>
void skinny_tail_f32(int64_t K, const float* at, const float* b, int64_t bj, float* out,
                     int64_t ldo) {
  __m256 acc[G][NT];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < NT; ++t) acc[g][t] = _mm256_loadu_ps(out + t * ldo + g * 8);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const float* w = b + g * 8 * bj + k;
      __m256 r[8], p[8], q[8], v[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(w + j * bj);
        // 8 x 8 transpose: pairs of rows interleaved, then quads, then 128-bit halves exchanged.
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
        p[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);      // columns 0 1 | 4 5 of rows j, j + 1
        p[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);  // columns 2 3 | 6 7
      }
#pragma GCC unroll 2
      for (int h = 0; h < 8; h += 4) {
        q[h] = _mm256_shuffle_ps(p[h], p[h + 2], 0x44);          // column 0 | 4 of rows h..h+3
        q[h + 1] = _mm256_shuffle_ps(p[h], p[h + 2], 0xEE);      // 1 | 5
        q[h + 2] = _mm256_shuffle_ps(p[h + 1], p[h + 3], 0x44);  // 2 | 6
        q[h + 3] = _mm256_shuffle_ps(p[h + 1], p[h + 3], 0xEE);  // 3 | 7
      }
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        v[u] = _mm256_permute2f128_ps(q[u], q[u + 4], 0x20);
        v[u + 4] = _mm256_permute2f128_ps(q[u], q[u + 4], 0x31);
      }
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          acc[g][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(at + t * K + k + u), v[u], acc[g][t]);
        }
      }
    }
  }
  for (; k < K; ++k) {
    for (int g = 0; g < G; ++g) {
      const float* w = b + g * 8 * bj + k;
      const __m256 v = _mm256_setr_ps(w[0], w[bj], w[2 * bj], w[3 * bj], w[4 * bj], w[5 * bj],
                                      w[6 * bj], w[7 * bj]);
      for (int t = 0; t < NT; ++t) {
        acc[g][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(at + t * K + k), v, acc[g][t]);
      }
    }
  }
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + t * ldo + g * 8, acc[g][t]);
}

constexpr int kSkinnyTailRows = 4;   // M = 9..12 with B = W^T: eight rows in lanes plus a tail
constexpr int kSkinnyTailTiles = 4;  // tiles whose tail rows are computed together

// The tail rows for `tiles` (1..4) tiles of eight columns from b: four chains at a time.
void skinny_tail_tiles_f32(int nt, int tiles, int64_t K, const float* at, const float* b,
                           int64_t bj, float* out, int64_t ldo) {
  for (int g = 0; g < tiles;) {
    const float* bg = b + g * 8 * bj;
    float* og = out + g * 8;
    if (nt == 1 && tiles - g >= 4) {
      skinny_tail_f32<1, 4>(K, at, bg, bj, og, ldo);
      g += 4;
    } else if (nt == 2 && tiles - g >= 2) {
      skinny_tail_f32<2, 2>(K, at, bg, bj, og, ldo);
      g += 2;
    } else {
      switch (nt) {
        case 1:
          skinny_tail_f32<1, 1>(K, at, bg, bj, og, ldo);
          break;
        case 2:
          skinny_tail_f32<2, 1>(K, at, bg, bj, og, ldo);
          break;
        case 3:
          skinny_tail_f32<3, 1>(K, at, bg, bj, og, ldo);
          break;
        default:
          skinny_tail_f32<4, 1>(K, at, bg, bj, og, ldo);
          break;
      }
      g += 1;
    }
  }
}

// C[0:M, j0:j1] (+)= A @ B[:, j0:j1] with A packed by columns in a (8R rows per k): blocks of
// 8 / R columns, then single columns for the tail. C goes through a small transposed copy t,
// the only place that knows M (padded rows of the tile are computed and dropped). With R = 1
// and M > 8 (B = W^T only), rows 8.. come from skinny_tail_tiles_f32 after every few tiles
// (while their rows of W are still in cache), their A rows in at; a single column's from a
// plain fma loop.
template <int R>
void skinny_columns_f32(int64_t M, int64_t K, const float* a, const float* at, const float* B,
                        int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc, bool accumulate,
                        int64_t j0, int64_t j1) {
  constexpr int NJ = 8 / R, kRows = 8 * R;
  const int nt = R == 1 && M > 8 ? static_cast<int>(M - 8) : 0;
  constexpr int64_t kChunk = kSkinnyTailTiles * 8;
  alignas(32) float t[NJ * kRows];
  alignas(32) float tail[kSkinnyTailRows * kChunk];
  for (int64_t chunk = j0; chunk < j1; chunk += kChunk) {
    const int64_t chunk_end = std::min(j1, chunk + kChunk);
    int tiles = 0;  // full tiles of this chunk, from its first column on
    for (int64_t j = chunk; j < chunk_end;) {
      const int64_t nj = chunk_end - j >= NJ ? NJ : 1;
      for (int64_t jj = 0; jj < nj; ++jj) {
        for (int64_t i = 0; i < kRows; ++i) {
          t[jj * kRows + i] = accumulate && i < M ? C[i * ldc + j + jj] : 0.0f;
        }
      }
      const float* b = B + j * ldb_col;
      if (nj == NJ) {
        skinny_tile_f32<R, NJ>(K, a, b, ldb_row, ldb_col, t);
        if (nt > 0) ++tiles;
      } else {
        skinny_tile_f32<R, 1>(K, a, b, ldb_row, ldb_col, t);
      }
      for (int64_t jj = 0; jj < nj; ++jj) {
        for (int64_t i = 0; i < std::min<int64_t>(M, kRows); ++i) {
          C[i * ldc + j + jj] = t[jj * kRows + i];
        }
      }
      if (nt > 0 && nj == 1) {  // a single column's tail rows (B = W^T: b[k] = B[k, j])
        for (int r = 0; r < nt; ++r) {
          float* c = C + (8 + r) * ldc + j;
          float sum = accumulate ? c[0] : 0.0f;
          for (int64_t k = 0; k < K; ++k) sum = std::fma(at[r * K + k], b[k], sum);
          c[0] = sum;
        }
      }
      j += nj;
    }
    if (tiles > 0) {  // the chunk's full tiles come first in it
      const int64_t cols = int64_t{tiles} * 8;
      for (int r = 0; r < nt; ++r) {
        for (int64_t jj = 0; jj < cols; ++jj) {
          tail[r * kChunk + jj] = accumulate ? C[(8 + r) * ldc + chunk + jj] : 0.0f;
        }
      }
      skinny_tail_tiles_f32(nt, tiles, K, at, B + chunk * ldb_col, ldb_col, tail, kChunk);
      for (int r = 0; r < nt; ++r) std::copy_n(tail + r * kChunk, cols, C + (8 + r) * ldc + chunk);
    }
  }
}

// gemm_batched for float products with 1 <= M <= kSkinnyRows (and K >= 1): threads share out
// whole products when the batch divides evenly, else cut each product along N.
void skinny_batched_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                        int64_t a_bs, int64_t lda_row, int64_t lda_col, const float* B,
                        int64_t b_bs, int64_t ldb_row, int64_t ldb_col, float* C, int64_t c_bs,
                        int64_t ldc, bool accumulate) {
  // Up to 8 rows: one register of rows. 9..12 rows of a product with W^T: the same, plus
  // skinny_tail_f32 for the rest. Else two registers of rows (R = 2).
  const bool tail = M > 8 && M <= 8 + kSkinnyTailRows && ldb_row == 1;
  const int R = M > 8 && !tail ? 2 : 1;
  const int64_t rows = 8 * R, group = 8 / R;  // rows of packed A, columns per tile
  const int64_t tail_rows = tail ? M - 8 : 0;
  const int64_t work = batch * M * N * K;
  int threads = work >= kParallelWork && !omp_in_parallel() ? get_num_threads() : 1;
  const int64_t groups = (N + group - 1) / group;
  int64_t pieces = 1;
  if (threads > 1 && batch % threads != 0) pieces = std::min<int64_t>(threads, groups);
  const int64_t tasks = batch * pieces;
  threads = static_cast<int>(std::min<int64_t>(threads, tasks));
  const int64_t piece_n = (groups + pieces - 1) / pieces * group;
  const Workspace<float> ws(threads, K * (rows + tail_rows), 0);

  parallel_for(tasks, threads, [&](int64_t task, int thread) {
    const int64_t b = task / pieces, piece = task % pieces;
    const int64_t j0 = std::min(N, piece * piece_n), j1 = std::min(N, j0 + piece_n);
    if (j0 >= j1) return;
    float* a = ws.a(thread);
    const float* src = A + b * a_bs;
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t i = 0; i < rows; ++i) {
        a[k * rows + i] = i < M ? src[i * lda_row + k * lda_col] : 0.0f;
      }
    }
    float* at = a + K * rows;  // the tail rows, row-major
    for (int64_t r = 0; r < tail_rows; ++r) {
      for (int64_t k = 0; k < K; ++k) at[r * K + k] = src[(8 + r) * lda_row + k * lda_col];
    }
    if (R == 1) {
      skinny_columns_f32<1>(M, K, a, at, B + b * b_bs, ldb_row, ldb_col, C + b * c_bs, ldc,
                            accumulate, j0, j1);
    } else {
      skinny_columns_f32<2>(M, K, a, at, B + b * b_bs, ldb_row, ldb_col, C + b * c_bs, ldc,
                            accumulate, j0, j1);
    }
  });
}
#endif

// ---- gemm_packed_b: B packed once, A read in place ----

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

// One 6 x W tile of C (+)= A-tile @ B-panel, A at a with row step rs and column step ks.
template <typename T>
inline void tile_a_strided(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b, T* c,
                           int64_t ldc, bool load) {
#ifdef EMBER_GEMM_X86
  if constexpr (std::is_same_v<T, float>) {
    if (rs == 1) {
      kernel_avx2_f32_a_columns(kc, a, ks, b, c, ldc, load);
    } else {
      kernel_avx2_f32_a_rows(kc, a, rs, b, c, ldc, load);
    }
    return;
  }
#endif
  kernel_a_strided<T>(kc, a, rs, ks, b, c, ldc, load);
}

}  // namespace

template <typename T>
void pack_b_panels(int64_t K, int64_t N, const T* B, int64_t ldb_row, int64_t ldb_col, T* out) {
  if (K <= 0 || N <= 0) return;
  const Product<T> op{0, N, K, nullptr, 0, 0, B, ldb_row, ldb_col, nullptr, 0, false};
  pack_b(op, 0, K, 0, N, kPanelWidth<T>, out);  // panels of K x W, one after another
}

// Loops: K in blocks of KC (a block of a B panel, KC x W, stays in L1 while every row tile of
// A passes it), then panels, then tiles of 6 rows. A row tile short of 6 rows is packed (with
// zero rows) once per K block; a tile short of W columns runs on a copy of C.
template <typename T>
void gemm_packed_b(int64_t M, int64_t N, int64_t k, const T* A, int64_t lda_row, int64_t lda_col,
                   const T* Bp, int64_t K_packed, T* C, int64_t ldc, bool accumulate) {
  constexpr int64_t MR = 6, W = kPanelWidth<T>, KC = 256;
  if (M <= 0 || N <= 0) return;
  if (k <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < M; ++i) std::fill_n(C + i * ldc, N, T(0));
    }
    return;
  }
  const int64_t full_rows = M - M % MR;
#ifdef EMBER_GEMM_X86
  const bool pairs = std::is_same_v<T, float> && cpu_has_avx512();
#endif
  alignas(64) T edge_a[MR * KC];  // the last, partial row tile, packed
  alignas(64) T edge_c[MR * W];   // a partial tile of C
  for (int64_t pc = 0; pc < k; pc += KC) {
    const int64_t kc = std::min(KC, k - pc);
    const bool load = pc > 0 || accumulate;  // continue the chain of each C[i, j]
    // A partial tile (rows x cols of C): the full tile runs on a copy, the valid part is kept.
    auto edge_tile = [&](const T* a, int64_t rs, int64_t ks, const T* bj, T* c, int64_t rows,
                         int64_t cols) {
      if (load) {
        for (int64_t r = 0; r < rows; ++r) copy_partial_row(edge_c + r * W, c + r * ldc, cols);
      }
      tile_a_strided<T>(kc, a, rs, ks, bj, edge_c, W, load);
      for (int64_t r = 0; r < rows; ++r) copy_partial_row(c + r * ldc, edge_c + r * W, cols);
    };
    if (full_rows < M) {
      const T* a = A + full_rows * lda_row + pc * lda_col;
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t r = 0; r < MR; ++r) {
          edge_a[p * MR + r] = full_rows + r < M ? a[r * lda_row + p * lda_col] : T(0);
        }
      }
    }
    for (int64_t jr = 0; jr < N; jr += W) {
      const int64_t cols = std::min(W, N - jr);
      const T* b = Bp + jr * K_packed + pc * W;  // panel jr / W, row pc
      int64_t ir = 0;
#ifdef EMBER_GEMM_X86
      if constexpr (std::is_same_v<T, float>) {
        // With AVX-512, the full row tiles of two whole panels at once (same bits, see
        // kernel_avx512_f32_a_pair); their partial row tile, one panel at a time below.
        if (pairs && jr + 2 * W <= N) {
          const float* b1 = b + W * K_packed;
          for (; ir < full_rows; ir += MR) {
            const float* a = A + ir * lda_row + pc * lda_col;
            float* c = C + ir * ldc + jr;
            if (lda_row == 1) {
              kernel_avx512_f32_a_pair<false>(kc, a, 1, lda_col, b, b1, c, ldc, load);
            } else {
              kernel_avx512_f32_a_pair<true>(kc, a, lda_row, 1, b, b1, c, ldc, load);
            }
          }
          if (full_rows < M) {  // the packed edge rows, under each of the two panels
            T* c = C + full_rows * ldc + jr;
            edge_tile(edge_a, 1, MR, b, c, M - full_rows, W);
            edge_tile(edge_a, 1, MR, b1, c + W, M - full_rows, W);
          }
          jr += W;  // (and the loop's own step: two panels)
          continue;
        }
      }
#endif
      for (; ir < M; ir += MR) {
        const int64_t rows = std::min(MR, M - ir);
        const bool packed = ir >= full_rows;
        const T* a = packed ? edge_a : A + ir * lda_row + pc * lda_col;
        const int64_t rs = packed ? 1 : lda_row, ks = packed ? MR : lda_col;
        T* c = C + ir * ldc + jr;
        if (rows == MR && cols == W) {
          tile_a_strided<T>(kc, a, rs, ks, b, c, ldc, load);
          continue;
        }
        edge_tile(a, rs, ks, b, c, rows, cols);
      }
    }
  }
}

template <typename T>
void gemm_reference(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
                    const T* B, int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc,
                    bool accumulate) {
  reference(M, N, K, A, lda_row, lda_col, B, ldb_row, ldb_col, C, ldc, accumulate);
}

template <typename T>
void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t a_batch_stride, int64_t lda_row, int64_t lda_col, const T* B,
                  int64_t b_batch_stride, int64_t ldb_row, int64_t ldb_col, T* C,
                  int64_t c_batch_stride, int64_t ldc, bool accumulate) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  // Integers and tiny products (the book's 6 x 3 matrices) take the plain loop: same order,
  // no packing overhead.
  if (std::is_integral_v<T> || M * N * K <= kTinyWork) {
    for (int64_t b = 0; b < batch; ++b) {
      // Rows of C shorter than a vector: one chain per element (dot_products) beats the
      // reference's vectorized but very short row loop.
      (N < 8 ? dot_products<T> : reference<T>)(M, N, K, A + b * a_batch_stride, lda_row, lda_col,
                                               B + b * b_batch_stride, ldb_row, ldb_col,
                                               C + b * c_batch_stride, ldc, accumulate);
    }
    return;
  }
#ifdef EMBER_GEMM_X86
  // A few rows (a linear layer at decode time): B read in place, no packing pass over it.
  if constexpr (std::is_same_v<T, float>) {
    if (M <= kSkinnyRows) {
      skinny_batched_f32(batch, M, N, K, A, a_batch_stride, lda_row, lda_col, B, b_batch_stride,
                         ldb_row, ldb_col, C, c_batch_stride, ldc, accumulate);
      return;
    }
  }
#endif
  packed_batched(batch, M, N, K, A, a_batch_stride, lda_row, lda_col, B, b_batch_stride, ldb_row,
                 ldb_col, C, c_batch_stride, ldc, accumulate);
}

template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col, const T* B,
          int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc, bool accumulate) {
  gemm_batched<T>(1, M, N, K, A, 0, lda_row, lda_col, B, 0, ldb_row, ldb_col, C, 0, ldc,
                  accumulate);
}

const char* gemm_isa() { return config<float>().isa; }

#define EMBER_INSTANTIATE_GEMM(T)                                                                  \
  template void gemm<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, int64_t,  \
                        int64_t, T*, int64_t, bool);                                               \
  template void gemm_batched<T>(int64_t, int64_t, int64_t, int64_t, const T*, int64_t, int64_t,    \
                                int64_t, const T*, int64_t, int64_t, int64_t, T*, int64_t,         \
                                int64_t, bool);                                                    \
  template void gemm_reference<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, \
                                  int64_t, int64_t, T*, int64_t, bool);                            \
  template void pack_b_panels<T>(int64_t, int64_t, const T*, int64_t, int64_t, T*);                \
  template void gemm_packed_b<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*,  \
                                 int64_t, T*, int64_t, bool);
EMBER_INSTANTIATE_GEMM(float)
EMBER_INSTANTIATE_GEMM(double)
EMBER_INSTANTIATE_GEMM(int64_t)
#undef EMBER_INSTANTIATE_GEMM

}  // namespace ember::kernels
