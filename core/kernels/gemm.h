// GEMM: the matrix product every linear layer and attention score ends in.
//
//   C[M, N]  =  A[M, K] @ B[K, N]        (accumulate = false)
//   C[M, N] +=  A[M, K] @ B[K, N]        (accumulate = true)
//
// A and B are read through a row stride and a column stride each, so a transposed operand
// (A^T has the strides of A swapped) or a slice needs no copy. C is written row-major with
// row stride ldc and column stride 1. Raw loops, no autograd: the differentiable ops live in
// core/ops/linalg.cpp.
//
// The summation order is part of the contract: every C[i, j] is one chain of fused
// multiply-adds over k in increasing order, in T itself (float32 accumulates in float, like
// BLAS's sgemm), starting from 0 (or from C[i, j] when accumulating):
//
//   c = 0;  for k = 0 .. K-1:  c = fma(A[i, k], B[k, j], c)
//
// whatever the blocking, the SIMD width or the number of threads. So gemm and gemm_reference
// give the same bits, and results do not depend on the machine's core count.
#pragma once

#include <cstdint>

namespace ember::kernels {

// T is float, double or int64_t.
template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col, const T* B,
          int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc, bool accumulate);

// `batch` independent products; operand b starts at A + b * a_batch_stride, and so on.
// A batch stride of 0 reuses one matrix for every product (a broadcast operand).
template <typename T>
void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t a_batch_stride, int64_t lda_row, int64_t lda_col, const T* B,
                  int64_t b_batch_stride, int64_t ldb_row, int64_t ldb_col, T* C,
                  int64_t c_batch_stride, int64_t ldc, bool accumulate);

// C[M, N] = bias + A @ B with bias a row of N values (bias[j] at bias + j * bias_stride; a
// stride of 0 broadcasts one value) added to every row: each C[i, j] is gemm's chain started
// from bias[j] instead of 0, the bits of copying the bias into every row of C and accumulating
// (what addmm computes, and PyTorch's addmm hands BLAS), without that copying pass: the blocked
// path writes the bias into a tile of C just before the tile's first block of k. C must not
// overlap the operands or the bias.
template <typename T>
void gemm_bias(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
               const T* B, int64_t ldb_row, int64_t ldb_col, const T* bias, int64_t bias_stride,
               T* C, int64_t ldc);

// The portable reference: the textbook loop with the same summation order (single thread, no
// packing). Tests check that gemm agrees with it bit for bit; tiny products use it directly.
template <typename T>
void gemm_reference(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
                    const T* B, int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc,
                    bool accumulate);

// ---- B packed once, many products: the products inside a fused kernel ----
//
// Fused attention multiplies every block of queries by the same K and V (prefixes of them):
// packing them once per head, instead of once per product, and reading A (a tile the kernel
// has just written, or a transposed one) in place without packing it, saves what dominates
// products with a depth or a width of 64. The summation order is gemm's (one fma chain over k
// in increasing order per C[i, j]), so results are gemm's bit for bit. Single-threaded: these
// run inside a kernel's own parallel region.

// Columns per panel of a packed B (16 floats, 8 doubles).
template <typename T>
constexpr int64_t kPanelWidth = sizeof(T) == 4 ? 16 : 8;

// Elements of a packed B of K rows and N columns: ceil(N / kPanelWidth) panels of K x width.
template <typename T>
constexpr int64_t packed_b_size(int64_t K, int64_t N) {
  return (N + kPanelWidth<T> - 1) / kPanelWidth<T> * kPanelWidth<T> * K;
}

// out = B[0:K, 0:N] as panels: out[(j / W) * K * W + p * W + j % W] = B[p, j] (W the panel
// width, columns past N zero). The first k rows of every panel are B[0:k, :], so one packing
// serves every product over a prefix of B's rows or columns.
template <typename T>
void pack_b_panels(int64_t K, int64_t N, const T* B, int64_t ldb_row, int64_t ldb_col, T* out);

// C[M, N] (+)= A[M, k] @ Bp[0:k, 0:N], Bp packed by pack_b_panels with K_packed >= k rows and at
// least N columns. A is read in place: either its rows (lda_col == 1) or its columns
// (lda_row == 1) contiguous.
template <typename T>
void gemm_packed_b(int64_t M, int64_t N, int64_t k, const T* A, int64_t lda_row, int64_t lda_col,
                   const T* Bp, int64_t K_packed, T* C, int64_t ldc, bool accumulate);

// ---- One row times W^T, W packed once in row panels: generation with the KV cache ----
//
// At each generated token a linear layer multiplies one row x by W^T (W [N, K] row-major, the
// layer's weight): y = x W^T, bound by reading W from memory. Read in place, W^T's columns are
// W's rows, and the one-row kernel of the skinny path reads 16 of them side by side (8 x 8 blocks
// transposed in registers); kept instead as W^T in panels of kRowPanel columns, each panel K x
// kRowPanel floats, k-major and contiguous, the product reads W as one sequential stream, a
// broadcast of x[k] and kRowPanel / 8 fmas per k (core/kernels/HISTORY.md: 2-3x the in-place
// kernel's rate). Each y[j] is still one fma chain over k in increasing order, from 0
// (or from y[j]: accumulate), so the bits are gemm's. The cost is a second copy of W, which
// generation keeps while it runs (RowPanelScope, core/ops/nn_ops.h).
constexpr int64_t kRowPanel = 64;

// out[p * kRowPanel * K + k * w_p + jj] = W[p * kRowPanel + jj, k], w_p = min(kRowPanel, N -
// p * kRowPanel) the width of panel p (the last may be narrower): N * K floats. W[j, k] is read at
// w + j * ldw_row + k * ldw_col.
void pack_row_panels(int64_t N, int64_t K, const float* w, int64_t ldw_row, int64_t ldw_col,
                     float* out);

// y[0:N] (+)= x[0:K] W^T from W packed by pack_row_panels. Threads share out the panels.
void gemm_row_panels(int64_t N, int64_t K, const float* x, const float* panels, float* y,
                     bool accumulate);

// Which micro-kernel gemm<float> runs on this CPU: "avx512", "avx2" or "portable".
const char* gemm_isa();

}  // namespace ember::kernels
