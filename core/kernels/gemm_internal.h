// What the files of the GEMM share (internal: include only from core/kernels/gemm*.cpp). The
// layout and the summation order every path keeps are described once, at the top of
// core/kernels/gemm.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include <sys/mman.h>

#include "core/base/allocator.h"
#include "core/base/cpu.h"

namespace ember::kernels::gemm_detail {

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

constexpr int64_t kTinyWork = 4096;                  // multiply-adds: the plain loop is faster
constexpr int64_t kParallelWork = int64_t{1} << 17;  // multiply-adds before a second thread pays

// a * b * c * d multiply-adds, or INT64_MAX when that overflows, for comparing with the thresholds
// above: C holds only M * N (times the batch) elements, but an operand expanded with stride 0
// (ones({1, 1}).expand({4, 1 << 62})) holds any depth K in one element.
inline int64_t work_of(int64_t a, int64_t b, int64_t c, int64_t d = 1) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r) ||
      __builtin_mul_overflow(r, d, &r)) {
    return std::numeric_limits<int64_t>::max();
  }
  return r;
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
  const T* bias = nullptr;  // gemm_bias: each C[i, j] starts from bias[j * bias_stride]
  int64_t bias_stride = 0;
};

// The packing memory of the threads' pieces of a product, one block each, 64-byte aligned,
// taken before the parallel region (so an allocation failure is an exception on the calling
// thread, not inside OpenMP). It is the calling thread's own buffer, kept from one product to
// the next as OpenBLAS keeps its packing buffer: it only grows (to whole 2 MiB, on transparent
// huge pages), and goes back to the system when the thread ends. It is not taken from the
// tensors' allocator (core/base/allocator.h): that allocator's free ranges are shared with the
// tensors, so a workspace taken and given back per product often lands on pages no buffer has
// touched yet, and a training step keeps faulting pages in (bench_train's step_faults). A product
// started while the thread's buffer is in use (not done by Ember's kernels) gets a buffer of its
// own from the allocator, and so does a product whose workspace is past kKeptPerThread per
// thread: the blocked path's blocks take a few MiB, but the skinny path's packed A grows with K
// ([16, 2^25] @ [2^25, 3] packs 2 GiB), and the thread would keep that until it ends, where the
// allocator counts it (memory_stats) and gives it back (empty_cache).
class ThreadBuffer {
 public:
  static constexpr std::size_t kBlock = std::size_t{2} << 20;
  static constexpr std::size_t kKeptPerThread = std::size_t{16} << 20;
  ThreadBuffer() = default;
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;
  ~ThreadBuffer() { std::free(data_); }
  static ThreadBuffer& of_this_thread() {
    thread_local ThreadBuffer buffer;
    return buffer;
  }
  bool busy() const { return busy_; }
  // At least `bytes`, marked busy until release(); throws std::bad_alloc.
  void* take(std::size_t bytes) {
    if (bytes > capacity_) {
      if (bytes > std::numeric_limits<std::size_t>::max() / 2) throw std::bad_alloc();
      const std::size_t size = (bytes + kBlock - 1) / kBlock * kBlock;
      void* fresh = std::aligned_alloc(kBlock, size);
      if (fresh == nullptr) throw std::bad_alloc();
      madvise(fresh, size, MADV_HUGEPAGE);  // a hint: without THP, small pages
      std::free(data_);
      data_ = fresh;
      capacity_ = size;
    }
    busy_ = true;
    return data_;
  }
  void release() { busy_ = false; }

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  bool busy_ = false;
};

template <typename T>
struct Workspace {
  T* memory = nullptr;
  std::size_t own_bytes = 0;  // a buffer of its own (the thread's was busy), else 0
  int64_t per_thread = 0, a_size = 0;

