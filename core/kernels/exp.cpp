// exp_row and the softmax rows for float: glibc's expf on vectors (the derivation is in exp.h),
// written once over Highway and compiled for each target (core/kernels/README.md).
//
// foreach_target.h includes this file again for each target, with HWY_NAMESPACE naming it
// (N_AVX3, N_AVX2, N_SCALAR, N_NEON, ...); the part under HWY_ONCE is compiled once and holds the
// functions of exp.h, which dispatch to the best target (core/base/cpu.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/exp.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"

// glibc's __exp2f_data (sysdeps/ieee754/flt-32/e_exp2f_data.c), N = 32: tab[j] holds the bits of
// 2^(j / N) minus j << 47, so that adding k << 47 for k = j (mod N) gives 2^(k / N). (Outside
// the per-target namespace: defined once.)
#ifndef EMBER_KERNELS_EXP_TABLE_
#define EMBER_KERNELS_EXP_TABLE_
namespace ember::kernels {
constexpr Table32 kExpTable = make_table32({
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
});
}  // namespace ember::kernels
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

namespace {

// The algorithm runs in double, on vectors of doubles (DD) and as many floats (DF): half a
// vector of floats at a time, and two of those at once (a "pair"), so that the table lookup
// serves a whole vector of 32-bit halves.
using DD = hn::CappedTag<double, 8>;  // (at most eight: LaneSums<DF> holds eight sums)
using DF = hn::Rebind<float, DD>;
using DU = hn::RebindToUnsigned<DD>;
using VD = hn::Vec<DD>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// The constants of glibc's expf (e_expf.c and its data), N = 32.
constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // N / ln 2
constexpr double kShift = 0x1.8p52;                // round to an integer in the low bits
constexpr double kC0 = 0x1.c6af84b912394p-20;      // the polynomial, scaled for N
constexpr double kC1 = 0x1.ebfce50fac4f3p-13;
constexpr double kC2 = 0x1.62e42ff0c52d6p-6;
constexpr float kOverflow = 0x1.62e42ep6f;       // above: +inf
constexpr float kUnderflow = -0x1.9fe368p6f;     // below: +0
constexpr float kMayUnderflow = -0x1.9d1d9ep6f;  // below (and above kUnderflow): 0x1p-149

// kd = fma(N / ln2, x, 0x1.8p52): round(x N / ln2) in its low bits.
HWY_INLINE VD shifted_k(VD x) {
  const DD dd;
  return Fma(hn::Set(dd, kInvLn2N), x, hn::Set(dd, kShift));
}

// The rest of the main path, from x, kd and the table entry t: exp(x) as a float.
HWY_INLINE VF finish(VD x, VD kd, VU t) {
  const DD dd;
  const DU du;
  const VD k = hn::Sub(kd, hn::Set(dd, kShift));
  const VD r = Fms(hn::Set(dd, kInvLn2N), x, k);  // x N / ln2 - k, one rounding
  const VD s = hn::BitCast(dd, hn::Add(t, hn::ShiftLeft<47>(hn::BitCast(du, kd))));
  const VD z = Fma(hn::Set(dd, kC0), r, hn::Set(dd, kC1));
  const VD r2 = hn::Mul(r, r);
  VD y = Fma(r, hn::Set(dd, kC2), hn::Set(dd, 1.0));
  y = Fma(z, r2, y);
  return hn::DemoteTo(DF(), hn::Mul(y, s));
}

// glibc's special values where x leaves the main path (x > 88.72, x < -103.28, nan).
HWY_INLINE VF special_cases(VF x, VF y) {
  const DF df;
  const float inf = std::numeric_limits<float>::infinity();
  y = hn::IfThenElse(hn::Lt(x, hn::Set(df, kMayUnderflow)), hn::Set(df, 0x1p-149f), y);
  y = hn::IfThenElse(hn::Lt(x, hn::Set(df, kUnderflow)), hn::Zero(df), y);
  y = hn::IfThenElse(hn::Gt(x, hn::Set(df, kOverflow)), hn::Set(df, inf), y);
  return hn::IfThenElse(hn::IsNaN(x), hn::Add(x, x), y);
}

// ea = exp(xa), eb = exp(xb), bit for bit std::exp, lane by lane.
HWY_INLINE void exp_pair(VF xa, VF xb, VF& ea, VF& eb) {
  const DD dd;
  const DU du;
  const DF df;
  const VD a = hn::PromoteTo(dd, xa), b = hn::PromoteTo(dd, xb);
  const VD kda = shifted_k(a), kdb = shifted_k(b);
  VU ta, tb;
  look_up_32_pair(kExpTable, hn::BitCast(du, kda), hn::BitCast(du, kdb), ta, tb);
  ea = finish(a, kda, ta);
  eb = finish(b, kdb, tb);
  const auto in_range = [&](VF x) {  // on the main path, not nan
    return hn::And(hn::Ge(x, hn::Set(df, kMayUnderflow)), hn::Le(x, hn::Set(df, kOverflow)));
  };
  if (HWY_UNLIKELY(!hn::AllTrue(df, hn::And(in_range(xa), in_range(xb))))) {
    ea = special_cases(xa, ea);
    eb = special_cases(xb, eb);
  }
}

// y[j] = post(j, exp(pre(x[j]))) for j in [0, n), a vector at a time, x == y allowed: pre and
// post are the vector steps around the exponential (the subtraction of the max; a division
// before it, a product after it; post is given the element j of the vector's first lane). A
// last partial pair is loaded with zeros past n, its exponentials there set to +0 before post,
// and only its lanes below n are stored.
template <class Pre, class Post>
HWY_INLINE void exp_map(const float* x, float* y, int64_t n, const Pre& pre, const Post& post) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF ea, eb;
  int64_t j = 0;
  for (; j + 2 * N <= n; j += 2 * N) {
    exp_pair(pre(hn::LoadU(df, x + j)), pre(hn::LoadU(df, x + j + N)), ea, eb);
    hn::StoreU(post(j, ea), df, y + j);
    hn::StoreU(post(j + N, eb), df, y + j + N);
  }
  if (j < n) {
    const size_t a = static_cast<size_t>(std::min(n - j, N));  // in the first vector
    const size_t b = static_cast<size_t>(n - j) - a;           // in the second
    exp_pair(pre(load_first(df, x + j, a)), pre(load_first(df, x + j + N, b)), ea, eb);
    store_first(df, post(j, hn::IfThenElseZero(hn::FirstN(df, a), ea)), y + j, a);
    const VF e = post(j + N, hn::IfThenElseZero(hn::FirstN(df, b), eb));
    if (b > 0) store_first(df, e, y + j + N, b);
  }
}

}  // namespace

