// The skinny path of gemm_batched: float products with at most 16 rows of A, B read in place.
// (Summation order: the contract at the top of core/kernels/gemm.cpp.)
//
// Written once over Highway and compiled for each target (core/kernels/README.md), like the
// micro-kernels: vectors of 8 floats on AVX2 and AVX-512, 4 on NEON. The targets without
// fixed-width vectors (SCALAR, EMU128, SVE) have no skinny path: their products of a few rows
// take the blocked path's plain loops, the same bits (the contract).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/gemm_skinny.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/base/fma-inl.h"
#include "core/base/parallel.h"
#include "core/kernels/gemm.h"
#include "core/kernels/gemm_internal.h"
#include "core/kernels/gemm_transpose-inl.h"
#include "core/kernels/parallel_for.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::gemm_detail::HWY_NAMESPACE {

namespace {

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_HAVE_SCALABLE
SkinnyKernel target_skinny() { return {nullptr, false, nullptr, nullptr}; }
#else
namespace hn = hwy::HWY_NAMESPACE;
using simd::HWY_NAMESPACE::Fma;

using DF = hn::CappedTag<float, 8>;
using VF = hn::Vec<DF>;
constexpr int kL = static_cast<int>(hn::MaxLanes(DF()));  // floats per vector: 8, or 4 on NEON
static_assert(8 % kL == 0, "8 rows are whole vectors");

// ---- skinny products: a few rows of A (M <= 16), B read in place ----
//
// A linear layer at decode time multiplies a handful of rows of activations by a weight read
// as W^T, W [N, K] row-major: the GPT's out_head is 8 x 50257 x 768, 154 MB of weights for
// 0.3 GFLOP. The product is bound by reading W from memory once; packing W into panels first
// (what the blocked path of core/kernels/gemm.cpp does) would be a second pass over it, and at M <=
// 16 there are too few rows of A for a panel to be reused.
//
// So here the lanes of a SIMD register run down the rows of C instead of along them. A is
// packed once by columns (8 or 16 floats per k, rows past M zero; M x K is small), and for a
// block of NJ columns of C:
//
//   acc[j] = C[0:8R, j]                                (8R rows: R vectors of 8 floats on x86,
//   for k = 0 .. K-1:                                   2R of 4 on NEON; 0 or C)
//     a = A[0:8R, k]                                   (aligned loads of the packed column)
//     for j in the block:  acc[j] = fma(a, broadcast(B[k, j]), acc[j])
//
// Each lane of acc[j] is one C[i, j] and sees one fma per k, in increasing k: the summation
// order of the contract (top of core/kernels/gemm.cpp), so the result is the reference loop's bit
// for bit. B[k, j] is a scalar broadcast straight from memory through both strides, so W^T (ldb_row
// = 1: the block walks along NJ rows of W, each a contiguous stream) and a plain B (ldb_col = 1)
// need neither packing nor a transpose. The whole depth K runs in registers: each C[i, j] is read
// and written once. Per k (x86): R loads of A, NJ broadcasts of B and R * NJ fmas (NJ * R = 8
// accumulators, enough independent chains to cover the fma latency; 16 of 4 floats on NEON).
//
// The cost is one broadcast and (at M <= 8) one fma per element of W, so the loop can run at
// about the rate one core streams W from memory. A prototype reading W in 8 x 4 blocks
// transposed in registers, with A pre-broadcast as the fmas' memory operands, ran slower.
//
// The hardware prefetcher does not always start the next tile's NJ streams of W early enough
// by itself, so while a tile runs the W^T kernel prefetches the next tile's rows of W into L2
// (one line per row for every 16 k; __builtin_prefetch's locality 2 is prefetcht1 on x86,
// PRFM PLDL2KEEP on arm64), and the loop reads W at about the streaming rate (bench_gemm's
// 8x50257x768 B^T, the GPT's out_head, measures it).
//
// Threads split N into blocks of whole column groups: a column's chain never depends on the
// split, so 1 and 2 threads give the same bits.

// C^T tile of NJ columns and 8R rows: t[j * 8R + i] holds C[i, j] on entry and on exit. a is
// A packed by columns (a[k * 8R + i] = A[i, k]), 64-byte aligned; B[k, j] is at
// b[k * bk + j * bj], with bk == 1 when kColumnsContiguous (B = W^T: column j is row j of W).
template <int R, int NJ, bool kColumnsContiguous>
void skinny_kernel_f32(int64_t K, const float* a, const float* b, int64_t bk, int64_t bj,
                       float* t) {
  constexpr int kV = 8 * R / kL;  // vectors per column of the tile
  const DF d;
  const int64_t step = kColumnsContiguous ? 1 : bk;
  VF acc[NJ][kV];
  const float* col[NJ];  // B[0, j] for each column of the block
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) {
    col[j] = b + j * bj;
#pragma GCC unroll 4
    for (int r = 0; r < kV; ++r) acc[j][r] = hn::LoadU(d, t + (j * kV + r) * kL);
  }
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    if constexpr (kColumnsContiguous) {
      // The next tile's rows of W, one line (16 floats) per row for each 16 k of this one: in
      // L2 by the time it starts (see the note above skinny_kernel_f32).
#pragma GCC unroll 8
      for (int j = 0; j < NJ; ++j) __builtin_prefetch(col[j] + NJ * bj + k0, 0, 2);
    }
    const int64_t k1 = std::min(K, k0 + 16);
    for (int64_t k = k0; k < k1; ++k) {
      VF av[kV];
#pragma GCC unroll 4
      for (int r = 0; r < kV; ++r) av[r] = hn::Load(d, a + (k * kV + r) * kL);
#pragma GCC unroll 8
      for (int j = 0; j < NJ; ++j) {
        const VF bv = hn::Set(d, col[j][k * step]);
#pragma GCC unroll 4
        for (int r = 0; r < kV; ++r) acc[j][r] = Fma(av[r], bv, acc[j][r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int r = 0; r < kV; ++r) hn::StoreU(acc[j][r], d, t + (j * kV + r) * kL);
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

// The tail rows below need vectors of 8 floats (8 x 8 blocks transposed): AVX2 and AVX-512.
// With 4 (NEON), 9..16 rows take two registers' worth of rows (R = 2).
#undef EMBER_SKINNY_TAIL
#define EMBER_SKINNY_TAIL (HWY_MAX_BYTES >= 32)
constexpr bool kTail = EMBER_SKINNY_TAIL;

#if EMBER_SKINNY_TAIL

// Rows 8 .. 8 + NT - 1 of C (M = 9..12, B = W^T, so column j of B is row j of W), for G tiles
// of eight columns: out[t * ldo + 8g + j] holds C[8 + t, 8g + j], read and written. The main
// kernel has just streamed these rows of W (8 x K floats per tile: 24 KB at K = 768, still in
// L1 or L2); here they are read again as 8 x 8 blocks and transposed in registers, so that lane
// j holds W[j, k] = B[k, j] and one fma per k updates eight columns of a tail row:
//
//   for k in steps of 8:   v[u] = (B[k + u, 0], ..., B[k + u, 7])        (8 loads, 24 shuffles)
//     for u = 0..7, t:     acc[t] = fma(A[8 + t, k + u], v[u], acc[t])
//
// Each C[8 + t, j] still sees one fma per k, in increasing k (the contract's order), at one fma
// per eight elements of W and tail row, instead of the second register of a 16-row tile (one
// fma per element of W, for rows that are mostly padding). An accumulator's fmas form one chain
// (4 cycles each), so NT x G chains run side by side. at holds the tail rows of A row-major:
// at[t * K + k] = A[8 + t, k]. kStream: W comes from memory, not from the cache (M = 1, below),
// so while this tile's 8G rows stream, the next tile's 8G rows (from next; null after the last
// tile) are prefetched into L2 at the same k, one line per row for every 16 k, and every tile
// finds its rows in L2 (as the tiles of skinny_kernel_f32 do), rather than a few lines ahead
// within the tile's own rows (the variants measured: core/kernels/HISTORY.md).
template <int NT, int G, bool kStream = false>
void skinny_tail_f32(int64_t K, const float* at, const float* b, int64_t bj, float* out,
                     int64_t ldo, const float* next = nullptr) {
  static_assert(kL == 8 && kBlockN == 8, "the tail works on 8 x 8 blocks");
  const DF d;
  VF acc[G][NT];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < NT; ++t) acc[g][t] = hn::LoadU(d, out + t * ldo + g * 8);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    if constexpr (kStream) {
      if (next != nullptr && k % 16 == 0) {
#pragma GCC unroll 32
        for (int j = 0; j < 8 * G; ++j) __builtin_prefetch(next + j * bj + k, 0, 2);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const float* w = b + g * 8 * bj + k;
      VF v[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) v[j] = hn::LoadU(d, w + j * bj);
      transpose_block(v);  // v[u] = (B[k + u, 0], ..., B[k + u, 7])
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t)
          acc[g][t] = Fma(hn::Set(d, at[t * K + k + u]), v[u], acc[g][t]);
      }
    }
  }
  for (; k < K; ++k) {
    for (int g = 0; g < G; ++g) {
      const float* w = b + g * 8 * bj + k;
      HWY_ALIGN float column[8];  // B[k, 8g .. 8g + 7]
      for (int j = 0; j < 8; ++j) column[j] = w[j * bj];
      const VF v = hn::Load(d, column);
      for (int t = 0; t < NT; ++t) acc[g][t] = Fma(hn::Set(d, at[t * K + k]), v, acc[g][t]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < NT; ++t) hn::StoreU(acc[g][t], d, out + t * ldo + g * 8);
}

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

// One row of A times W^T (M = 1, B = W^T: column j of B is row j of W, at w + j * ldw), the
// product of a linear layer at each step of a generation with the KV cache: y[j0:j1] (+)= x W^T.
// The tiles above would put the row in one lane of eight and compute seven padded rows, one fma
// per element of W: at M = 1 that fma, not memory, bounds the loop. Here the tail rows' kernel
// (skinny_tail_f32, NT = 1) takes the row instead: 8 x 8 blocks of W transposed in registers, one
// fma per eight elements, two tiles' chains side by side, each y[j] still one fma chain in
// increasing k (the contract's order); columns past the last whole tile take a plain fma loop.
// W streams from memory as 16 rows side by side, the next 16 prefetched into L2 meanwhile (the
// hardware prefetcher does not follow that many streams at once). x is the row, contiguous.
void row_wt_f32(int64_t K, const float* x, const float* w, int64_t ldw, float* y, bool accumulate,
                int64_t j0, int64_t j1) {
  if (!accumulate) std::fill(y + j0, y + j1, 0.0f);
  int64_t j = j0;
  // 16 rows side by side, not 32: 32 rows 4 KB apart (K a multiple of 1024) also evict each
  // other's lines from L1's sets (core/kernels/HISTORY.md).
  for (; j + 16 <= j1; j += 16)
    skinny_tail_f32<1, 2, true>(K, x, w + j * ldw, ldw, y + j, 0,
                                j + 32 <= j1 ? w + (j + 16) * ldw : nullptr);
  for (; j + 8 <= j1; j += 8) skinny_tail_f32<1, 1, true>(K, x, w + j * ldw, ldw, y + j, 0);
  for (; j < j1; ++j) {
    float sum = y[j];
    for (int64_t k = 0; k < K; ++k) sum = std::fma(x[k], w[j * ldw + k], sum);
    y[j] = sum;
  }
}

#endif  // EMBER_SKINNY_TAIL

// One row of A times a B whose rows are contiguous (M = 1, ldb_col = 1): at each step of a
// generation with the KV cache, attention's weights times V. The tiles above would put the row
// in one lane of eight; here the lanes run along the row of C instead, as in the blocked path's
// micro-tiles: y[j:j + U kL] in U registers, and for each k one broadcast of x[k] and U fmas
// with row k of B. Each y[j] is still one fma chain in increasing k (the contract's order).
template <int U>
void row_b_block_f32(int64_t K, const float* x, const float* b, int64_t ldb, float* y) {
  const DF d;
  VF acc[U];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = hn::LoadU(d, y + u * kL);
  for (int64_t k = 0; k < K; ++k) {
    const VF xk = hn::Set(d, x[k]);
    const float* row = b + k * ldb;
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[u] = Fma(xk, hn::LoadU(d, row + u * kL), acc[u]);
  }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) hn::StoreU(acc[u], d, y + u * kL);
}

// y[j0:j1] (+)= x B[:, j0:j1]: eight registers of columns at a time (eight independent chains
// cover the fma's latency), then one, then single columns.
void row_b_f32(int64_t K, const float* x, const float* b, int64_t ldb, float* y, bool accumulate,
               int64_t j0, int64_t j1) {
  if (!accumulate) std::fill(y + j0, y + j1, 0.0f);
  int64_t j = j0;
  for (; j + 8 * kL <= j1; j += 8 * kL) row_b_block_f32<8>(K, x, b + j, ldb, y + j);
  for (; j + kL <= j1; j += kL) row_b_block_f32<1>(K, x, b + j, ldb, y + j);
  for (; j < j1; ++j) {
    float sum = y[j];
    for (int64_t k = 0; k < K; ++k) sum = std::fma(x[k], b[k * ldb + j], sum);
    y[j] = sum;
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
  const int nt = kTail && R == 1 && M > 8 ? static_cast<int>(M - 8) : 0;
  constexpr int64_t kChunk = kSkinnyTailTiles * 8;
  HWY_ALIGN float t[NJ * kRows];
  HWY_ALIGN float tail[kSkinnyTailRows * kChunk];
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
#if EMBER_SKINNY_TAIL
      skinny_tail_tiles_f32(nt, tiles, K, at, B + chunk * ldb_col, ldb_col, tail, kChunk);
#endif
      for (int r = 0; r < nt; ++r) std::copy_n(tail + r * kChunk, cols, C + (8 + r) * ldc + chunk);
    }
  }
}

// C[0:M, j0:j1] (+)= A @ B[:, j0:j1] for one piece of a product, A packed by columns in a
// (8R rows per k) and its tail rows in at.
void columns_f32(int R, int64_t M, int64_t K, const float* a, const float* at, const float* B,
                 int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc, bool accumulate,
                 int64_t j0, int64_t j1) {
  if (R == 1) {
    skinny_columns_f32<1>(M, K, a, at, B, ldb_row, ldb_col, C, ldc, accumulate, j0, j1);
  } else {
    skinny_columns_f32<2>(M, K, a, at, B, ldb_row, ldb_col, C, ldc, accumulate, j0, j1);
  }
}

#if EMBER_SKINNY_TAIL
SkinnyKernel target_skinny() { return {columns_f32, kTail, row_wt_f32, row_b_f32}; }
#else
SkinnyKernel target_skinny() { return {columns_f32, kTail, nullptr, row_b_f32}; }
#endif
#endif

}  // namespace

