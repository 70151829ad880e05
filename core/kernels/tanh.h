// tanh over a row of floats, a vector at a time, with the bits of x86-64 glibc's tanhf.
//
// A GPT block's GELU calls tanh once per hidden activation (8 x 3072 per block for the book's
// batch, 295 thousand per forward of the 124M model); glibc's tanhf costs ~40 cycles a call
// (it goes through expm1f), 7-9% of that forward. The vector code below is the algorithm of
// the glibc this builds against (2.36: Sun's s_tanhf.c over s_expm1f.c, all in float, no fused
// multiply-adds), operation for operation, so every tanh (the GPT's, GELU's, the tests'
// fixtures) keeps its numbers. With a = |x|:
//
//   tanh x = sign(x) * z,   z = (e^2a - 1) / (e^2a + 1) = 1 - 2 / (expm1(2a) + 2)   (a >= 1)
//                                                      = -t / (t + 2), t = expm1(-2a)   (a < 1)
//   (one division either way: q = 2 / (t + 2) or -t / (t + 2), then z = 1 - q or q)
//   special: a >= 22 -> z = 1;  x = +-0 -> x;  a < 2^-55 -> x (1 + x);  inf -> 1/x +- 1 (+-1);
//            nan -> 1/x + 1 or 1/x - 1 (the nan)
//
// expm1(u) (Sun's, float): reduce u = k ln2 + r with ln2 = ln2_hi + ln2_lo (ln2_hi with trailing
// zero bits, so k * ln2_hi is exact), the rounding error of r kept in c; then with
// hfx = r/2, hxs = r hfx (= r^2/2):
//   r1 = 1 + hxs (Q1 + hxs (Q2 + hxs (Q3 + hxs (Q4 + hxs Q5))))   a rational approximation of
//   t  = 3 - r1 hfx                                              (r/2) coth(r/2) around 0
//   e  = hxs (r1 - t) / (6 - r t)                                 the small correction
//   expm1(r) = r - (r e - hxs)                                        (k = 0: no reduction)
//   expm1(u) = 2^k (1 + expm1(r)) - 1 evaluated in one of five orders by k (-1, 1, <= -2 or
//              > 56, 2..22, 23..56) so that the subtraction of 1 or 2^-k loses nothing; tanh
//              never asks for k = 1 (its u is <= 0 or >= 2), so the vector code leaves that
//              order out
// The vector code computes every case tanh needs for all lanes and blends by k, written once over
// Highway (tanh.cpp) and run on the best target the CPU has (core/base/cpu.h): the same
// operations lane by lane on every target, so the same bits. tanh's arguments keep expm1 on its
// finite path: u = 2a in [2, 44) (k = 3..63) or u = -2a in (-2, 0) (k = 0..-3; |u| < 2^-25
// returns u).
//
// The plain loop beside it is libm::tanh (core/kernels/libm.h), the same algorithm in scalar
// code, x86-64 glibc's tanhf on every CPU. tests/core/kernels/test_tanh.cpp checks tanh_row on
// every target against it on a wide sample of floats and densely around every branch (one-off
// runs checked all 2^32 floats on the AVX2 and AVX-512 code this replaced), and
// tests/core/kernels/test_libm.cpp checks libm::tanh against std::tanh on x86-64. double takes
// std::tanh.
#pragma once

#include <cmath>
#include <cstdint>

namespace ember::kernels {

// y[j] = libm::tanh(x[j]) for j in [0, n), bit for bit (std::tanh's bits on x86-64); x == y is
// allowed.
void tanh_row(const float* x, float* y, int64_t n);

inline void tanh_row(const double* x, double* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = std::tanh(x[j]);
}

}  // namespace ember::kernels