// The functions of exp.h, for this target.

void ExpRow(const float* x, float m, float* y, int64_t n) {
  const VF mv = hn::Set(DF(), m);
  exp_map(
      x, y, n, [&](VF v) { return hn::Sub(v, mv); }, [](int64_t, VF e) { return e; });
}

float DivideMaxRow(float* x, float divisor, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto dv = hn::Set(d, divisor);
  const auto minus_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  // The max as `q > max ? q : max` takes it: a nan q is skipped, here by turning it into -inf
  // (Max itself may return either operand, or a nan, when one is a nan, depending on the target).
  const auto skip_nan = [&](auto q) { return hn::IfThenElse(hn::IsNaN(q), minus_inf, q); };
  auto lanes_max = minus_inf;
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto q = hn::Div(hn::LoadU(d, x + j), dv);
    hn::StoreU(q, d, x + j);
    lanes_max = hn::Max(skip_nan(q), lanes_max);
  }
  if (j < n) {
    const size_t rest = static_cast<size_t>(n - j);
    const auto q = hn::Div(load_first(d, x + j, rest), dv);
    store_first(d, q, x + j, rest);
    lanes_max = hn::Max(hn::IfThenElse(hn::FirstN(d, rest), skip_nan(q), minus_inf), lanes_max);
  }
  // No lane holds a nan, and the maximum of a set does not depend on the order it is taken in
  // (but for the sign of a zero, which exp(x - max) does not see).
  return hn::GetLane(hn::MaxOfLanes(d, lanes_max));
}

