// LayerNorm over the last n elements of each of `rows` contiguous rows, forward and backward,
// each one pass (or two) over a row held in cache (as llm.c's layernorm_forward and
// layernorm_backward), instead of the book's eight tensor ops and their backward nodes.
//
// Forward, for one row x of n elements:
//   mean = sum_j x_j / n
//   var = sum_j (x_j - mean)^2 / n          (biased)
//   rstd = 1 / sqrt(var + eps)
//   xhat_j = (x_j - mean) * rstd
//   y_j = xhat_j w_j + b_j
// mean and rstd (or the denominator sqrt(var + eps)) are kept per row for the backward.
//
// Backward. With g_j = dy_j w_j (the gradient reaching xhat_j), y's dependence on x_i runs
// through xhat_j = (x_j - mean) rstd for every j, and mean and rstd depend on every x_i:
//   d mean / d x_i = 1/n        d rstd / d x_i = -rstd^3 (x_i - mean) / n = -rstd^2 xhat_i / n
//   d xhat_j / d x_i = rstd (delta_ij - 1/n) + (x_j - mean) d rstd / d x_i
//                    = rstd (delta_ij - 1/n - xhat_j xhat_i / n)
// so dx_i = sum_j g_j d xhat_j / d x_i
//         = rstd (g_i - mean_j(g_j) - xhat_i mean_j(g_j xhat_j))
// and over all rows: dw_j = sum dy_j xhat_j, db_j = sum dy_j.
#pragma once

#include <cstdint>

namespace ember::kernels {

// nn::LayerNorm's arithmetic (layer_norm, NativeLayerNormBackward0): the sums in double, mean and
// rstd rounded to T, then y = (x * rstd + (-rstd * mean)) * w + b in T, as PyTorch's CPU kernel
// writes it. w and b may be null (no affine). Saves mean[r] and rstd[r].
template <typename T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                        int64_t n, double eps);

// The book's GPTLayerNorm, bit for bit what its composite computes from a contiguous x:
//   mean = x.mean(-1)            the float sum in PyTorch's order (kernels::cascade_row_sum) / n
//   var  = x.var(-1, unbiased=False)  in double as kernels::variance, rounded to T
//   denom = sqrt(var + eps)      in T
//   y = scale * ((x - mean) / denom) + shift   in T
// Saves mean[r] and denom[r] (not its reciprocal: the composite divides).
template <typename T>
void layer_norm_book_forward(const T* x, const T* scale, const T* shift, T* y, T* mean, T* denom,
                             int64_t rows, int64_t n, double eps);

// The backward above in double, from the saved per-row mean and either rstd or, with
// `saved_denominator`, sqrt(var + eps). Any of dx, dw, db may be null (not wanted); w may be
// null (no affine: g = dy). dw and db are written (not accumulated).
template <typename T>
void layer_norm_backward(const T* x, const T* w, const T* dy, const T* mean, const T* rstd,
                         bool saved_denominator, T* dx, T* dw, T* db, int64_t rows, int64_t n);

// The same three with plain loops for their elementwise passes: the reference that the vector
// kernels (Highway, layer_norm.cpp) equal bit for bit on every target
// (tests/core/kernels/test_layer_norm_kernels.cpp).
template <typename T>
void layer_norm_forward_plain(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                              int64_t rows, int64_t n, double eps);
template <typename T>
void layer_norm_book_forward_plain(const T* x, const T* scale, const T* shift, T* y, T* mean,
                                   T* denom, int64_t rows, int64_t n, double eps);
template <typename T>
void layer_norm_backward_plain(const T* x, const T* w, const T* dy, const T* mean, const T* rstd,
                               bool saved_denominator, T* dx, T* dw, T* db, int64_t rows,
                               int64_t n);

}  // namespace ember::kernels
