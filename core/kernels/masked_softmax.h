// Fused masked, scaled softmax: the middle of the chapter's attention in one pass per row,
// forward and backward side by side (llm.c style: every backward line names the forward line it
// differentiates). The composite it replaces (nn/attention.cpp, CausalAttention::forward):
//
//   s.masked_fill_(mask, -inf)             a_j = mask_j ? -inf : x_j        (masked_fill_)
//   w = softmax(s / divisor, -1)           b_j = a_j / divisor              (div)
//                                          y_j = exp(b_j - m) / sum_k exp(b_k - m),  m = max_k b_k
//
// Forward, one row (the operations of kernels::softmax in reduce.h, in its order, so the fused
// and the composite rows are the same bits):
//   b_j = (mask_j ? -inf : x_j) / divisor
//   m = max_row(b);  e_j = exp(b_j - m);  s = sum_row(e);  y_j = e_j * (1 / s)
//
// Backward, one row, from dy (the gradient reaching w) and the saved y:
//   D = sum_j dy_j y_j                      softmax: db_j = y_j (dy_j - D)
//                                            (dy_j/db_i = y_j (delta_ij - y_i); summed over j)
//                                            D in PyTorch's cascade order, as sum() adds
//   da_j = db_j / divisor                    b = a / divisor  =>  da = db / divisor
//   dx_j = mask_j ? 0 : da_j                 masked_fill_: a masked x_j does not reach a_j
//
// A fully masked row is -inf everywhere: m = -inf, -inf - -inf = nan, so the row is nan (as the
// composite's, and PyTorch's). Rows are independent: any thread computes any row, in this order,
// so results do not depend on the number of threads.
#pragma once

#include <cstdint>
#include <limits>

#include "core/kernels/cascade_sum.h"
#include "core/kernels/exp.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/reduce.h"
#include "core/parallel.h"

namespace ember::kernels {

// x, y: [rows, n] contiguous; mask: [mask_rows, n] contiguous (true = masked), row r of x uses
// mask row r % mask_rows (a [T, T] mask broadcast over batch and heads).
template <typename T>
void masked_scaled_softmax_forward(const T* x, const bool* mask, int64_t mask_rows, T divisor, T* y,
                                   int64_t rows, int64_t n) {
  const T minus_infinity = -std::numeric_limits<T>::infinity();
  const int threads = rows * n >= (int64_t{1} << 16) ? get_num_threads() : 1;
  parallel_for(rows, threads, [&](int64_t r, int) {
    const T* xr = x + r * n;
    const bool* mr = mask + (r % mask_rows) * n;
    T* yr = y + r * n;
    for (int64_t j = 0; j < n; ++j) yr[j] = (mr[j] ? minus_infinity : xr[j]) / divisor;
    const T max = max_row(yr, n);
    exp_row(yr, max, yr, n);
    const T inverse = T(1) / sum_row<T>(yr, n);
    for (int64_t j = 0; j < n; ++j) yr[j] *= inverse;
  });
}

// dx from dy and the forward's y (all [rows, n] contiguous); the mask as in the forward.
template <typename T>
void masked_scaled_softmax_backward(const T* dy, const T* y, const bool* mask, int64_t mask_rows,
                                    T divisor, T* dx, int64_t rows, int64_t n) {
  const int threads = rows * n >= (int64_t{1} << 16) ? get_num_threads() : 1;
  parallel_for(rows, threads, [&](int64_t r, int) {
    const T* dyr = dy + r * n;
    const T* yr = y + r * n;
    const bool* mr = mask + (r % mask_rows) * n;
    T* dxr = dx + r * n;
    for (int64_t j = 0; j < n; ++j) dxr[j] = dyr[j] * yr[j];  // dy_j y_j, summed into D
    const T dot = cascade_row_sum(dxr, n);
    for (int64_t j = 0; j < n; ++j) {
      const T db = yr[j] * (dyr[j] - dot);
      dxr[j] = mr[j] ? T(0) : db / divisor;
    }
  });
}

}  // namespace ember::kernels