SkinnyKernel SkinnyF32() { return target_skinny(); }

}  // namespace ember::kernels::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels::gemm_detail {

HWY_EXPORT(SkinnyF32);

// gemm_batched for float products with 1 <= M <= kSkinnyRows (and K >= 1): threads share out
// whole products when the batch divides evenly, else cut each product along N. The target's
// kernel is chosen once per call (EMBER_CPU_CAPABILITY applied). A product deeper than
// kSkinnyDepth is left to the blocked path, like a target without a skinny kernel.
bool skinny_batched_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                        int64_t a_bs, int64_t lda_row, int64_t lda_col, const float* B,
                        int64_t b_bs, int64_t ldb_row, int64_t ldb_col, float* C, int64_t c_bs,
                        int64_t ldc, bool accumulate) {
  cpu::apply_capability();
  const SkinnyKernel kernel = HWY_DYNAMIC_DISPATCH(SkinnyF32)();
  if (kernel.columns == nullptr || K > kSkinnyDepth) return false;
  // Up to 8 rows: one register of rows. 9..12 rows of a product with W^T: the same, plus
  // skinny_tail_f32 for the rest (where the target has it). Else two registers of rows (R = 2).
  // One row with W^T: the row kernel (row_wt_f32), where the target has it; with B's rows
  // contiguous, row_b_f32.
  const bool row = kernel.row != nullptr && M == 1 && ldb_row == 1;
  const bool row_b = !row && kernel.row_b != nullptr && M == 1 && ldb_col == 1;
  const bool tail = !row && kernel.tail && M > 8 && M <= 8 + kSkinnyTailRows && ldb_row == 1;
  const int R = M > 8 && !tail ? 2 : 1;
  const int64_t group = 8 / R;                    // columns per tile
  const int64_t rows = row || row_b ? 1 : 8 * R;  // rows of packed A (a row path: x itself)
  const int64_t tail_rows = tail ? M - 8 : 0;
  const int64_t work = work_of(batch, M, N, K);
  int threads = work >= kParallelWork && !omp_in_parallel() ? get_num_threads() : 1;
  const int64_t groups = (N + group - 1) / group;
  int64_t pieces = 1;
  if (threads > 1 && batch % threads != 0) pieces = std::min<int64_t>(threads, groups);
  const int64_t tasks = batch * pieces;
  threads = static_cast<int>(std::min<int64_t>(threads, tasks));
  const int64_t piece_n = (groups + pieces - 1) / pieces * group;
  int64_t packed_a = 0;  // K * (rows + tail_rows); -1 when it overflows (Workspace refuses it)
  if (__builtin_mul_overflow(K, rows + tail_rows, &packed_a)) packed_a = -1;
  const Workspace<float> ws(threads, packed_a, 0);

  parallel_for(tasks, threads, [&](int64_t task, int thread) {
    const int64_t b = task / pieces, piece = task % pieces;
    const int64_t j0 = std::min(N, piece * piece_n), j1 = std::min(N, j0 + piece_n);
    if (j0 >= j1) return;
    float* a = ws.a(thread);
    const float* src = A + b * a_bs;
    if (row || row_b) {  // x as it is when contiguous, else gathered
      if (lda_col != 1) {
        for (int64_t k = 0; k < K; ++k) a[k] = src[k * lda_col];
      }
      const float* x = lda_col == 1 ? src : a;
      if (row) {
        kernel.row(K, x, B + b * b_bs, ldb_col, C + b * c_bs, accumulate, j0, j1);
      } else {
        kernel.row_b(K, x, B + b * b_bs, ldb_row, C + b * c_bs, accumulate, j0, j1);
      }
      return;
    }
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t i = 0; i < rows; ++i) {
        a[k * rows + i] = i < M ? src[i * lda_row + k * lda_col] : 0.0f;
      }
    }
    float* at = a + K * rows;  // the tail rows, row-major
    for (int64_t r = 0; r < tail_rows; ++r) {
      for (int64_t k = 0; k < K; ++k) at[r * K + k] = src[(8 + r) * lda_row + k * lda_col];
    }
    kernel.columns(R, M, K, a, at, B + b * b_bs, ldb_row, ldb_col, C + b * c_bs, ldc, accumulate,
                   j0, j1);
  });
  return true;
}

