// The GEMM driver: the reference loop, the blocked path and the choice of path. The other files
// of the GEMM, one per path:
//
//   gemm_microkernel.*  the micro-kernels: the plain loops (.h) and one vector tile over Highway
//                       for every target and the three ways it reads A (packed, by columns,
//                       by rows)
//   gemm_pack.cpp       packing blocks of A and B into the panels the micro-kernels read
//   gemm_skinny.cpp     products with at most 16 rows of A (decode time), B read in place
//   gemm_packed_b.cpp   gemm_packed_b: B packed once, A read in place (the fused attention)
//   gemm_internal.h     what they share (Product, Workspace, fused, thresholds)
//
// ---- The contract every path keeps (bit-exactness) ----
//
// gemm.h states it: every C[i, j] is one chain of fused multiply-adds over k in increasing
// order, in T itself, starting from 0 (or from C[i, j] when accumulating):
//
//   c = 0;  for k = 0 .. K-1:  c = fma(A[i, k], B[k, j], c)
//
// Each path computes exactly that chain per C[i, j], only in another order across (i, j):
// - reference / dot_products (below): the loop itself, in i-k-j or i-j-k order.
// - blocked (below): a micro-kernel's accumulator for C[i, j] takes one fma per k of a K block
//   in increasing k; the next K block reloads the partial sum the previous one stored (load).
//   Packing only moves values (and zero-pads tiles whose padding is then dropped).
// - skinny (gemm_skinny.cpp): lanes run down rows of C instead of along them; each lane is still
//   one C[i, j] with one fma per k, in increasing k, over the whole depth.
// - packed B (gemm_packed_b.cpp): the micro-kernel tiles with A read in place, K blocks as in
//   the blocked path; the pair tile gives each C[i, j] the same chain as two single tiles.
// Threads cut C into disjoint blocks and never split k, so no chain depends on the thread count,
// the SIMD width or the blocking: gemm equals gemm_reference bit for bit on every machine. The
// build keeps it so: -ffp-contract=off (a * b + c is never fused behind our back) and no
// -ffast-math (see CMakeLists.txt). The GEMM sweeps of tests/core/kernels/test_gemm.cpp check it.
//
// ---- The blocked path ----
//
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
//
// Threads: each product is cut into as many pieces as needed to keep every thread busy, along
// N or M (whichever has more micro-tiles: the decode shape 8 x 50257 splits N, a tall-skinny
// gradient splits M); pieces are disjoint blocks of C, and each thread packs its own panels.
//
// Float products with at most 16 rows (a linear layer at decode time: x [8, 768] @ W^T) skip
// all this and read B in place, with the lanes of a register down the rows of C: see
// core/kernels/gemm_skinny.cpp.
#include "core/kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/base/parallel.h"
#include "core/kernels/gemm_internal.h"
#include "core/kernels/gemm_microkernel.h"
#include "core/kernels/parallel_for.h"

