// Reduction kernels: raw loops without autograd (sum, mean, var, max/min with indices, softmax).
//
// Every kernel here reads a contiguous block as the 3-d shape [outer, reduced, inner]: the dims
// before the reduced ones, the reduced ones (flattened into one), and the dims after them.
//   - Reducing the last dim of a matrix is inner == 1: one tight loop along each row.
//   - Reducing dim 0 of a matrix is outer == 1: whole rows are added into an accumulator row,
//     a loop over independent elements that the compiler vectorizes.
// The ops in core/ops/reduce.cpp and core/ops/softmax.cpp bring every reduction to this form,
// copying the input only when its reduced dims are not one contiguous block (even when the
// input is read in memory order, which makes a transposed matrix contiguous).
// Large reductions split the outer index among threads (parallel_ranges): each output is still
// computed by one thread in the same order, so every thread count gives the same bits.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/kernels/exp.h"
#include "core/kernels/parallel_for.h"

namespace ember::kernels {

// The last step of vec_lane_sum (below): the total of its L running sums acc[0, L) for a row
// of `row` values. The vector kernels' lane sums end with it too (core/kernels/simd-inl.h).
template <typename T>
T lane_total(const T* acc, int64_t row) {
  constexpr int L = 32 / static_cast<int>(sizeof(T));
  if constexpr (L == 8) {
    if (row >= L) {
      return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    }
  }
  T total = acc[0];  // lanes in order: a short row, or double's four
  for (int64_t j = 1; j < std::min<int64_t>(row, L); ++j) total += acc[j];
  return total;
}

// x[0] + ... + x[n-1] added in the order of PyTorch's CPU `vec::reduce_all` and
// `vec::map_reduce_all` (aten/src/ATen/cpu/vec/functional_base.h), the sums of its softmax and
// log_softmax rows, with Debian's PyTorch 1.13 running its AVX2 kernels (L = 8 float lanes, 4
// double lanes; on AVX-512 machines too):
//   acc_j = x_j + x_{j+L} + x_{j+2L} + ...   (element k into lane k mod L, left to right)
//   float:  ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7))
//           (its three shuffles: 128-bit halves, then 64-bit, then 32-bit pairs)
//   double: ((acc_0 + acc_1) + acc_2) + acc_3
// and a row shorter than L as x_0 + x_1 + ... in order. `row` is the length of the row the sum
// stands for, whose elements from n on are zeros that are not stored (a causal attention row):
// zeros leave every lane as it is, but the row's length picks the final order.
// Adding in one lane per element as PyTorch does matters beyond the last bit: in a confident
// softmax row the lane holding exp(0) = 1 drops every term below 2^-25, the others keep theirs.
template <typename T>
T vec_lane_sum(const T* x, int64_t n, int64_t row) {
  constexpr int L = 32 / static_cast<int>(sizeof(T));
  T acc[L] = {};
  for (int64_t k = 0; k < std::min<int64_t>(n, L); ++k) acc[k] = x[k];
  int64_t k = L;
  for (; k + L <= n; k += L) {
    for (int j = 0; j < L; ++j) acc[j] += x[k + j];
  }
  for (int j = 0; k + j < n; ++j) acc[j] += x[k + j];
  return lane_total(acc, row);
}

template <typename T>
T vec_lane_sum(const T* x, int64_t n) {
  return vec_lane_sum(x, n, n);
}

// a[0] b[0] + ... + a[n-1] b[n-1] in the order of PyTorch's `vec::map2_reduce_all` (softmax's
// backward, sum_j g_j y_j): the lanes start from the first L products, rounded, and each later
// product is added with one rounding (PyTorch's compiled kernel contracts acc + a * b into a
// fused multiply-add; measured on its _softmax_backward_data), then the lanes are added as in
// vec_lane_sum. A row shorter than L adds its rounded products in order. As there, `row` is
// the length of the row whose products from n on are zeros (fma(0, 0, acc) is acc).
template <typename T>
T vec_lane_dot(const T* a, const T* b, int64_t n, int64_t row) {
  constexpr int L = 32 / static_cast<int>(sizeof(T));
  T acc[L] = {};
  for (int64_t k = 0; k < std::min<int64_t>(n, L); ++k) acc[k] = a[k] * b[k];
  int64_t k = L;
  for (; k + L <= n; k += L) {
    for (int j = 0; j < L; ++j) acc[j] = std::fma(a[k + j], b[k + j], acc[j]);
  }
  for (int j = 0; k + j < n; ++j) acc[j] = std::fma(a[k + j], b[k + j], acc[j]);
  return vec_lane_sum(acc, std::min<int64_t>(row, L), std::min<int64_t>(row, L));
}

// One row of the fused attention's scaled causal softmax, step by step, as the composite's ops
// compute it (core/kernels/attention.cpp): the row's first `valid` scores x are divided by
// `divisor` and their max m taken (divide_max_row), e = exp(x - m) (exp_row), s = the sum of
// the whole row of `row` values, zeros past valid, in vec_lane_sum's order, then x = e * (1 / s)
// and x[valid:width) = 0. m and 1 / s are returned for the backward. softmax_row (exp.h) is the
// same in one call for float.
template <typename T>
void softmax_row_steps(T* x, T divisor, int64_t valid, int64_t row, int64_t width, T* max,
                       T* inverse) {
  *max = divide_max_row(x, divisor, valid);
  exp_row(x, *max, x, valid);
  *inverse = T(1) / vec_lane_sum(x, valid, row);
  for (int64_t j = 0; j < valid; ++j) x[j] *= *inverse;
  std::fill(x + valid, x + width, T(0));
}

// The weights of such a row again, from its scores and the saved m and 1 / s (the backward):
// x[0:valid) = exp(x / divisor - m) * inverse, each step rounded as above, x[valid:width) = 0.
template <typename T>
void softmax_weights_row_steps(T* x, T divisor, T max, T inverse, int64_t valid, int64_t width) {
  for (int64_t j = 0; j < valid; ++j) x[j] = x[j] / divisor;
  exp_row(x, max, x, valid);
  for (int64_t j = 0; j < valid; ++j) x[j] = x[j] * inverse;
  std::fill(x + valid, x + width, T(0));
}

// The backward of such a row, in place: g holds dW (the weights' gradient) and becomes dS:
// D = vec_lane_dot(g, w, valid, row) (sum_j dW_j W_j in PyTorch's softmax-backward order), then
// g_j = (w_j * (g_j - D)) / divisor for j < valid, zeros up to width. softmax_backward_row
// (exp.h) is the same in one call for float.
template <typename T>
void softmax_backward_row_steps(T* g, const T* w, T divisor, int64_t valid, int64_t row,
                                int64_t width) {
  const T d = vec_lane_dot(g, w, valid, row);
  for (int64_t j = 0; j < valid; ++j) {
    const T da = w[j] * (g[j] - d);
    g[j] = da / divisor;
  }
  std::fill(g + valid, g + width, T(0));
}

inline void softmax_backward_row(double* g, const double* w, double divisor, int64_t valid,
                                 int64_t row, int64_t width) {
  softmax_backward_row_steps(g, w, divisor, valid, row, width);
}

inline void softmax_row(double* x, double divisor, int64_t valid, int64_t row, int64_t width,
                        double* max, double* inverse) {
  softmax_row_steps(x, divisor, valid, row, width, max, inverse);
}

inline void softmax_weights_row(double* x, double divisor, double max, double inverse,
                                int64_t valid, int64_t width) {
  softmax_weights_row_steps(x, divisor, max, inverse, valid, width);
}

// The input of a reduction, read as [outer, reduced, inner] contiguous elements; the output is
// [outer, inner] contiguous elements.
//
// An empty tensor may have huge other dims ([2^62, 3, 0]): its outer or inner product can be
// 2^62 while the output holds nothing. Every kernel first returns when its output is empty, so
// no loop ever runs over the product of an empty tensor's other dims. (When only `reduced` is
// 0, the output is real memory that was allocated, so its loops are bounded.)
struct ReduceShape {
  int64_t outer = 1;
  int64_t reduced = 1;
  int64_t inner = 1;
  bool empty_output() const { return outer == 0 || inner == 0; }
  // The elements read (for the thread decision; only asked of a non-empty output).
  int64_t elements() const { return outer * reduced * inner; }
};

// What sums accumulate in: double for floating types (a float32 sum is then within one rounding
// of the exact sum), uint64 for integers and bools (PyTorch sums both to int64 and wraps on
// overflow; unsigned wrapping is defined, signed overflow is not).
template <typename T>
using SumAccumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// Four doubles in one register (GCC's vector extensions: 256-bit AVX2 code here, plain code
// elsewhere), lane k holding sum_row's partial[k].
using Double4 = double __attribute__((vector_size(32)));

// x[j, j + 4) widened to double.
template <typename T>
inline Double4 load_double4(const T* x) {
  return Double4{static_cast<double>(x[0]), static_cast<double>(x[1]), static_cast<double>(x[2]),
                 static_cast<double>(x[3])};
}

// sum_row<double> and sum_squared_deviations of R rows at once (rows[r], each n long, and for
// the deviations means[r]): each row's additions exactly as the one-row functions make them,
// the R rows' chains interleaved in one loop, so that each waits only on its own additions'
// latency (a LayerNorm row of 128 is a chain of 32 four-lane additions per sum).
template <int R, typename T>
std::array<double, R> sum_rows(const T* const (&rows)[R], int64_t n) {
  const int64_t whole = n - n % 4;
  Double4 lanes[R];
  for (int r = 0; r < R; ++r) lanes[r] = Double4{0, 0, 0, 0};
  for (int64_t i = 0; i < whole; i += 4)
    for (int r = 0; r < R; ++r) lanes[r] += load_double4(rows[r] + i);
  std::array<double, R> total;
  for (int r = 0; r < R; ++r) {
    total[r] = (lanes[r][0] + lanes[r][1]) + (lanes[r][2] + lanes[r][3]);
    for (int64_t i = whole; i < n; ++i) total[r] += static_cast<double>(rows[r][i]);
  }
  return total;
}

template <int R, typename T>
std::array<double, R> sum_squared_deviations_rows(const T* const (&rows)[R], int64_t n,
                                                  const double (&means)[R]) {
  const int64_t whole = n - n % 4;
  Double4 partial[R], m[R];
  for (int r = 0; r < R; ++r) {
    partial[r] = Double4{0, 0, 0, 0};
    m[r] = Double4{means[r], means[r], means[r], means[r]};
  }
  for (int64_t i = 0; i < whole; i += 4) {
    for (int r = 0; r < R; ++r) {
      const Double4 deviation = load_double4(rows[r] + i) - m[r];
      partial[r] += deviation * deviation;
    }
  }
  std::array<double, R> total;
  for (int r = 0; r < R; ++r) {
    total[r] = (partial[r][0] + partial[r][1]) + (partial[r][2] + partial[r][3]);
    for (int64_t i = whole; i < n; ++i) {
      const double deviation = static_cast<double>(rows[r][i]) - means[r];
      total[r] += deviation * deviation;
    }
  }
  return total;
}

// x[0] + ... + x[n-1] in Acc, with four running sums so the additions do not wait on each other
// (element i into sum i mod 4; in double, the four are the lanes of one register).
template <typename Acc, typename T>
Acc sum_row(const T* x, int64_t n) {
  if constexpr (std::is_same_v<Acc, double>) {
    const T* rows[1] = {x};
    return sum_rows<1>(rows, n)[0];
  } else {
    const int64_t whole = n - n % 4;  // elements handled four at a time
    Acc partial[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
    for (int64_t i = 0; i < whole; i += 4) {
      for (int k = 0; k < 4; ++k) partial[k] += static_cast<Acc>(x[i + k]);
    }
    Acc total = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (int64_t i = whole; i < n; ++i) total += static_cast<Acc>(x[i]);
    return total;
  }
}

// sum over j of (x[j] - mean)^2 in double, in sum_row's order: element j into running sum
// j mod 4 while four remain, the four sums as (s0 + s1) + (s2 + s3), then the rest in order. The
// four sums are the four lanes of one register, so their additions overlap: one running sum in
// index order would wait 4 cycles on each (the latency of an addition), and make the variance
// of a 128-wide row (LayerNorm's) a chain of 128 of them.
template <typename T>
double sum_squared_deviations(const T* x, int64_t n, double mean) {
  const T* rows[1] = {x};
  const double means[1] = {mean};
  return sum_squared_deviations_rows<1>(rows, n, means)[0];
}

// out[o, i] = sum over r of in[o, r, i], divided by the count `reduced` when `average` (the mean;
// an empty mean is 0 / 0 = nan, as in PyTorch). An empty sum is 0.
template <typename T, typename R>
void sum(const T* in, R* out, const ReduceShape& s, bool average = false) {
  if (s.empty_output()) return;
  using Acc = SumAccumulator<T>;
  auto finish = [&](Acc total) {
    if constexpr (std::is_integral_v<Acc>) {
      const auto value = static_cast<int64_t>(total);  // back to two's complement
      if (average)
        return static_cast<R>(static_cast<double>(value) / static_cast<double>(s.reduced));
      return static_cast<R>(value);
    } else {
      if (average) return static_cast<R>(total / static_cast<double>(s.reduced));
      return static_cast<R>(total);
    }
  };
  if (s.inner == 1) {
    parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
      for (int64_t o = first; o < last; ++o)
        out[o] = finish(sum_row<Acc>(in + o * s.reduced, s.reduced));
    });
    return;
  }
  parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
    std::vector<Acc> total(s.inner);
    for (int64_t o = first; o < last; ++o) {
      std::fill(total.begin(), total.end(), Acc(0));
      const T* block = in + o * s.reduced * s.inner;
      for (int64_t r = 0; r < s.reduced; ++r) {
        const T* row = block + r * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) total[i] += static_cast<Acc>(row[i]);
      }
      for (int64_t i = 0; i < s.inner; ++i) out[o * s.inner + i] = finish(total[i]);
    }
  });
}

