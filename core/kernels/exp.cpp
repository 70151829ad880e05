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
// 2^(j / N) minus j << 47, so that adding k << 47 for k = j (mod N) gives 2^(k / N). The same
// table in its 32-bit halves, for the lookup by permutes. (Outside the per-target namespace:
// defined once.)
#ifndef EMBER_KERNELS_EXP_TABLE_
#define EMBER_KERNELS_EXP_TABLE_
namespace ember::kernels::exp_table {
alignas(64) constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
struct Halves {
  alignas(64) uint32_t lo[32];
  alignas(64) uint32_t hi[32];
};
constexpr Halves halves() {
  Halves h{};
  for (int j = 0; j < 32; ++j) {
    h.lo[j] = static_cast<uint32_t>(kTable[j]);
    h.hi[j] = static_cast<uint32_t>(kTable[j] >> 32);
  }
  return h;
}
constexpr Halves kHalves = halves();
}  // namespace ember::kernels::exp_table
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

namespace {

// The algorithm runs in double, on vectors of doubles (DD) and as many floats (DF): half a
// vector of floats at a time, and two of those at once (a "pair"), so that the table lookup
// serves a whole vector of 32-bit halves.
using DD = hn::ScalableTag<double>;
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

// ta, tb = the table entries t[k mod 32] of the k's in the low bits of ka, kb.
//   AVX2, AVX3 (a vector holds L = 8 or 16 32-bit lanes; the table, 4 or 2 vectors): in 32-bit
//   halves, k of a in the even 32-bit lanes and k of b in the odd ones, each half looked up by
//   permutes within the vectors holding the table (as the hand-written AVX2 and AVX-512 code
//   did: faster than a gather), the right vector chosen per lane; then the halves put back.
//   Elsewhere (SCALAR, NEON, SVE): a gather, one load per lane where the target has none.
template <class D>
HWY_INLINE void look_up_pair(D du, hn::Vec<D> ka, hn::Vec<D> kb, hn::Vec<D>& ta, hn::Vec<D>& tb) {
  constexpr size_t kLookupLanes = HWY_HAVE_SCALABLE ? 0 : 2 * hn::MaxLanes(D());
  if constexpr (kLookupLanes == 8 || kLookupLanes == 16) {
    const hn::Repartition<uint32_t, D> d32;
    const hn::RebindToSigned<decltype(d32)> di32;
    constexpr uint32_t L = kLookupLanes;
    const auto k = hn::OddEven(hn::BitCast(d32, hn::ShiftLeft<32>(kb)), hn::BitCast(d32, ka));
    const auto lane = hn::IndicesFromVec(d32, hn::BitCast(di32, hn::And(k, hn::Set(d32, L - 1))));
    const auto part = hn::And(k, hn::Set(d32, 31 & ~(L - 1)));  // which vector of the table
    auto lo = hn::TableLookupLanes(hn::Load(d32, exp_table::kHalves.lo), lane);
    auto hi = hn::TableLookupLanes(hn::Load(d32, exp_table::kHalves.hi), lane);
    for (uint32_t q = L; q < 32; q += L) {
      const auto here = hn::Eq(part, hn::Set(d32, q));
      lo = hn::IfThenElse(here,
                          hn::TableLookupLanes(hn::Load(d32, exp_table::kHalves.lo + q), lane), lo);
      hi = hn::IfThenElse(here,
                          hn::TableLookupLanes(hn::Load(d32, exp_table::kHalves.hi + q), lane), hi);
    }
    // a's entries: lo's even lanes, hi's even lanes moved up; b's: lo's odd lanes moved down,
    // hi's odd lanes.
    ta = hn::BitCast(du, hn::OddEven(hn::BitCast(d32, hn::ShiftLeft<32>(hn::BitCast(du, hi))), lo));
    tb =
        hn::BitCast(du, hn::OddEven(hi, hn::BitCast(d32, hn::ShiftRight<32>(hn::BitCast(du, lo)))));
  } else {
    const hn::RebindToSigned<D> di;
    const auto mask = hn::Set(du, 31);
    ta = hn::GatherIndex(du, exp_table::kTable, hn::BitCast(di, hn::And(ka, mask)));
    tb = hn::GatherIndex(du, exp_table::kTable, hn::BitCast(di, hn::And(kb, mask)));
  }
}

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
  const VD r = Fma(hn::Set(dd, kInvLn2N), x, hn::Neg(k));  // x N / ln2 - k, one rounding
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
  look_up_pair(du, hn::BitCast(du, kda), hn::BitCast(du, kdb), ta, tb);
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

// y[j] = post(exp(pre(x[j]))) for j in [0, n), x == y allowed: pre and post are the vector
// steps around the exponential (a subtraction of the max; a division before it, a product
// after it). A last partial pair goes through a copy padded with zeros, whose lanes past n are
// not written back.
template <class Pre, class Post>
HWY_INLINE void exp_map(const float* x, float* y, int64_t n, const Pre& pre, const Post& post) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF ea, eb;
  int64_t j = 0;
  for (; j + 2 * N <= n; j += 2 * N) {
    exp_pair(pre(hn::LoadU(df, x + j)), pre(hn::LoadU(df, x + j + N)), ea, eb);
    hn::StoreU(post(ea), df, y + j);
    hn::StoreU(post(eb), df, y + j + N);
  }
  if (j < n) {
    HWY_ALIGN float buffer[2 * hn::MaxLanes(df)] = {};
    std::copy(x + j, x + n, buffer);
    exp_pair(pre(hn::Load(df, buffer)), pre(hn::Load(df, buffer + N)), ea, eb);
    hn::Store(post(ea), df, buffer);
    hn::Store(post(eb), df, buffer + N);
    std::copy(buffer, buffer + (n - j), y + j);
  }
}

}  // namespace

