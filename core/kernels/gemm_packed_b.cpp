// gemm_packed_b: B packed once into panels (pack_b_panels), A read in place, for the products
// inside a fused kernel (see core/kernels/gemm.h). The tiles are the micro-kernels of
// core/kernels/gemm_microkernel.h reading A by rows or by columns; the summation order is the
// contract at the top of core/kernels/gemm.cpp, so results are gemm's bit for bit.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/kernels/gemm.h"
#include "core/kernels/gemm_internal.h"
#include "core/kernels/gemm_microkernel.h"

namespace ember::kernels {

using gemm_detail::Config;
using gemm_detail::copy_partial_row;
using gemm_detail::pack_b;
using gemm_detail::Product;

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
  const Config<T> cfg = gemm_detail::config<T>();
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
      cfg.strided(kc, a, rs, ks, bj, edge_c, W, load);
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
      // Where the target has a pair tile, the full row tiles of two whole panels at once (same
      // bits: each C[i, j] gets the same chain); their partial row tile, one panel at a time.
      if (cfg.pair != nullptr && jr + 2 * W <= N) {
        const T* b1 = b + W * K_packed;
        for (; ir < full_rows; ir += MR) {
          cfg.pair(kc, A + ir * lda_row + pc * lda_col, lda_row, lda_col, b, b1, C + ir * ldc + jr,
                   ldc, load);
        }
        if (full_rows < M) {  // the packed edge rows, under each of the two panels
          T* c = C + full_rows * ldc + jr;
          edge_tile(edge_a, 1, MR, b, c, M - full_rows, W);
          edge_tile(edge_a, 1, MR, b1, c + W, M - full_rows, W);
        }
        jr += W;  // (and the loop's own step: two panels)
        continue;
      }
      for (; ir < M; ir += MR) {
        const int64_t rows = std::min(MR, M - ir);
        const bool packed = ir >= full_rows;
        const T* a = packed ? edge_a : A + ir * lda_row + pc * lda_col;
        const int64_t rs = packed ? 1 : lda_row, ks = packed ? MR : lda_col;
        T* c = C + ir * ldc + jr;
        if (rows == MR && cols == W) {
          cfg.strided(kc, a, rs, ks, b, c, ldc, load);
          continue;
        }
        edge_tile(a, rs, ks, b, c, rows, cols);
      }
    }
  }
}

#define EMBER_INSTANTIATE_PACKED_B(T)                                                             \
  template void pack_b_panels<T>(int64_t, int64_t, const T*, int64_t, int64_t, T*);               \
  template void gemm_packed_b<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, \
                                 int64_t, T*, int64_t, bool);
EMBER_INSTANTIATE_PACKED_B(float)
EMBER_INSTANTIATE_PACKED_B(double)
EMBER_INSTANTIATE_PACKED_B(int64_t)
#undef EMBER_INSTANTIATE_PACKED_B

}  // namespace ember::kernels
