// A plain, cache-blocked GEMM. The textbook triple loop, ordered i-k-j:
//
//   for i:  for k:  C[i, :] += A[i, k] * B[k, :]
//
// so the innermost loop walks a row of B and a row of C with stride 1 and the compiler can
// vectorise it. B is copied ("packed") into a contiguous K x N buffer first when its rows are
// not contiguous (e.g. B is a transposed matrix). The loops are tiled over k and j so that a
// tile of B stays in cache while a block of rows of C is updated, and blocks of rows (of
// every product of a batch) are spread over OpenMP threads: their writes are disjoint.
//
// A later version will replace the inner loops by a packed SIMD micro-kernel; the interface
// stays.
#include "core/kernels/gemm.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace ember::kernels {

namespace {

constexpr int64_t kRowBlock = 32;     // rows of C per task
constexpr int64_t kDepthBlock = 128;  // k per tile of B
constexpr int64_t kColBlock = 256;    // columns per tile of B (128 x 256 floats = 128 KiB)
constexpr int64_t kParallelWork = int64_t{1} << 18;  // multiply-adds before threads pay off

// y[0:n] += a * x[0:n]: the loop everything else feeds.
// int64 wraps on overflow, as PyTorch's integer matmul does: computed in uint64, where wrapping is
// defined (signed overflow is undefined behaviour).
template <typename T>
inline void axpy(int64_t n, T a, const T* __restrict x, T* __restrict y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    const auto ua = static_cast<uint64_t>(a);
    for (int64_t j = 0; j < n; ++j)
      y[j] = static_cast<int64_t>(static_cast<uint64_t>(y[j]) + ua * static_cast<uint64_t>(x[j]));
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
  }
}

// One product's operands, B already row-contiguous (column stride 1, or a single column).
template <typename T>
struct Operands {
  int64_t M, N, K;
  const T* A;
  int64_t lda_row, lda_col;
  const T* B;
  int64_t ldb_row;
  T* C;
  int64_t ldc;
};

// Rows [row_begin, row_end) of C (+)= A @ B.
template <typename T>
void multiply_rows(const Operands<T>& op, int64_t row_begin, int64_t row_end, bool accumulate) {
  if (!accumulate) {
    for (int64_t i = row_begin; i < row_end; ++i) std::fill_n(op.C + i * op.ldc, op.N, T(0));
  }
  for (int64_t k0 = 0; k0 < op.K; k0 += kDepthBlock) {
    const int64_t k1 = std::min(k0 + kDepthBlock, op.K);
    for (int64_t j0 = 0; j0 < op.N; j0 += kColBlock) {
      const int64_t columns = std::min(kColBlock, op.N - j0);
      for (int64_t i = row_begin; i < row_end; ++i) {
        T* c_row = op.C + i * op.ldc + j0;
        const T* a_row = op.A + i * op.lda_row;
        for (int64_t k = k0; k < k1; ++k) {
          axpy(columns, a_row[k * op.lda_col], op.B + k * op.ldb_row + j0, c_row);
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                  int64_t a_batch_stride, int64_t lda_row, int64_t lda_col, const T* B,
                  int64_t b_batch_stride, int64_t ldb_row, int64_t ldb_col, T* C,
                  int64_t c_batch_stride, int64_t ldc, bool accumulate) {
  if (batch <= 0 || M <= 0 || N <= 0) return;

  // Pack B when its rows are strided, so the inner loop reads it contiguously.
  std::vector<T> packed;
  if (K > 0 && N > 1 && ldb_col != 1) {
    const int64_t distinct = b_batch_stride == 0 ? 1 : batch;  // a broadcast B is packed once
    packed.resize(static_cast<std::size_t>(distinct * K * N));
    for (int64_t b = 0; b < distinct; ++b) {
      const T* from = B + b * b_batch_stride;
      T* to = packed.data() + b * K * N;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) to[k * N + j] = from[k * ldb_row + j * ldb_col];
    }
    B = packed.data();
    ldb_row = N;
    b_batch_stride = b_batch_stride == 0 ? 0 : K * N;
  }

  // One task per (product, block of rows): disjoint rows of C, so no two threads write alike.
  const int64_t row_blocks = (M + kRowBlock - 1) / kRowBlock;
  const int64_t tasks = batch * row_blocks;
  const bool parallel = tasks > 1 && batch * M * N * K >= kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task / row_blocks;
    const int64_t row_begin = (task % row_blocks) * kRowBlock;
    const Operands<T> op{M,
                         N,
                         K,
                         A + b * a_batch_stride,
                         lda_row,
                         lda_col,
                         B + b * b_batch_stride,
                         ldb_row,
                         C + b * c_batch_stride,
                         ldc};
    multiply_rows(op, row_begin, std::min(row_begin + kRowBlock, M), accumulate);
  }
}

template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda_row, int64_t lda_col, const T* B,
          int64_t ldb_row, int64_t ldb_col, T* C, int64_t ldc, bool accumulate) {
  gemm_batched<T>(1, M, N, K, A, 0, lda_row, lda_col, B, 0, ldb_row, ldb_col, C, 0, ldc,
                  accumulate);
}

#define EMBER_INSTANTIATE_GEMM(T)                                                                 \
  template void gemm<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, int64_t, \
                        int64_t, T*, int64_t, bool);                                              \
  template void gemm_batched<T>(int64_t, int64_t, int64_t, int64_t, const T*, int64_t, int64_t,   \
                                int64_t, const T*, int64_t, int64_t, int64_t, T*, int64_t,        \
                                int64_t, bool);
EMBER_INSTANTIATE_GEMM(float)
EMBER_INSTANTIATE_GEMM(double)
EMBER_INSTANTIATE_GEMM(int64_t)
#undef EMBER_INSTANTIATE_GEMM

}  // namespace ember::kernels