// The functions of exp.h, for this target.

void ExpRow(const float* x, float m, float* y, int64_t n) {
  const VF mv = hn::Set(DF(), m);
  exp_map(
      x, y, n, [&](VF v) { return hn::Sub(v, mv); }, [](VF e) { return e; });
}

float DivideMaxRow(float* x, float divisor, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto dv = hn::Set(d, divisor);
  float max = -std::numeric_limits<float>::infinity();
  auto lanes_max = hn::Set(d, max);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto q = hn::Div(hn::LoadU(d, x + j), dv);
    hn::StoreU(q, d, x + j);
    lanes_max = hn::IfThenElse(hn::Gt(q, lanes_max), q, lanes_max);  // a nan q is skipped
  }
  // The maximum of a set does not depend on the order it is taken in (but for the sign of a
  // zero, which exp(x - max) does not see).
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(lanes_max, d, lanes);
  for (int64_t i = 0; i < N; ++i) max = lanes[i] > max ? lanes[i] : max;
  for (; j < n; ++j) {
    x[j] = x[j] / divisor;
    max = x[j] > max ? x[j] : max;
  }
  return max;
}

// x[0, n) *= factor
HWY_INLINE void scale_row(float* x, float factor, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto f = hn::Set(d, factor);
  int64_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + j), f), d, x + j);
  for (; j < n; ++j) x[j] *= factor;
}

// softmax_row_steps (reduce_kernels.h), each step on vectors, in one call.
void SoftmaxRow(float* x, float divisor, int64_t valid, int64_t row, int64_t width, float* max,
                float* inverse) {
  *max = DivideMaxRow(x, divisor, valid);
  ExpRow(x, *max, x, valid);
  *inverse = 1.0f / lane_sum(x, valid, row);
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
      [&](VF e) { return hn::Mul(e, iv); });
  std::fill(x + valid, x + width, 0.0f);
}

// softmax_backward_row_steps: D in PyTorch's lane order (lane_dot), then dS on vectors.
void SoftmaxBackwardRow(float* g, const float* w, float divisor, int64_t valid, int64_t row,
                        int64_t width) {
  const float dot = lane_dot(g, w, valid, row);
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto dv = hn::Set(d, dot), q = hn::Set(d, divisor);
  int64_t j = 0;
  for (; j + N <= valid; j += N) {
    const auto da = hn::Mul(hn::LoadU(d, w + j), hn::Sub(hn::LoadU(d, g + j), dv));
    hn::StoreU(hn::Div(da, q), d, g + j);
  }
  for (; j < valid; ++j) g[j] = (w[j] * (g[j] - dot)) / divisor;
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