// out[o, i] = sum over r of (in[o, r, i] - mean)^2 / max(0, reduced - correction), in two passes:
// the mean first, then the squared deviations from it. (The one-pass E[x^2] - E[x]^2 loses every
// digit when the mean is large compared with the spread.) Floating types only.
// With take_sqrt, the standard deviation: the square root is taken in double before rounding to T.
template <typename T>
void variance(const T* in, T* out, const ReduceShape& s, int64_t correction,
              bool take_sqrt = false) {
  if (s.empty_output()) return;
  auto finish = [take_sqrt](double v) { return static_cast<T>(take_sqrt ? std::sqrt(v) : v); };
  const double count = static_cast<double>(s.reduced);
  // In double, as PyTorch does: a correction of INT64_MIN must not overflow n - correction.
  const double divisor = std::max(0.0, count - static_cast<double>(correction));
  if (s.inner == 1) {
    parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
      for (int64_t o = first; o < last; ++o) {
        const T* row = in + o * s.reduced;
        const double mean = sum_row<double>(row, s.reduced) / count;
        out[o] = finish(sum_squared_deviations(row, s.reduced, mean) / divisor);
      }
    });
    return;
  }
  parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
    std::vector<double> mean(s.inner), squares(s.inner);
    for (int64_t o = first; o < last; ++o) {
      const T* block = in + o * s.reduced * s.inner;
      std::fill(mean.begin(), mean.end(), 0.0);
      for (int64_t r = 0; r < s.reduced; ++r)
        for (int64_t i = 0; i < s.inner; ++i)
          mean[i] += static_cast<double>(block[r * s.inner + i]);
      for (int64_t i = 0; i < s.inner; ++i) mean[i] /= count;
      std::fill(squares.begin(), squares.end(), 0.0);
      for (int64_t r = 0; r < s.reduced; ++r) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const double deviation = static_cast<double>(block[r * s.inner + i]) - mean[i];
          squares[i] += deviation * deviation;
        }
      }
      for (int64_t i = 0; i < s.inner; ++i) out[o * s.inner + i] = finish(squares[i] / divisor);
    }
  });
}

