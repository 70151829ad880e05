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

// The portable reference: the textbook loop with the same summation order (single thread, no
// packing). Tests check that gemm agrees with it bit for bit; tiny products use it directly.
template <typename T>
void gemm_reference(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col,
                    const T* B, int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc,
                    bool accumulate);

// Which micro-kernel gemm<float> runs on this CPU: "avx512", "avx2" or "portable".
const char* gemm_isa();

}  // namespace ember::kernels
