// exp over a row of values, a vector at a time, with the bits of std::exp.
//
// Softmax spends most of its time in exp: one call per score, 6.3 million per forward of the
// chapter's MultiHeadAttention at T = 1024 (and as many again in the backward, which recomputes
// the weights). A scalar call to glibc's expf costs ~20 cycles; the same algorithm on AVX2
// registers costs ~2 per value. To keep every softmax's numbers (the book's printed cells, the
// fused == composite tests) the vector code is glibc's expf itself, operation for operation, as
// glibc runs it on a CPU with AVX2 and FMA (its __expf_fma variant, sysdeps/ieee754/flt-32/
// e_expf.c compiled with -mfma -mavx2; the contractions below are the ones in that binary), on
// every CPU: written once over Highway (exp.cpp), it computes these operations on every target
// (AVX-512, AVX2, NEON, SVE, scalar), each fused multiply-add fused:
//
//   x in double;  with N = 32:
//   kd = fma(N / ln2, x, 0x1.8p52)       round(x N / ln2) in the low bits of kd ("shift" trick)
//   ki = bits(kd);  kd = kd - 0x1.8p52   k = round(x N / ln2), now as a double
//   r  = fma(N / ln2, x, -kd)            x N / ln2 - k, |r| <= 1/2
//   s  = 2^(k / N) = double with bits (T[k mod N] + (k << 47))  (T: 2^(j / N) bits, exponent
//                                                                 bits taken out)
//   p  = fma(fma(C0, r, C1), r * r, fma(C2, r, 1))               2^(r / N) - ~ degree 3
//   expf(x) = (float)(p * s)
//
// valid for -103.28 <= x <= 88.72; outside it (and for nan) the same special values as glibc:
//   x > 88.72 (0x1.62e42ep6): +inf          x < -103.97 (-0x1.9fe368p6), -inf: +0
//   -103.97 <= x < -103.28 (-0x1.9d1d9ep6): 0x1p-149 (glibc's "may underflow" value)
//   nan: x + x
// tests/core/kernels/test_exp.cpp checks exp_row against std::exp on every float of a wide sample
// (and a one-off run checked all 2^32 floats on each x86 target), test_dispatch.cpp on every
// target the CPU has. double takes std::exp.
#pragma once

#include <cmath>
#include <cstdint>

namespace ember::kernels {

// y[j] = std::exp(x[j] - m) for j in [0, n), bit for bit (the subtraction rounded to T first,
// as the scalar expression does); x == y is allowed. The softmax step e_j = exp(x_j - max).
void exp_row(const float* x, float m, float* y, int64_t n);

inline void exp_row(const double* x, double m, double* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = std::exp(x[j] - m);
}

// x[j] = x[j] / divisor for j in [0, n), returning the largest quotient (-inf when n == 0; a nan
// is skipped, as by `q > max ? q : max`). The first step of a scaled softmax row.
float divide_max_row(float* x, float divisor, int64_t n);

inline double divide_max_row(double* x, double divisor, int64_t n) {
  double max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = x[j] / divisor;
    max = x[j] > max ? x[j] : max;
  }
  return max;
}

// One row of the fused attention's scaled causal softmax in one call: softmax_row_steps
// (reduce_kernels.h, the steps one by one) with the same bits, each step on vectors (a row of
// the small GPT's attention is at most 64 scores, and four calls per row cost more than their
// arithmetic). The double overload is in reduce_kernels.h.
void softmax_row(float* x, float divisor, int64_t valid, int64_t row, int64_t width, float* max,
                 float* inverse);

// softmax_weights_row_steps (reduce_kernels.h) in one call and one pass, the same bits.
void softmax_weights_row(float* x, float divisor, float max, float inverse, int64_t valid,
                         int64_t width);

// softmax_backward_row_steps (reduce_kernels.h) in one call, the same bits.
void softmax_backward_row(float* g, const float* w, float divisor, int64_t valid, int64_t row,
                          int64_t width);

}  // namespace ember::kernels