// Whether `candidate` replaces `best` in a running max (kMax) or min. NaN wins over any number
// and the first NaN stays, so a max or min with a NaN is NaN at its first index (as in PyTorch);
// on a tie the earlier element stays.
template <bool kMax, typename T>
bool replaces(T candidate, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(candidate)) return true;
  }
  return kMax ? candidate > best : candidate < best;
}

// values[o, i] = max (kMax) or min over r of in[o, r, i]; indices[o, i] = the first r where it
// occurs. Needs reduced >= 1 (the ops check this).
template <bool kMax, typename T>
void extremum(const T* in, T* values, int64_t* indices, const ReduceShape& s) {
  if (s.empty_output()) return;
  if (s.inner == 1) {
    parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
      for (int64_t o = first; o < last; ++o) {
        const T* row = in + o * s.reduced;
        T best = row[0];
        int64_t best_index = 0;
        for (int64_t r = 1; r < s.reduced; ++r) {
          if (replaces<kMax>(row[r], best)) {
            best = row[r];
            best_index = r;
          }
        }
        values[o] = best;
        indices[o] = best_index;
      }
    });
    return;
  }
  parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
    for (int64_t o = first; o < last; ++o) {
      const T* block = in + o * s.reduced * s.inner;
      T* best = values + o * s.inner;
      int64_t* best_index = indices + o * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) {
        best[i] = block[i];
        best_index[i] = 0;
      }
      for (int64_t r = 1; r < s.reduced; ++r) {
        const T* row = block + r * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          if (replaces<kMax>(row[i], best[i])) {
            best[i] = row[i];
            best_index[i] = r;
          }
        }
      }
    }
  });
}

