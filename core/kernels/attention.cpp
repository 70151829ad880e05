// Fused causal attention, forward and backward, in blocks of query rows (the op and its maths in
// core/ops/attention.cpp, the composite in nn/attention.cpp; llm.c style: plain
// loops, every backward line names the forward line it differentiates).
//
// Tiles. The queries of one (batch, head) are taken kQueryBlock rows at a time, rows [i0, i1).
// Causality means those rows only see keys [0, i1): the block's scores are a [rows, i1] tile,
// never the full [T, T] matrix, and the masked upper triangle beyond the tile is skipped
// (about half of the scores' work and memory). A tile row is short enough (at most T values)
// to stay in L1/L2 through its softmax, so the softmax is exact (max, then exp and sum), not an
// online rescaling: that keeps every operation of the composite path, in the same order, and
// with it the book's numbers. (FlashAttention's online softmax rescales the partial output at
// every key block, which rounds differently from the composite; at the chapter's T = 1024 a
// whole row of scores costs 4 KB, so the exact two-pass softmax over an L2-resident tile loses
// nothing that the rescaling would win back.) The softmax runs on vectors, a row per call:
// softmax_row and softmax_weights_row (exp.h; their steps one by one, divide_max_row, exp_row
// with the bits of std::exp, vec_lane_sum, are softmax_row_steps and softmax_weights_row_steps
// in reduce_kernels.h, and test_exp.cpp checks that both give the same bits).
//
// Products. Every block multiplies by a prefix of the same K^T, V (forward) and K^T, K, V^T
// (backward): they are packed once per head (pack_b_panels) and each product reads its tile of
// scores or weights in place (gemm_packed_b), so no product packs more than a 48-row block of
// dO or Q. The order of the multiply-adds is gemm's, so the bits are too.
//
// Forward, one block (i in [i0, i1), j in [0, i1)):
//   S = Q[i0:i1] K[0:i1]^T                        (gemm; S_ij for j > i is never used)
//   A_ij = S_ij / divisor                          (j <= i; masked A_ij = -inf)
//   m_i = max_j A_ij
//   e_ij = exp(A_ij - m_i)                         (masked: exp(-inf) = 0)
//   s_i = sum_j e_ij   in the order of the softmax kernel's sum (vec_lane_sum) over a full
//                      row of T values (zeros past i), so s_i rounds as the composite's does
//   W_ij = e_ij * (1 / s_i)
//   W~_ij = W_ij * N_ij                            (dropout noise, if any)
//   O[i0:i1] = W~ V[0:i1]                           (gemm over j in increasing order; the
//                                                   composite's extra terms are 0 * V = 0)
//   save m_i and 1 / s_i
//
// Backward, one block, blocks in increasing order (so that the sums over i below run in
// increasing i, as the composite's GEMMs do):
//   W_ij = exp(S_ij / divisor - m_i) * (1 / s_i)   (recomputed from S: the same bits; W~ = W
//                                                   without dropout, no copy)
//   dV[0:i1] += W~^T dO[i0:i1]                     (O = W~ V  =>  dV = W~^T dO)
//   dW~ = dO[i0:i1] V[0:i1]^T                      (O = W~ V  =>  dW~ = dO V^T)
//   dW = dW~ * N                                   (W~ = W * N)
//   D_i = sum_j dW_ij W_ij                         (PyTorch's cascade order over T values;
//                                                   row by row, with dS, while a row is in L1)
//   dA_ij = W_ij (dW_ij - D_i)                     (softmax: dA_i = W_i * (dW_i - <dW_i, W_i>))
//   dS_ij = dA_ij / divisor   for j <= i, 0 above  (A = S / divisor; masked_fill_ zeroes)
//   dQ[i0:i1] = dS K[0:i1]                          (S = Q K^T  =>  dQ = dS K)
//   dK[0:i1] += dS^T Q[i0:i1]                       (           =>  dK = dS^T Q)
// dK and dV start at zero and collect one term per block: a chain over i, as in one GEMM.
//
// Threads: the forward's blocks are independent (any thread computes any block); the backward
// gives each thread whole heads (dK and dV of a head are sums over all its blocks). Either way a
// number is computed by one thread in a fixed order: results do not depend on the thread count.
//
// The dropout mask's products (the rows of weights or their gradients times the mask's rows) are
// written once over Highway (core/kernels/README.md), compiled for each target: MultiplyRow
// below, one rounding per product as the plain loop multiply_row_plain; the rest of the file is
// compiled once (HWY_ONCE).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/attention.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>

