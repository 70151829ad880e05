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
//                                                   composite's extra terms are 0 * V = 0,
//                                                   but for a V_jc that is inf or nan: then
//                                                   0 * V_jc is nan, and the block's O_ic
//                                                   take those terms too, in order of j)
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
// the tensor buffers' per-thread cache (core/base/allocator.h): at the book's sizes a call's
// scratch is a few hundred bytes, and malloc's path for it cost more than the arithmetic. A count
// past what memory could hold (a KV cache's K and V expanded to 2^60 rows, stride 0, in a few
// bytes; INT64_MAX from times() below) or a failed allocation is a std::bad_alloc, which the op
// turns into an Error naming itself and its inputs' shapes; never a size wrapped around to a
// small buffer.
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
  static std::size_t bytes_of(int64_t n) {
    if (n < 0 || n > std::numeric_limits<int64_t>::max() / 2 / static_cast<int64_t>(sizeof(T))) {
      throw std::bad_alloc();
    }
    return sizeof(T) * static_cast<std::size_t>(std::max<int64_t>(n, 1));
  }

  std::size_t bytes_;
  T* data_;
};

// a * b, or INT64_MAX when that overflows: a count of elements of scratch, which Aligned refuses.
int64_t times(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// Elements of one packed [rows, cols] operand, rounded up to whole 64-byte lines (INT64_MAX
// when that overflows).
template <typename T>
int64_t panels_size(int64_t rows, int64_t cols) {
  const int64_t width = (cols + kPanelWidth<T> - 1) / kPanelWidth<T> * kPanelWidth<T>;
  const int64_t size = times(width, rows);
  return size > std::numeric_limits<int64_t>::max() - 15 ? size : (size + 15) / 16 * 16;
}

// The scores tile S = Q[i0:i1] K[0:kv]^T (row stride kv), K^T packed once per head.
template <typename T>
void scores(const AttentionDims& d, const T* q, int64_t q_rs, const T* kt_packed, int64_t i0,
            int64_t i1, int64_t kv, T* s) {
  gemm_packed_b<T>(i1 - i0, kv, d.head_dim, q + i0 * q_rs, q_rs, 1, kt_packed, d.head_dim, s, kv,
                   false);
}

// Whether x[0:n] are all finite.
template <typename T>
bool all_finite(const T* x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    if (!std::isfinite(x[c])) return false;
  }
  return true;
}