// The backward of max/min along a dim: out (zeros, [outer, reduced, inner]) receives
// grad[o, i] at out[o, indices[o, i], i]; every other element keeps its 0.
template <typename T>
void scatter_to_indices(const T* grad, const int64_t* indices, T* out, const ReduceShape& s) {
  if (s.empty_output()) return;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t at = o * s.inner + i;
      out[(o * s.reduced + indices[at]) * s.inner + i] = grad[at];
    }
  }
}

// The largest of x[0..n) (-inf when n == 0), with four running maxima like sum_row. A nan is
// skipped here; it still turns its whole softmax row into nan through exp(nan - max).
template <typename T>
T max_row(const T* x, int64_t n) {
  const T minus_infinity = -std::numeric_limits<T>::infinity();
  const int64_t whole = n - n % 4;
  T partial[4] = {minus_infinity, minus_infinity, minus_infinity, minus_infinity};
  for (int64_t i = 0; i < whole; i += 4) {
    for (int k = 0; k < 4; ++k) partial[k] = x[i + k] > partial[k] ? x[i + k] : partial[k];
  }
  T max = std::max(std::max(partial[0], partial[1]), std::max(partial[2], partial[3]));
  for (int64_t i = whole; i < n; ++i) max = x[i] > max ? x[i] : max;
  return max;
}