  // Sizes no memory holds (a skinny product's packed A, K * rows elements, for a K of 2^58 from
  // expanded views) are a std::bad_alloc, never a size wrapped around to a small buffer that the
  // packing then overruns. a_elems < 0 stands for a count that overflowed int64.
  Workspace(int threads, int64_t a_elems, int64_t b_elems) {
    const int64_t align = 64 / sizeof(T);
    const int64_t most = std::numeric_limits<int64_t>::max() / 4 / static_cast<int64_t>(sizeof(T)) /
                         std::max(threads, 1);
    if (a_elems < 0 || b_elems < 0 || a_elems > most || b_elems > most) throw std::bad_alloc();
    a_size =
        (a_elems + 2 * align - 1) / align * align;  // + slack for pack_a_rows_f32 (gemm_pack.cpp)
    per_thread = a_size + (b_elems + align - 1) / align * align;
    const std::size_t bytes =
        sizeof(T) * static_cast<std::size_t>(per_thread * threads);  // whole lines
    const std::size_t size = std::max<std::size_t>(bytes, 64);
    ThreadBuffer& mine = ThreadBuffer::of_this_thread();
    if (!mine.busy() && size <= ThreadBuffer::kKeptPerThread * static_cast<std::size_t>(threads)) {
      memory = static_cast<T*>(mine.take(size));
      return;
    }
    memory = static_cast<T*>(ember::detail::allocate_buffer(size));
    if (memory == nullptr) throw std::bad_alloc();
    own_bytes = size;
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    if (own_bytes != 0) {
      ember::detail::free_buffer(memory, own_bytes);
    } else {
      ThreadBuffer::of_this_thread().release();
    }
  }
  T* a(int thread) const { return memory + thread * per_thread; }
  T* b(int thread) const { return memory + thread * per_thread + a_size; }
};

// A row of a partial tile (n <= a tile's width) copied by a call to memcpy. Inlined, GCC 12
// expands these copies of unknown length into `rep movsq`, whose start-up costs tens of cycles:
// in the book-size attention (6 x 6 scores, head size 3) that was half of gemm_packed_b's time.
template <typename T>
[[gnu::noinline]] void copy_partial_row(T* dst, const T* src, int64_t n) {
  std::memcpy(dst, src, sizeof(T) * static_cast<std::size_t>(n));
}

// Packing (core/kernels/gemm_pack.cpp), for T = float, double, int64_t.
// A[i0:i0+mc, p0:p0+kc] as ceil(mc / MR) panels of kc x MR (rows past mc are zeros).
template <typename T>
void pack_a(const Product<T>& op, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t MR,
            T* out);
// B[p0:p0+kc, j0:j0+nc] as ceil(nc / NR) panels of kc x NR (columns past nc are zeros).
template <typename T>
void pack_b(const Product<T>& op, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t NR,
            T* out);

// The skinny path (core/kernels/gemm_skinny.cpp): gemm_batched for float products with
// 1 <= M <= kSkinnyRows (and 1 <= K <= kSkinnyDepth), B read in place. Returns false, computing
// nothing, on the targets without a skinny path (SCALAR, SVE) and for deeper products, which
// then take the blocked path.
constexpr int64_t kSkinnyRows = 16;  // the most rows of A this path takes (two registers of 8)
// The deepest product this path takes: it packs all of A's K columns at once (16 rows: 64 MiB at
// this depth), where the blocked path packs blocks of KC. A deeper A is an expanded one (a row of
// activations is not a million values long), whose packing would not fit in memory.
constexpr int64_t kSkinnyDepth = int64_t{1} << 20;
constexpr int kSkinnyTailRows = 4;   // M = 9..12 with B = W^T: eight rows in lanes plus a tail
constexpr int kSkinnyTailTiles = 4;  // tiles whose tail rows are computed together
bool skinny_batched_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                        int64_t a_bs, int64_t lda_row, int64_t lda_col, const float* B,
                        int64_t b_bs, int64_t ldb_row, int64_t ldb_col, float* C, int64_t c_bs,
                        int64_t ldc, bool accumulate);

// A target's skinny kernel: C[0:M, j0:j1] (+)= A @ B[:, j0:j1] for one piece of a product, A
// packed by columns (8R rows per k) and, with the tail, rows 8.. row-major after them.
struct SkinnyKernel {
  void (*columns)(int R, int64_t M, int64_t K, const float* a, const float* at, const float* B,
                  int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc, bool accumulate,
                  int64_t j0, int64_t j1);  // null: no skinny path on this target
  bool tail;                                // rows 9..12 of a product with W^T in a tail kernel
  // y[j0:j1] (+)= x W^T for one row x (M = 1) and W^T (column j of B at w + j * ldw); null: the
  // row takes `columns`.
  void (*row)(int64_t K, const float* x, const float* w, int64_t ldw, float* y, bool accumulate,
              int64_t j0, int64_t j1);
  // y[j0:j1] (+)= x B[:, j0:j1] for one row x (M = 1) and a B whose rows are contiguous (B[k, j]
  // at b + k * ldb + j); null: the row takes `columns`.
  void (*row_b)(int64_t K, const float* x, const float* b, int64_t ldb, float* y, bool accumulate,
                int64_t j0, int64_t j1);
};

}  // namespace ember::kernels::gemm_detail
