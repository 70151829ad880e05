// tanh and erf for float with the same bits on every CPU: glibc 2.36's tanhf and erff as x86-64's
// libm computes them.
//
// A libm function is an algorithm, and its bits also depend on how its C code was compiled. On
// x86-64, glibc builds tanhf, expm1f and erff (Sun's fdlibm code, sysdeps/ieee754/flt-32/) for
// the baseline ISA, which has no fused multiply-add: every product and sum is rounded. On arm64
// GCC contracts them into fmas, so arm64's tanhf and erff differ from x86-64's for some inputs
// (a sample of 4.3 million floats: other bits for tanhf, erff, expm1f and log1pf; the same for
// expf, logf, sinf, cosf, powf; among doubles, erf differs). Ember's numbers come from x86-64's
// (PyTorch's fixtures, the book's cells), so its tanh and erf of a float are the algorithms
// written here once more and compiled like all of Ember without contraction: x86-64's bits on
// every CPU. tests/core/kernels/test_libm.cpp checks them against std:: on x86-64 glibc, and
// against a hash of x86-64's results everywhere.
//
// tanh_row (tanh.h) is tanh on vectors, the same bits; these are its plain loop and the scalar
// code of the ops. double keeps the platform's libm (std::tanh, std::erf).
#pragma once

#include <cmath>
#include <concepts>

namespace ember::kernels::libm {

// glibc 2.36's tanhf (Sun's s_tanhf.c over s_expm1f.c; the derivation is in tanh.h).
float tanh(float x);
inline double tanh(double x) { return std::tanh(x); }

// glibc 2.36's erff (Sun's s_erff.c, with glibc's expf inside: exp.h's algorithm).
float erf(float x);
inline double erf(double x) { return std::erf(x); }

// An integer as std:: takes it: as a double (the ops' generic loops instantiate these).
template <std::integral I>
double tanh(I x) {
  return std::tanh(static_cast<double>(x));
}
template <std::integral I>
double erf(I x) {
  return std::erf(static_cast<double>(x));
}

}  // namespace ember::kernels::libm