// Softmax (or log-softmax when `log`) along the middle dim of [outer, reduced, inner]; out has
// the same layout. Each row is finished before the next starts, so it stays in cache through
//   m = max(x);  e_j = exp(x_j - m);  s = sum(e);  softmax y_j = e_j * (1 / s),
//                                                  log_softmax y_j = (x_j - m) - log(s)
// (the operations of PyTorch's CPU kernels, s added in its order: vec_lane_sum).
// Subtracting the max keeps exp from overflowing (softmax([1000, 1001]) is [0.2689, 0.7311]);
// an element at -inf gives exactly 0 (or -inf), and a row of -inf gives nan everywhere, since
// -inf - -inf is nan, as in PyTorch. Accumulates in T, as PyTorch does for float32.
template <typename T>
void softmax(const T* in, T* out, const ReduceShape& s, bool log) {
  if (s.empty_output() || s.reduced == 0) return;  // the output is as empty as the input
  const T minus_infinity = -std::numeric_limits<T>::infinity();
  const int64_t n = s.reduced;
  if (s.inner == 1) {  // the contiguous fast path: every row is n adjacent elements
    parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
      for (int64_t o = first; o < last; ++o) {
        const T* x = in + o * n;
        T* y = out + o * n;
        const T max = max_row(x, n);
        exp_row(x, max, y, n);               // y_j = std::exp(x_j - max), eight at a time (exp.h)
        const T total = vec_lane_sum(y, n);  // PyTorch's order of additions
        if (log) {
          const T log_total = std::log(total);
          for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - max) - log_total;
        } else {
          const T inverse = T(1) / total;
          for (int64_t j = 0; j < n; ++j) y[j] *= inverse;
        }
      }
    });
    return;
  }
  // Rows with a stride of `inner`: the same steps, over `inner` rows side by side.
  parallel_ranges(s.outer, s.elements(), [&](int64_t first, int64_t last) {
    std::vector<T> max(s.inner), total(s.inner);
    for (int64_t o = first; o < last; ++o) {
      const T* x = in + o * n * s.inner;
      T* y = out + o * n * s.inner;
      std::fill(max.begin(), max.end(), minus_infinity);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < s.inner; ++i) {
          const T v = x[j * s.inner + i];
          max[i] = v > max[i] ? v : max[i];
        }
      // e = exp(x - max) a row of `inner` values at a time: the differences first, then the
      // vectorised exp_row over them (exp(d - 0) is exp(d): d - 0 is d, bit for bit).
      std::fill(total.begin(), total.end(), T(0));
      for (int64_t j = 0; j < n; ++j) {
        const T* xj = x + j * s.inner;
        T* yj = y + j * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) yj[i] = xj[i] - max[i];
        exp_row(yj, T(0), yj, s.inner);
        for (int64_t i = 0; i < s.inner; ++i) total[i] += yj[i];
      }
      if (log) {
        for (int64_t i = 0; i < s.inner; ++i) total[i] = std::log(total[i]);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < s.inner; ++i) {
            const int64_t at = j * s.inner + i;
            y[at] = (x[at] - max[i]) - total[i];
          }
      } else {
        for (int64_t i = 0; i < s.inner; ++i) total[i] = T(1) / total[i];
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < s.inner; ++i) y[j * s.inner + i] *= total[i];
      }
    }
  });
}