#include "core/kernels/dispatch_by_type.h"
#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

// y[j] = a[j] * b[j] for j in [0, n) (y == a allowed).
template <typename T>
void MultiplyRow(const T* a, const T* b, T* y, int64_t n) {
  for_each_vector<T>(0, n, [&](int64_t j, auto d, size_t count) {
    store_lanes(d, hn::Mul(load_lanes(d, a + j, count), load_lanes(d, b + j, count)), y + j, count);
  });
}

EMBER_ENTRIES_BY_TYPE(MultiplyRow)

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <new>

#include "core/base/allocator.h"
#include "core/base/parallel.h"
#include "core/kernels/exp.h"
#include "core/kernels/gemm.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/reduce_kernels.h"

namespace ember::kernels {

EMBER_EXPORT_BY_TYPE(MultiplyRow);

template <typename T>
void multiply_row(const T* a, const T* b, T* y, int64_t n) {
  EMBER_DISPATCH_BY_TYPE(T, MultiplyRow, a, b, y, n);
}

template <typename T>
void multiply_row_plain(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = a[j] * b[j];
}

template void multiply_row<float>(const float*, const float*, float*, int64_t);
template void multiply_row<double>(const double*, const double*, double*, int64_t);
template void multiply_row_plain<float>(const float*, const float*, float*, int64_t);
template void multiply_row_plain<double>(const double*, const double*, double*, int64_t);

namespace {

// 48 query rows: a whole number of GEMM micro-tiles (6 rows), and the backward's two [48, T]
// tiles per thread (W and dW~) stay within L2 at T = 1024.
constexpr int64_t kQueryBlock = 48;

// Query rows of a KV cache's step that gemm's skinny path takes without packing K and V.
constexpr int64_t kFewRows = 8;

// Threads for `work` multiply-adds: one unless there is enough to share.
int threads_for(double work) { return work >= double(1 << 20) ? get_num_threads() : 1; }

// A 64-byte aligned array (packed GEMM panels are read with aligned loads), allocated before a
// parallel region so that a failure is an exception on the calling thread. Its memory comes from
// the tensor buffers' per-thread cache (core/base/allocator.h): at the book's sizes a call's scratch
// is a few hundred bytes, and malloc's path for it cost more than the arithmetic.
template <typename T>
class Aligned {
 public:
  explicit Aligned(int64_t n)
      : bytes_(bytes_of(n)), data_(static_cast<T*>(ember::detail::allocate_buffer(bytes_))) {
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~Aligned() { ember::detail::free_buffer(data_, bytes_); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  T* get() const { return data_; }

 private:
  // A count past what memory could hold, or one that overflowed (-1, elements()), is a
  // std::bad_alloc, never a size wrapped around to a small buffer.
  static std::size_t bytes_of(int64_t n) {
    if (n < 0 || n > std::numeric_limits<int64_t>::max() / 2 / static_cast<int64_t>(sizeof(T))) {
      throw std::bad_alloc();
    }
    return sizeof(T) * static_cast<std::size_t>(std::max<int64_t>(n, 1));
  }

  std::size_t bytes_;
  T* data_;
};

// The product of `factors`, or -1 when it overflows int64 (Aligned refuses it): the keys of a KV
// cache ([batch, heads, n_k, head_dim], an expanded view) are bounded by no memory.
int64_t elements(std::initializer_list<int64_t> factors) {
  int64_t n = 1;
  for (const int64_t f : factors) {
    if (__builtin_mul_overflow(n, f, &n)) return -1;
  }
  return n;
}

// Elements of one packed [rows, cols] operand, rounded up to whole 64-byte lines.
template <typename T>
int64_t panels_size(int64_t rows, int64_t cols) {
  return (packed_b_size<T>(rows, cols) + 15) / 16 * 16;
}

// The scores tile S = Q[i0:i1] K[0:kv]^T (row stride kv), K^T packed once per head.
template <typename T>
void scores(const AttentionDims& d, const T* q, int64_t q_rs, const T* kt_packed, int64_t i0,
            int64_t i1, int64_t kv, T* s) {
  gemm_packed_b<T>(i1 - i0, kv, d.head_dim, q + i0 * q_rs, q_rs, 1, kt_packed, d.head_dim, s, kv,
                   false);
}

}  // namespace

template <typename T>
void causal_attention_forward(const AttentionDims& d, Heads<const T> q, Heads<const T> k,
                              Heads<const T> v, const T* noise, T divisor, Heads<T> out, T* row_max,
                              T* row_inverse) {
  // n query rows at positions offset .. offset + n - 1, n_k keys (n_k == n without a cache).
  const int64_t n = d.tokens, n_k = d.offset + d.tokens, heads = d.batch * d.heads;
  if (heads == 0 || n == 0 || d.head_dim == 0) return;  // nothing to compute or save
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  const int threads = static_cast<int>(
      std::min<int64_t>(threads_for(double(heads) * n * n_k * d.head_dim), heads * blocks));
  // One [kQueryBlock, n_k] tile per thread, allocated here (not inside the parallel region), and
  // every head's K^T and V packed once for the products of all its blocks. Except for a KV
  // cache's few new rows (a generation step: one row against the whole cache), whose two
  // products read K and V in place through gemm (its skinny path): packing the cache for a row
  // or two costs more than the row's products. The same bits either way (gemm's contract).
  const bool in_place = d.offset > 0 && n <= kFewRows;
  // Each tile is written before it is read.
  const Aligned<T> tiles(elements({threads, kQueryBlock, n_k}));
  // K^T and V packed (two panels of n_k x head_dim, each a little larger once rounded): counted
  // first with room for the rounding, which must not overflow either.
  if (!in_place && elements({heads, 2, n_k + 64, d.head_dim + 64}) < 0) throw std::bad_alloc();
  const int64_t kt_size = in_place ? 0 : panels_size<T>(d.head_dim, n_k),
                v_size = in_place ? 0 : panels_size<T>(n_k, d.head_dim);
  const Aligned<T> packed(heads * (kt_size + v_size));
  if (!in_place) {
    parallel_for(heads, threads, [&](int64_t bh, int) {
      const int64_t b = bh / d.heads, h = bh % d.heads;
      T* kt = packed.get() + bh * (kt_size + v_size);
      pack_b_panels<T>(d.head_dim, n_k, k.at(b, h), 1, k.row_stride, kt);            // K^T [d, n_k]
      pack_b_panels<T>(n_k, d.head_dim, v.at(b, h), v.row_stride, 1, kt + kt_size);  // V [n_k, d]
    });
  }

  parallel_for<Schedule::kDynamic>(heads * blocks, threads, [&](int64_t task, int thread) {
    const int64_t bh = task / blocks, b = bh / d.heads, h = bh % d.heads;
    const int64_t block = blocks - 1 - task % blocks;  // the widest tiles first
    const int64_t i0 = block * kQueryBlock, i1 = std::min(n, i0 + kQueryBlock);
    const int64_t kv = d.offset + i1;  // keys the block's last row sees
    T* s = tiles.get() + thread * kQueryBlock * n_k;

    const T* kt = packed.get() + bh * (kt_size + v_size);
    if (in_place) {  // S = Q[i0:i1] K[0:kv]^T, K^T read through K's strides
      gemm<T>(i1 - i0, kv, d.head_dim, q.at(b, h) + i0 * q.row_stride, q.row_stride, 1, k.at(b, h),
              1, k.row_stride, s, kv, false);
    } else {
      scores(d, q.at(b, h), q.row_stride, kt, i0, i1, kv, s);
    }
    for (int64_t i = i0; i < i1; ++i) {
      T* x = s + (i - i0) * kv;
      const int64_t valid = d.offset + i + 1;  // keys 0 .. offset + i; the rest is masked
      // A_ij = S_ij / divisor, m_i, e_ij, s_i over the full row of n_k, W_ij; zeros past valid
      // (softmax_row: the steps of softmax_row_steps, reduce_kernels.h, in one call)
      T max, inverse;
      softmax_row(x, divisor, valid, n_k, kv, &max, &inverse);
      if (noise != nullptr) {
        const T* nrow = noise + (bh * n + i) * n_k;
        multiply_row(x, nrow, x, valid);
      }
      row_max[bh * n + i] = max;
      row_inverse[bh * n + i] = inverse;
    }
    T* o = out.at(b, h) + i0 * out.row_stride;
    if (in_place) {  // O = W~ V[0:kv], V read in place
      gemm<T>(i1 - i0, d.head_dim, kv, s, kv, 1, v.at(b, h), v.row_stride, 1, o, out.row_stride,
              false);
    } else {
      gemm_packed_b<T>(i1 - i0, d.head_dim, kv, s, kv, 1, kt + kt_size, n_k, o, out.row_stride,
                       false);
    }
  });
}

template <typename T>
void causal_attention_backward(const AttentionDims& d, Heads<const T> q, Heads<const T> k,
                               Heads<const T> v, const T* noise, T divisor, const T* row_max,
                               const T* row_inverse, Heads<const T> grad_out, Heads<T> grad_q,
                               Heads<T> grad_k, Heads<T> grad_v) {
  const int64_t n = d.tokens, hd = d.head_dim, heads = d.batch * d.heads;
  if (heads == 0 || n == 0 || hd == 0) return;
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  const int threads =
      static_cast<int>(std::min<int64_t>(threads_for(double(heads) * n * n * hd), heads));
  // Per thread: W and W~ (or dW~ then dS) of a tile ([kQueryBlock, T]).
  const int64_t tile = kQueryBlock * n;
  const Aligned<T> scratch(threads * 2 * tile);  // all written before read
  // Per thread, the head's K^T, K, V^T and V packed once for all its blocks, and a block's dO and
  // Q (each packed once for its two products).
  const int64_t wide = panels_size<T>(hd, n), tall = panels_size<T>(n, hd),
                block_size = panels_size<T>(kQueryBlock, hd);
  const int64_t per_thread = 2 * wide + tall + 2 * block_size;
  const Aligned<T> packed(threads * per_thread);

  parallel_for(heads, threads, [&](int64_t bh, int thread) {
    const int64_t b = bh / d.heads, h = bh % d.heads;
    T* w = scratch.get() + thread * 2 * tile;  // W, then kept for dA
    T* wd = w + tile;                          // W~ (with dropout), then dW~, dW, dS
    const T* qh = q.at(b, h);
    const T* kh = k.at(b, h);
    const T* vh = v.at(b, h);  // only through its packed V^T
    const T* go = grad_out.at(b, h);
    T* dq = grad_q.at(b, h);
    T* dk = grad_k.at(b, h);
    T* dv = grad_v.at(b, h);
    for (int64_t i = 0; i < n; ++i) {
      std::fill_n(dk + i * grad_k.row_stride, hd, T(0));
      std::fill_n(dv + i * grad_v.row_stride, hd, T(0));
    }
    T* kt_p = packed.get() + thread * per_thread;  // K^T [d, T]
    T* vt_p = kt_p + wide;                         // V^T [d, T]
    T* k_p = vt_p + wide;                          // K [T, d]
    T* go_p = k_p + tall;                          // dO[i0:i1] [rows, d]
    T* q_p = go_p + block_size;                    // Q[i0:i1] [rows, d]
    pack_b_panels<T>(hd, n, kh, 1, k.row_stride, kt_p);
    pack_b_panels<T>(hd, n, vh, 1, v.row_stride, vt_p);
    pack_b_panels<T>(n, hd, kh, k.row_stride, 1, k_p);

    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t i0 = block * kQueryBlock, i1 = std::min(n, i0 + kQueryBlock), kv = i1;
      const int64_t rows = i1 - i0;
      // W (recomputed) and, with dropout, W~ (without, W~ is W itself).
      scores(d, qh, q.row_stride, kt_p, i0, i1, kv, w);
      for (int64_t i = i0; i < i1; ++i) {
        T* wr = w + (i - i0) * kv;
        const int64_t valid = i + 1;
        // W_ij = exp(S_ij / divisor - m_i) * (1 / s_i), zeros past i (softmax_weights_row: the
        // steps of softmax_weights_row_steps in one pass)
        softmax_weights_row(wr, divisor, row_max[bh * n + i], row_inverse[bh * n + i], valid, kv);
        if (noise != nullptr) {
          T* wdr = wd + (i - i0) * kv;
          const T* nrow = noise + (bh * n + i) * n;
          multiply_row(wr, nrow, wdr, valid);
          std::fill(wdr + valid, wdr + kv, T(0));
        }
      }
      const T* w_tilde = noise != nullptr ? wd : w;
      // dV[0:kv] += W~^T dO[i0:i1]
      pack_b_panels<T>(rows, hd, go + i0 * grad_out.row_stride, grad_out.row_stride, 1, go_p);
      gemm_packed_b<T>(kv, hd, rows, w_tilde, 1, kv, go_p, rows, dv, grad_v.row_stride, true);
      // dW~ = dO[i0:i1] V[0:kv]^T
      gemm_packed_b<T>(rows, kv, hd, go + i0 * grad_out.row_stride, grad_out.row_stride, 1, vt_p,
                       hd, wd, kv, false);
      // Row by row, while the row is in L1: dW = dW~ * N, D_i = sum_j dW_ij W_ij (over the full
      // row of n, zeros past i, in the softmax backward's order: vec_lane_dot), then
      // dS = W * (dW - D) / divisor on the causal part, 0 above it.
      for (int64_t i = i0; i < i1; ++i) {
        const T* wr = w + (i - i0) * kv;
        T* dsr = wd + (i - i0) * kv;
        const int64_t valid = i + 1;
        if (noise != nullptr) {
          const T* nrow = noise + (bh * n + i) * n;
          multiply_row(dsr, nrow, dsr, valid);
        }
        // D_i, dA_ij, dS_ij; zeros past i (softmax_backward_row: the steps of
        // softmax_backward_row_steps, reduce_kernels.h, in one call)
        softmax_backward_row(dsr, wr, divisor, valid, n, kv);
      }
      // dQ[i0:i1] = dS K[0:kv];  dK[0:kv] += dS^T Q[i0:i1]
      gemm_packed_b<T>(rows, hd, kv, wd, kv, 1, k_p, n, dq + i0 * grad_q.row_stride,
                       grad_q.row_stride, false);
      pack_b_panels<T>(rows, hd, qh + i0 * q.row_stride, q.row_stride, 1, q_p);
      gemm_packed_b<T>(kv, hd, rows, wd, 1, kv, q_p, rows, dk, grad_k.row_stride, true);
    }
  });
}

#define EMBER_INSTANTIATE_ATTENTION(T)                                                             \
  template void causal_attention_forward<T>(const AttentionDims&, Heads<const T>, Heads<const T>,  \
                                            Heads<const T>, const T*, T, Heads<T>, T*, T*);        \
  template void causal_attention_backward<T>(const AttentionDims&, Heads<const T>, Heads<const T>, \
                                             Heads<const T>, const T*, T, const T*, const T*,      \
                                             Heads<const T>, Heads<T>, Heads<T>, Heads<T>);
EMBER_INSTANTIATE_ATTENTION(float)
EMBER_INSTANTIATE_ATTENTION(double)
#undef EMBER_INSTANTIATE_ATTENTION

}  // namespace ember::kernels
#endif  // HWY_ONCE