namespace ember::kernels {

using namespace gemm_detail;

namespace {

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

// Asks for every cache line of a rows x cols tile of C (for writing), one row after another. A
// row of a tile is NR values but not aligned to lines (a std::vector's data starts 16 bytes
// past one; a view of columns anywhere), so 32 floats can span three lines: prefetching only
// a row's first and last values left the middle line to a demand miss inside the micro-kernel.
template <typename T>
inline void prefetch_tile(const T* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    const char* first = reinterpret_cast<const char*>(c + r * ldc);
    const char* last = reinterpret_cast<const char*>(c + r * ldc + cols - 1);
    for (const char* line = first; line < last; line += 64) __builtin_prefetch(line, 1);
    __builtin_prefetch(last, 1);
  }
}

// The widest block of C whose rows of A the blocked path reads in place (see multiply_block).
constexpr int64_t kInPlaceColumns = 1024;

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
  // rows x cols of a tile of C (row stride ld) set to the bias of its columns, from column j.
  auto bias_rows = [&](T* out, int64_t ld, int64_t rows, int64_t cols, int64_t j) {
    const T* bias = op.bias + j * op.bias_stride;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * ld + c] = bias[c * op.bias_stride];
  };
  // A read where it lies, its full row tiles not packed (a last partial row tile is, with zero
  // rows), when its rows are contiguous and the block is at most kInPlaceColumns wide: packing a
  // block of A costs a pass over it, paid back only by the B panels that read it, nc / NR of
  // them. For a narrow block (the small GPT config's 768 x 128 x 512 and the like) that pass
  // costs more than it saves. A^T (columns contiguous) read in place measured slower than packed,
  // so it stays packed; so does every A under a tile narrower than 32 columns (AVX2, NEON:
  // config's in_place is null there).
  const bool a_in_place = cfg.in_place != nullptr && op.lda_col == 1 && j1 - j0 <= kInPlaceColumns;
  // Software prefetching of C pays when C comes from beyond L2 (a block of C over 1 MiB, half a
  // 2 MiB L2); where C stays in L2 it only costs instructions.
  const bool prefetch_c = (i1 - i0) * (j1 - j0) * int64_t(sizeof(T)) > (int64_t{1} << 20);
  for (int64_t jc = j0; jc < j1; jc += cfg.NC) {
    const int64_t nc = std::min(cfg.NC, j1 - jc);
    for (int64_t pc = 0; pc < op.K; pc += cfg.KC) {
      const int64_t kc = std::min(cfg.KC, op.K - pc);
      // Continue the chain of each C[i, j]; with a bias, start it there: the bias goes into
      // each tile just before its first block of k, while the tile is in L1.
      const bool load = pc > 0 || op.accumulate || op.bias != nullptr;
      const bool start_at_bias = pc == 0 && op.bias != nullptr;
      pack_b(op, pc, kc, jc, nc, NR, b_buf);
      for (int64_t ic = i0; ic < i1; ic += cfg.MC) {
        const int64_t mc = std::min(cfg.MC, i1 - ic);
        const int64_t full = mc - mc % MR;  // rows of this block in full row tiles
        if (!a_in_place) {
          pack_a(op, ic, mc, pc, kc, MR, a_buf);
        } else if (full < mc) {  // only the partial row tile, at its place among the panels
          pack_a(op, ic + full, mc - full, pc, kc, MR, a_buf + full * kc);
        }
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t cols = std::min(NR, nc - jr);
          const T* b_panel = b_buf + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int64_t rows = std::min(MR, mc - ir);
            const bool in_place = a_in_place && ir < full;
            const T* a_panel =
                in_place ? op.A + (ic + ir) * op.lda_row + pc * op.lda_col : a_buf + ir * kc;
            auto tile = [&](T* out, int64_t ld) {
              if (in_place) {
                cfg.in_place(kc, a_panel, op.lda_row, b_panel, out, ld, load);
              } else {
                cfg.kernel(kc, a_panel, b_panel, out, ld, load);
              }
            };
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
              if (start_at_bias) bias_rows(c, op.ldc, MR, NR, jc + jr);
              tile(c, op.ldc);
              continue;
            }
            // A partial tile: run the full tile on a copy, keep the valid part.
            if (start_at_bias) {
              bias_rows(edge, NR, rows, cols, jc + jr);
            } else if (load) {
              for (int64_t r = 0; r < rows; ++r)
                copy_partial_row(edge + r * NR, c + r * op.ldc, cols);
            }
            tile(edge, NR);
            for (int64_t r = 0; r < rows; ++r)
              copy_partial_row(c + r * op.ldc, edge + r * NR, cols);
          }
        }
      }
    }
  }
}