// The running target's skinny kernels, for gemm_row_panels below. (HWY_DYNAMIC_DISPATCH names
// the kernel from this namespace: with HWY_COMPILE_ONLY_STATIC it is a static dispatch to
// N_<target>::SkinnyF32, which only resolves here.)
namespace {
SkinnyKernel skinny_kernel_f32() { return HWY_DYNAMIC_DISPATCH(SkinnyF32)(); }
}  // namespace

}  // namespace ember::kernels::gemm_detail

namespace ember::kernels {

// A copy, bound by memory: the plain loop (split over threads or filled in blocks of k it is no
// faster; core/kernels/HISTORY.md).
void pack_row_panels(int64_t N, int64_t K, const float* w, int64_t ldw_row, int64_t ldw_col,
                     float* out) {
  for (int64_t j0 = 0; j0 < N; j0 += kRowPanel) {
    const int64_t width = std::min(kRowPanel, N - j0);
    float* panel = out + j0 * K;
    for (int64_t jj = 0; jj < width; ++jj) {  // W's row j0 + jj, read along k
      const float* row = w + (j0 + jj) * ldw_row;
      for (int64_t k = 0; k < K; ++k) panel[k * width + jj] = row[k * ldw_col];
    }
  }
}

// Each panel is a B of K rows and `width` contiguous columns (ldb = width): the skinny path's
// one-row kernel for such a B (row_b_f32, eight registers of columns per k) where the target has
// it, else the contract's loop.
void gemm_row_panels(int64_t N, int64_t K, const float* x, const float* panels, float* y,
                     bool accumulate) {
  if (N <= 0) return;
  if (K <= 0) {
    if (!accumulate) std::fill(y, y + N, 0.0f);
    return;
  }
  cpu::apply_capability();
  const auto row_b = gemm_detail::skinny_kernel_f32().row_b;
  const int64_t count = (N + kRowPanel - 1) / kRowPanel;
  int threads = N * K >= gemm_detail::kParallelWork && !omp_in_parallel() ? get_num_threads() : 1;
  threads = static_cast<int>(std::min<int64_t>(threads, count));
  // Threads take runs of whole panels: a y[j]'s chain does not depend on the split.
  parallel_for(threads, threads, [&](int64_t part, int) {
    const int64_t p0 = count * part / threads, p1 = count * (part + 1) / threads;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t j0 = p * kRowPanel, width = std::min(kRowPanel, N - j0);
      const float* b = panels + j0 * K;
      if (row_b != nullptr) {
        row_b(K, x, b, width, y + j0, accumulate, 0, width);
        continue;
      }
      for (int64_t j = 0; j < width; ++j) {
        float sum = accumulate ? y[j0 + j] : 0.0f;
        for (int64_t k = 0; k < K; ++k) sum = std::fma(x[k], b[k * width + j], sum);
        y[j0 + j] = sum;
      }
    }
  });
}

}  // namespace ember::kernels
#endif  // HWY_ONCE