// x[0, n) *= factor
HWY_INLINE void scale_row(float* x, float factor, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto f = hn::Set(d, factor);
  int64_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + j), f), d, x + j);
  const size_t rest = static_cast<size_t>(n - j);
  if (rest > 0) store_first(d, hn::Mul(load_first(d, x + j, rest), f), x + j, rest);
}

// softmax_row_steps (reduce_kernels.h), each step on vectors, in one call, the sum of the
// exponentials (PyTorch's eight lanes) taken as they come out of exp. The sums start from +0,
// not from the first eight values as vec_lane_sum's do: the same, since no exp is -0.
void SoftmaxRow(float* x, float divisor, int64_t valid, int64_t row, int64_t width, float* max,
                float* inverse) {
  *max = DivideMaxRow(x, divisor, valid);
  const VF mv = hn::Set(DF(), *max);
  LaneSums<DF> sums;
  exp_map(
      x, x, valid, [&](VF v) { return hn::Sub(v, mv); },
      [&](int64_t j, VF e) {
        sums.update(j, [&](VF s) { return hn::Add(s, e); });
        return e;
      });
  *inverse = 1.0f / sums.total(row);
  scale_row(x, *inverse, valid);
  std::fill(x + valid, x + width, 0.0f);
}

// softmax_weights_row_steps in one pass: x / divisor - max, exp, times inverse.
void SoftmaxWeightsRow(float* x, float divisor, float max, float inverse, int64_t valid,
                       int64_t width) {
  const DF df;
  const VF dv = hn::Set(df, divisor), mv = hn::Set(df, max), iv = hn::Set(df, inverse);
  exp_map(
      x, x, valid, [&](VF v) { return hn::Sub(hn::Div(v, dv), mv); },
      [&](int64_t, VF e) { return hn::Mul(e, iv); });
  std::fill(x + valid, x + width, 0.0f);
}

// softmax_backward_row_steps: D in PyTorch's lane order (lane_dot), then dS on vectors.
void SoftmaxBackwardRow(float* g, const float* w, float divisor, int64_t valid, int64_t row,
                        int64_t width) {
  const float dot = lane_dot(g, w, valid, row);
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto dv = hn::Set(d, dot), q = hn::Set(d, divisor);
  const auto ds = [&](auto wj, auto gj) { return hn::Div(hn::Mul(wj, hn::Sub(gj, dv)), q); };
  int64_t j = 0;
  for (; j + N <= valid; j += N) hn::StoreU(ds(hn::LoadU(d, w + j), hn::LoadU(d, g + j)), d, g + j);
  const size_t rest = static_cast<size_t>(valid - j);
  if (rest > 0) {
    store_first(d, ds(load_first(d, w + j, rest), load_first(d, g + j, rest)), g + j, rest);
  }
  std::fill(g + valid, g + width, 0.0f);
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/base/cpu.h"
#include "core/kernels/exp.h"

namespace ember::kernels {

HWY_EXPORT(ExpRow);
HWY_EXPORT(DivideMaxRow);
HWY_EXPORT(SoftmaxRow);
HWY_EXPORT(SoftmaxWeightsRow);
HWY_EXPORT(SoftmaxBackwardRow);

void exp_row(const float* x, float m, float* y, int64_t n) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(ExpRow)(x, m, y, n);
}

float divide_max_row(float* x, float divisor, int64_t n) {
  cpu::apply_capability();
  return HWY_DYNAMIC_DISPATCH(DivideMaxRow)(x, divisor, n);
}

void softmax_row(float* x, float divisor, int64_t valid, int64_t row, int64_t width, float* max,
                 float* inverse) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(SoftmaxRow)(x, divisor, valid, row, width, max, inverse);
}

void softmax_weights_row(float* x, float divisor, float max, float inverse, int64_t valid,
                         int64_t width) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(SoftmaxWeightsRow)(x, divisor, max, inverse, valid, width);
}

void softmax_backward_row(float* g, const float* w, float divisor, int64_t valid, int64_t row,
                          int64_t width) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRow)(g, w, divisor, valid, row, width);
}

}  // namespace ember::kernels
#endif  // HWY_ONCE