template <typename T>
void packed_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A, int64_t a_bs,
                    int64_t lda_row, int64_t lda_col, const T* B, int64_t b_bs, int64_t ldb_row,
                    int64_t ldb_col, T* C, int64_t c_bs, int64_t ldc, bool accumulate,
                    const T* bias = nullptr, int64_t bias_stride = 0) {
  const Config<T> cfg = config<T>();
  const int64_t work = multiply_adds(batch, M, N, std::max<int64_t>(K, 1));
  // Inside another kernel's parallel region (a fused attention's heads), stay on this thread.
  int threads = work >= kParallelWork && !omp_in_parallel() ? get_num_threads() : 1;

  // Pieces per product: 1 when the batch alone divides evenly over the threads, else cut
  // each product along the dimension with more micro-tiles, or along N as said below.
  const int64_t m_tiles = (M + cfg.MR - 1) / cfg.MR, n_tiles = (N + cfg.NR - 1) / cfg.NR;
  // Split along M, each thread packs all of B (K x N); along N, each thread reads all of A
  // (M x K, packed or in place). So N is also split when A is the smaller (M < N) and the column
  // tiles share out evenly (or are many): the chapter-5 GPT's 512 x 2304 x 768 B^T (its qkv)
  // gains; where M > N, splitting N makes each thread read all of A, the larger operand, and loses.
  const bool n_shares_out =
      threads > 1 && (n_tiles % threads == 0 || n_tiles >= int64_t{4} * threads);
  const bool split_n = n_tiles >= m_tiles || (n_shares_out && M < N);
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
                        accumulate,
                        bias,
                        bias_stride};
    const int64_t i0 = split_n ? 0 : std::min(M, piece * piece_m);
    const int64_t i1 = split_n ? M : std::min(M, i0 + piece_m);
    const int64_t j0 = split_n ? std::min(N, piece * piece_n) : 0;
    const int64_t j1 = split_n ? std::min(N, j0 + piece_n) : N;
    if (i0 < i1 && j0 < j1) multiply_block(cfg, op, i0, i1, j0, j1, ws.a(thread), ws.b(thread));
  });
}

}  // namespace

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
  if (std::is_integral_v<T> || multiply_adds(1, M, N, K) <= kTinyWork) {
    for (int64_t b = 0; b < batch; ++b) {
      // Rows of C shorter than a vector: one chain per element (dot_products) beats the
      // reference's vectorized but very short row loop.
      (N < 8 ? dot_products<T> : reference<T>)(M, N, K, A + b * a_batch_stride, lda_row, lda_col,
                                               B + b * b_batch_stride, ldb_row, ldb_col,
                                               C + b * c_batch_stride, ldc, accumulate);
    }
    return;
  }
  // A few rows (a linear layer at decode time): B read in place, no packing pass over it.
  if constexpr (std::is_same_v<T, float>) {
    if (M <= kSkinnyRows &&
        skinny_batched_f32(batch, M, N, K, A, a_batch_stride, lda_row, lda_col, B, b_batch_stride,
                           ldb_row, ldb_col, C, c_batch_stride, ldc, accumulate)) {
      return;
    }
  }
  packed_batched(batch, M, N, K, A, a_batch_stride, lda_row, lda_col, B, b_batch_stride, ldb_row,
                 ldb_col, C, c_batch_stride, ldc, accumulate);
}

template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col, const T* B,
          int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc, bool accumulate) {
  gemm_batched<T>(1, M, N, K, A, 0, lda_row, lda_col, B, 0, ldb_row, ldb_col, C, 0, ldc,
                  accumulate);
}

template <typename T>
void gemm_bias(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
               const T* B, int64_t ldb_row, int64_t ldb_col, const T* bias, int64_t bias_stride,
               T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  // The paths that do not pack (integers, tiny and skinny products, no k at all): the bias
  // copied into every row, then the product accumulated onto it.
  bool packed = !std::is_integral_v<T> && multiply_adds(1, M, N, K) > kTinyWork;
  if constexpr (std::is_same_v<T, float>) packed = packed && M > kSkinnyRows;
  if (!packed) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = bias[j * bias_stride];
    gemm_batched<T>(1, M, N, K, A, 0, lda_row, lda_col, B, 0, ldb_row, ldb_col, C, 0, ldc, true);
    return;
  }
  packed_batched(int64_t{1}, M, N, K, A, 0, lda_row, lda_col, B, 0, ldb_row, ldb_col, C, 0, ldc,
                 false, bias, bias_stride);
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
  template void gemm_bias<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*,      \
                             int64_t, int64_t, const T*, int64_t, T*, int64_t);
EMBER_INSTANTIATE_GEMM(float)
EMBER_INSTANTIATE_GEMM(double)
EMBER_INSTANTIATE_GEMM(int64_t)
#undef EMBER_INSTANTIATE_GEMM

}  // namespace ember::kernels