// The backward of softmax (or log_softmax when `log`) over rows of n adjacent elements
// (inner == 1), as PyTorch's CPU kernel (_vec_host_softmax_backward_lastdim) rounds it:
//   softmax:      s = sum_j g_j y_j (vec_lane_dot),   dx_j = (g_j - s) y_j
//   log_softmax:  s = sum_j g_j (vec_lane_sum),       dx_j = g_j - exp(y_j) s
// the latter's product and difference rounded once: PyTorch's compiled kernel contracts them
// into a fused multiply-add (measured: 60 of 60 rows of a cross_entropy gradient agree with
// fma, 55 with two roundings).
template <typename T>
void softmax_backward_rows(const T* grad, const T* y, T* dx, int64_t rows, int64_t n, bool log) {
  if (rows == 0 || n == 0) return;
  parallel_ranges(rows, rows * n, [&](int64_t first, int64_t last) {
    for (int64_t o = first; o < last; ++o) {
      const T* g = grad + o * n;
      const T* yo = y + o * n;
      T* d = dx + o * n;
      if (log) {
        const T s = vec_lane_sum(g, n);
        exp_row(yo, T(0), d, n);  // exp(y - 0) = exp(y), bit for bit
        for (int64_t j = 0; j < n; ++j) d[j] = std::fma(-d[j], s, g[j]);
      } else {
        const T s = vec_lane_dot(g, yo, n, n);
        for (int64_t j = 0; j < n; ++j) d[j] = (g[j] - s) * yo[j];
      }
    }
  });
}

}  // namespace ember::kernels