// y[j, c] = fma(m_r, x[r, c], y[j, c]) for j in [j0, j1), rows r in increasing order, for the
// terms that are not 0: the terms m_r * x[r, c] of a product over r that a causal block skips,
// m_r its masked weight of row r, 0 (nan: nan_rows[r], when given), so x[r, c] inf or nan or
// m_r nan. x and y have row strides ldx and ldy, `cols` columns.
template <typename T>
void past_block(int64_t rows, int64_t cols, const T* x, int64_t ldx, const bool* nan_rows,
                int64_t j0, int64_t j1, T* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) {
    const bool nan_row = nan_rows != nullptr && nan_rows[r];
    const T m = nan_row ? std::numeric_limits<T>::quiet_NaN() : T(0);
    for (int64_t c = 0; c < cols; ++c) {
      const T value = x[r * ldx + c];
      if (!nan_row && std::isfinite(value)) continue;
      for (int64_t j = j0; j < j1; ++j) y[j * ldy + c] = std::fma(m, value, y[j * ldy + c]);
    }
  }
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
  // One [min(n, kQueryBlock), n_k] tile per thread, allocated here (not inside the parallel
  // region), and every head's K^T and V packed once for the products of all its blocks. Except
  // for a KV cache's few new rows (a generation step: one row against the whole cache), whose
  // two products read K and V in place through gemm (its skinny path): packing the cache for a
  // row or two costs more than the row's products. The same bits either way (gemm's contract).
  const bool in_place = d.offset > 0 && n <= kFewRows;
  const int64_t tile_rows = std::min(n, kQueryBlock);
  const Aligned<T> tiles(times(times(threads, tile_rows), n_k));  // each written before read
  const int64_t kt_size = in_place ? 0 : panels_size<T>(d.head_dim, n_k),
                v_size = in_place ? 0 : panels_size<T>(n_k, d.head_dim);
  const Aligned<T> packed(times(heads, kt_size > std::numeric_limits<int64_t>::max() - v_size
                                           ? std::numeric_limits<int64_t>::max()
                                           : kt_size + v_size));
  // The composite multiplies every row of weights by all of V: a masked W_ij is 0, and 0 * V_jc
  // is 0 unless V_jc is inf or nan, when it is nan. A block's product stops at its last row's
  // keys (kv), so per head and column c the last key j >= kv_min (the first block's kv) whose
  // V_jc is not finite, or -1: the blocks it lies beyond take the terms of such keys after their
  // product (below). One pass over V per head; none with a single block (kv is every key then).
  const int64_t kv_min = d.offset + std::min(n, kQueryBlock);
  const bool scan_v = blocks > 1;
  const Aligned<int64_t> last_nonfinite(scan_v ? heads * d.head_dim : 0);
  if (!in_place || scan_v) {
    parallel_for(heads, threads, [&](int64_t bh, int) {
      const int64_t b = bh / d.heads, h = bh % d.heads;
      if (!in_place) {
        T* kt = packed.get() + bh * (kt_size + v_size);
        pack_b_panels<T>(d.head_dim, n_k, k.at(b, h), 1, k.row_stride, kt);  // K^T [d, n_k]
        pack_b_panels<T>(n_k, d.head_dim, v.at(b, h), v.row_stride, 1, kt + kt_size);  // V
      }
      if (scan_v) {
        int64_t* last = last_nonfinite.get() + bh * d.head_dim;
        std::fill_n(last, d.head_dim, int64_t{-1});
        for (int64_t j = kv_min; j < n_k; ++j) {
          const T* row = v.at(b, h) + j * v.row_stride;
          for (int64_t c = 0; c < d.head_dim; ++c) {
            if (!std::isfinite(row[c])) last[c] = j;
          }
        }
      }
    });
  }

  parallel_for<Schedule::kDynamic>(heads * blocks, threads, [&](int64_t task, int thread) {
    const int64_t bh = task / blocks, b = bh / d.heads, h = bh % d.heads;
    const int64_t block = blocks - 1 - task % blocks;  // the widest tiles first
    const int64_t i0 = block * kQueryBlock, i1 = std::min(n, i0 + kQueryBlock);
    const int64_t kv = d.offset + i1;  // keys the block's last row sees
    T* s = tiles.get() + thread * tile_rows * n_k;

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
    // The composite's terms 0 * V_jc past kv that are not 0: each row's chain continues with
    // them, in increasing j (fma(0, inf, x) is nan, as in the composite's product).
    if (scan_v) {
      const int64_t* last = last_nonfinite.get() + bh * d.head_dim;
      for (int64_t c = 0; c < d.head_dim; ++c) {
        for (int64_t j = kv; j <= last[c]; ++j) {
          const T x = v.at(b, h)[j * v.row_stride + c];
          if (std::isfinite(x)) continue;
          for (int64_t i = 0; i < i1 - i0; ++i) {
            T* y = o + i * out.row_stride + c;
            *y = std::fma(T(0), x, *y);
          }
        }
      }
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
  const Aligned<int64_t> k_last(threads * hd);  // per thread, per column of K (k_col_last)

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
    // What the composite's inf and nan reach through the masked half (its products run over
    // every row and column, and 0 * inf is nan): the last row of V with an inf or a nan, and per
    // column of K the last row with one (-1: none).
    int64_t v_last = -1;
    for (int64_t j = 0; j < n; ++j) {
      if (!all_finite(vh + j * v.row_stride, hd)) v_last = j;
    }
    int64_t* k_col_last = k_last.get() + thread * hd;
    bool nan_rows[kQueryBlock];  // the block's rows whose weights are nan
    std::fill_n(k_col_last, hd, int64_t{-1});
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t c = 0; c < hd; ++c) {
        if (!std::isfinite(kh[j * k.row_stride + c])) k_col_last[c] = j;
      }
    }

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
        // A row whose m_i or 1 / s_i is inf or nan has nan weights, the composite's masked ones
        // (exp(-inf - m_i) / s_i) too: nan past i, in this tile and in dV's terms past it.
        nan_rows[i - i0] =
            !std::isfinite(row_max[bh * n + i]) || !std::isfinite(row_inverse[bh * n + i]);
        if (nan_rows[i - i0]) std::fill(wr + valid, wr + kv, std::numeric_limits<T>::quiet_NaN());
        if (noise != nullptr) {
          T* wdr = wd + (i - i0) * kv;
          const T* nrow = noise + (bh * n + i) * n;
          multiply_row(wr, nrow, wdr, valid);
          std::copy(wr + valid, wr + kv, wdr + valid);  // zeros, or nan
        }
      }
      const T* w_tilde = noise != nullptr ? wd : w;
      // dV[0:kv] += W~^T dO[i0:i1]
      pack_b_panels<T>(rows, hd, go + i0 * grad_out.row_stride, grad_out.row_stride, 1, go_p);
      gemm_packed_b<T>(kv, hd, rows, w_tilde, 1, kv, go_p, rows, dv, grad_v.row_stride, true);
      // dV[kv:n] takes the block's terms W~_ij dO_ic that are not 0: masked W~ = 0 (nan in a nan
      // row) times dO_ic inf or nan
      past_block(rows, hd, go + i0 * grad_out.row_stride, grad_out.row_stride, nan_rows, kv, n, dv,
                 grad_v.row_stride);
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
        // The composite's D_i also sums the masked dW_ij W_ij = dW_ij * 0: nan when dW_ij =
        // dO_i . V_j is inf or nan (dO_i or a later V_j not finite), and then so is every dA_ij;
        // masked_fill_'s backward zeroes the masked dS_ij.
        if (v_last > i || (i + 1 < n && !all_finite(go + i * grad_out.row_stride, hd))) {
          std::fill_n(dsr, valid, std::numeric_limits<T>::quiet_NaN());
        }
      }
      // dQ[i0:i1] = dS K[0:kv];  dK[0:kv] += dS^T Q[i0:i1]
      gemm_packed_b<T>(rows, hd, kv, wd, kv, 1, k_p, n, dq + i0 * grad_q.row_stride,
                       grad_q.row_stride, false);
      // dQ's terms 0 * K_jc past kv that are nan (masked dS = 0, K_jc inf or nan), in order of j
      for (int64_t c = 0; c < hd; ++c) {
        for (int64_t j = kv; j <= k_col_last[c]; ++j) {
          const T x = kh[j * k.row_stride + c];
          if (std::isfinite(x)) continue;
          for (int64_t r = 0; r < rows; ++r) {
            T* y = dq + (i0 + r) * grad_q.row_stride + c;
            *y = std::fma(T(0), x, *y);
          }
        }
      }
      pack_b_panels<T>(rows, hd, qh + i0 * q.row_stride, q.row_stride, 1, q_p);
      gemm_packed_b<T>(kv, hd, rows, wd, 1, kv, q_p, rows, dk, grad_k.row_stride, true);
      // and dK[kv:n]'s, 0 * Q_ic (masked dS = 0, Q_ic inf or nan)
      past_block(rows, hd, qh + i0 * q.row_stride, q.row_stride, nullptr, kv, n, dk,
                 grad_k.row_stride);
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
