// tanh_row for float: glibc 2.36's tanhf (over its expm1f) on vectors, written once over Highway
// and compiled for each target (core/kernels/README.md); the derivation is in tanh.h. Each
// scalar operation of that code is one vector operation here, in the same order and the same
// precision (float, no fused multiply-adds: the whole build uses -ffp-contract=off), so every
// lane rounds exactly as libm::tanh does (core/kernels/libm.cpp, the plain loop), on every
// target. Integer work on the bits goes through unsigned lanes (wrapping, no undefined shifts).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/tanh.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>

#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

namespace {

using DF = hn::ScalableTag<float>;  // lane by lane: any width gives the same bits
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using MF = hn::Mask<DF>;

HWY_INLINE VF from_bits(uint32_t bits) { return hn::BitCast(DF(), hn::Set(DU(), bits)); }
HWY_INLINE VI bits_of(VF v) { return hn::BitCast(DI(), v); }
// a > b and a < b for non-negative 32-bit patterns (a signed compare is right below 2^31), as a
// mask on floats
HWY_INLINE MF greater(VI a, int32_t b) { return hn::RebindMask(DF(), hn::Gt(a, hn::Set(DI(), b))); }
HWY_INLINE MF less(VI a, int32_t b) { return hn::RebindMask(DF(), hn::Lt(a, hn::Set(DI(), b))); }
// the lanes whose sign bit is set (-0 included)
HWY_INLINE MF negative(VF v) { return hn::RebindMask(DF(), hn::Lt(bits_of(v), hn::Zero(DI()))); }
// y with k added to its exponent field (2^k y, no rounding)
HWY_INLINE VF scale(VF y, VI k) {
  const DU du;
  return hn::BitCast(DF(), hn::Add(hn::BitCast(du, y), hn::ShiftLeft<23>(hn::BitCast(du, k))));
}

// expm1(u) for finite floats with |u| < 88.72 and u > -27 ln2 (the arguments tanh passes):
// Sun's s_expm1f.c, every case computed (but k = 1's, which tanh never reaches) and the right
// one kept per lane. In three steps, so that a row can run each over a block of vectors before
// the next (TanhRow): the reduction, the correction (with the first division), the assembly.

// The reduction, for |u| > ln2 / 2: k = +-1 when |u| < 3 ln2 / 2, else k = round-half-away of
// u / ln2 as the float code computes it (invln2 * u +- 0.5, truncated). With t = k,
// hi = u - t ln2_hi (exact), lo = t ln2_lo, r = hi - lo, c = (hi - r) - lo. (For k = +-1 this
// is the scalar code's separate branch, value for value: 1 * ln2_hi is ln2_hi.)
// (Out parameters, not a struct: SVE's sizeless vectors cannot be members.)
HWY_INLINE void expm1_reduce(VF u, VF& r, VF& c, VI& k) {
  const DF df;
  const DI di;
  const VF ln2_hi = from_bits(0x3f317180), ln2_lo = from_bits(0x3717f7d1);
  const VF invln2 = from_bits(0x3fb8aa3b);
  const VF sign_bit = hn::SignBit(df);
  const VF half = hn::Set(df, 0.5f);
  const VI hx = bits_of(hn::AndNot(sign_bit, u));  // |u|'s bits
  const VF sign = hn::And(u, sign_bit);
  const MF reduce = greater(hx, 0x3eb17218);
  const MF near = hn::AndNot(greater(hx, 0x3f851591), reduce);  // |u| < 1.5 ln2
  const VI k_far = hn::ConvertTo(di, hn::Add(hn::Mul(invln2, u), hn::Or(half, sign)));
  const VI k_near = hn::Or(hn::Set(di, 1), hn::ShiftRight<31>(bits_of(u)));  // +-1
  k = hn::IfThenElse(hn::RebindMask(di, near), k_near, k_far);
  k = hn::IfThenElseZero(hn::RebindMask(di, reduce), k);  // 0 when not reduced
  const VF t_k = hn::ConvertTo(df, k);
  const VF hi = hn::Sub(u, hn::Mul(t_k, ln2_hi));
  const VF lo = hn::Mul(t_k, ln2_lo);
  const VF r_reduced = hn::Sub(hi, lo);
  c = hn::Sub(hn::Sub(hi, r_reduced), lo);
  r = hn::IfThenElse(reduce, r_reduced, u);
}

// The rational approximation on the primary range: hfx = r/2, hxs = r hfx, r1, t, and the
// correction e0 = hxs (r1 - t) / (6 - r t).
HWY_INLINE VF expm1_hfx(VF r) { return hn::Mul(hn::Set(DF(), 0.5f), r); }
HWY_INLINE VF expm1_correction(VF r) {
  const DF df;
  const VF q1 = from_bits(0xbd088889), q2 = from_bits(0x3ad00d01), q3 = from_bits(0xb8a670cd);
  const VF q4 = from_bits(0x36867e54), q5 = from_bits(0xb457edbb);
  const VF hfx = expm1_hfx(r);
  const VF hxs = hn::Mul(r, hfx);
  const VF r1 = hn::Add(
      hn::Set(df, 1.0f),
      hn::Mul(
          hxs,
          hn::Add(
              q1,
              hn::Mul(hxs,
                      hn::Add(q2, hn::Mul(hxs,
                                          hn::Add(q3, hn::Mul(hxs,
                                                              hn::Add(q4, hn::Mul(hxs, q5))))))))));
  const VF t = hn::Sub(hn::Set(df, 3.0f), hn::Mul(r1, hfx));
  return hn::Mul(hxs, hn::Div(hn::Sub(r1, t), hn::Sub(hn::Set(df, 6.0f), hn::Mul(r, t))));
}

// expm1(u) from its reduction and correction: 2^k (1 + expm1 r) - 1 in the order that suits k.
HWY_INLINE VF expm1_finish(VF u, VF r, VF c, VI k, VF e0) {
  const DF df;
  const DI di;
  const DU du;
  const VF one = hn::Set(df, 1.0f), half = hn::Set(df, 0.5f);
  const VF hxs = hn::Mul(r, expm1_hfx(r));
  const VF y_k0 = hn::Sub(r, hn::Sub(hn::Mul(r, e0), hxs));
  const VF e = hn::Sub(hn::Sub(hn::Mul(r, hn::Sub(e0, c)), c), hxs);
  const VF y_km1 = hn::Sub(hn::Mul(half, hn::Sub(r, e)), half);
  const VF y_far = hn::Sub(scale(hn::Sub(one, hn::Sub(e, r)), k), one);  // k <= -2 or k > 56
  // 1 - 2^-k for 2 <= k < 23 (k clamped to [0, 31] so that every lane's shift is defined)
  const auto k_shift = hn::BitCast(du, hn::Min(hn::Max(k, hn::Zero(di)), hn::Set(di, 31)));
  const auto two_minus_k = hn::Shr(hn::Set(du, 0x1000000), k_shift);
  const VF one_minus = hn::BitCast(df, hn::Sub(hn::Set(du, 0x3f800000), two_minus_k));
  const VF y_mid = scale(hn::Sub(one_minus, hn::Sub(e, r)), k);  // 2 <= k < 23
  const VF pow_minus_k =
      hn::BitCast(df, hn::ShiftLeft<23>(hn::Sub(hn::Set(du, 0x7f), hn::BitCast(du, k))));  // 2^-k
  const VF y_high = scale(hn::Add(hn::Sub(r, hn::Add(e, pow_minus_k)), one), k);  // 23 <= k <= 56

  const auto k_ge2 = hn::RebindMask(df, hn::Gt(k, hn::Set(di, 1)));
  const auto k_lt23 = hn::RebindMask(df, hn::Lt(k, hn::Set(di, 23)));
  const auto k_le56 = hn::RebindMask(df, hn::Lt(k, hn::Set(di, 57)));
  VF y = y_far;
  y = hn::IfThenElse(hn::And(k_ge2, k_le56), y_high, y);
  y = hn::IfThenElse(hn::And(k_ge2, k_lt23), y_mid, y);
  y = hn::IfThenElse(hn::RebindMask(df, hn::Eq(k, hn::Set(di, -1))), y_km1, y);
  y = hn::IfThenElse(hn::RebindMask(df, hn::Eq(k, hn::Zero(di))), y_k0, y);
  const VI hx = bits_of(hn::AndNot(hn::SignBit(df), u));
  return hn::IfThenElse(less(hx, 0x33000000), u, y);  // |u| < 2^-25: u
}

// tanh on the main range 2^-55 <= |x| < 22, lane by lane, in two halves around expm1.
// tanh_argument gives expm1's argument u = 2a (a >= 1) or -2a (a < 1), a = |x|, and says in
// `main` which lanes are in the main range: the others go in as 0, so that no inf or nan reaches
// expm1's float-to-integer conversion (tanh_special replaces their values).
HWY_INLINE VF tanh_argument(VF x, MF& main) {
  const DF df;
  const VF a = hn::AndNot(hn::SignBit(df), x);
  const VI ix = bits_of(a);
  const MF at_least_one = greater(ix, 0x3f7fffff);
  const VF u =
      hn::IfThenElse(at_least_one, hn::Mul(hn::Set(df, 2.0f), a), hn::Mul(hn::Set(df, -2.0f), a));
  main = hn::AndNot(greater(ix, 0x41afffff), greater(ix, 0x23ffffff));
  return hn::IfThenElseZero(main, u);
}
// tanh from t = expm1(u): one division for both branches, q = 2 / (t + 2) (a >= 1) or
// -t / (t + 2) (a < 1), then z = 1 - q or q. Each lane divides what the scalar code divides, so
// the same bits.
HWY_INLINE VF tanh_from_expm1(VF x, VF t) {
  const DF df;
  const VF sign_bit = hn::SignBit(df);
  const VF one = hn::Set(df, 1.0f), two = hn::Set(df, 2.0f);
  const MF at_least_one = greater(bits_of(hn::AndNot(sign_bit, x)), 0x3f7fffff);
  const VF q = hn::Div(hn::IfThenElse(at_least_one, two, hn::Xor(t, sign_bit)), hn::Add(t, two));
  const VF z = hn::IfThenElse(at_least_one, hn::Sub(one, q), q);
  return hn::Or(z, hn::And(x, sign_bit));  // z >= 0: the sign of x
}
HWY_INLINE VF tanh_main(VF x, MF& main) {
  const VF u = tanh_argument(x, main);
  VF r, c;
  VI k;
  expm1_reduce(u, r, c, k);
  return tanh_from_expm1(x, expm1_finish(u, r, c, k, expm1_correction(r)));
}

// The lanes off the main range (rare in practice): y with their values blended in.
HWY_NOINLINE VF tanh_special(VF x, VF y) {
  const DF df;
  const VF sign_bit = hn::SignBit(df);
  const VF one = hn::Set(df, 1.0f);
  const VF sign = hn::And(x, sign_bit);
  const VI ix = bits_of(hn::AndNot(sign_bit, x));
  y = hn::IfThenElse(greater(ix, 0x41afffff), hn::Or(one, sign), y);         // +-1
  y = hn::IfThenElse(less(ix, 0x24000000), hn::Mul(x, hn::Add(one, x)), y);  // x (1 + x)
  y = hn::IfThenElse(less(ix, 1), x, y);                                     // +-0
  const VF inverse = hn::Div(one, x);                                        // inf, nan
  const VF special = hn::IfThenElse(negative(x), hn::Sub(inverse, one), hn::Add(inverse, one));
  return hn::IfThenElse(greater(ix, 0x7f7fffff), special, y);
}

}  // namespace

// y[j] = tanh(x[j]) for j in [0, n) (x == y allowed).
//
// One tanh is a long chain of dependent operations (the reduction, the polynomial, two
// divisions) and, written as one loop body, too long for the CPU to overlap one vector's chain
// with the next: its registers spill and it waits on latencies. So whole blocks of
// kBlockVectors vectors go through it in three passes, each a short loop whose iterations are
// independent: (1) the argument and expm1's reduction, (2) the correction and its division,
// (3) expm1's assembly, the second division and the store. The intermediate r, c, k and e0 wait
// in small arrays (L1). Every lane runs the same operations in the same order as tanh_main, so
// the bits do not change; the rest of the row (less than a block) goes a vector at a time through
// tanh_main, a last partial vector loaded with zeros past n and only its lanes below n stored.
void TanhRow(const float* x, float* y, int64_t n) {
  const DF df;
  const DI di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr int64_t kBlockVectors = 8;
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float r_block[kBlockVectors * kMaxLanes], c_block[kBlockVectors * kMaxLanes];
  HWY_ALIGN float e0_block[kBlockVectors * kMaxLanes];
  HWY_ALIGN int32_t k_block[kBlockVectors * kMaxLanes];
  const auto one_tanh = [&](VF v) {
    MF main;
    const VF t = tanh_main(v, main);
    return HWY_LIKELY(hn::AllTrue(df, main)) ? t : tanh_special(v, t);
  };
  int64_t j = 0;
  for (; j + kBlockVectors * N <= n; j += kBlockVectors * N) {
    MF all_main = hn::FirstN(df, N);
    for (int64_t v = 0; v < kBlockVectors; ++v) {  // (1)
      MF main;
      VF r, c;
      VI k;
      expm1_reduce(tanh_argument(hn::LoadU(df, x + j + v * N), main), r, c, k);
      all_main = hn::And(all_main, main);
      hn::Store(r, df, r_block + v * N);
      hn::Store(c, df, c_block + v * N);
      hn::Store(k, di, k_block + v * N);
    }
    for (int64_t v = 0; v < kBlockVectors; ++v) {  // (2)
      hn::Store(expm1_correction(hn::Load(df, r_block + v * N)), df, e0_block + v * N);
    }
    for (int64_t v = 0; v < kBlockVectors; ++v) {  // (3)
      MF main;
      const VF u = tanh_argument(hn::LoadU(df, x + j + v * N), main);
      const VF t = expm1_finish(u, hn::Load(df, r_block + v * N), hn::Load(df, c_block + v * N),
                                hn::Load(di, k_block + v * N), hn::Load(df, e0_block + v * N));
      hn::Store(t, df, r_block + v * N);
    }
    const bool special = !hn::AllTrue(df, all_main);
    for (int64_t v = 0; v < kBlockVectors; ++v) {  // (4)
      const VF xv = hn::LoadU(df, x + j + v * N);
      VF t = tanh_from_expm1(xv, hn::Load(df, r_block + v * N));
      if (HWY_UNLIKELY(special)) t = tanh_special(xv, t);
      hn::StoreU(t, df, y + j + v * N);
    }
  }
  for (; j + N <= n; j += N) hn::StoreU(one_tanh(hn::LoadU(df, x + j)), df, y + j);
  if (j < n) {
    const size_t rest = static_cast<size_t>(n - j);
    store_first(df, one_tanh(load_first(df, x + j, rest)), y + j, rest);
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/base/cpu.h"
#include "core/kernels/tanh.h"

namespace ember::kernels {

HWY_EXPORT(TanhRow);

void tanh_row(const float* x, float* y, int64_t n) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(TanhRow)(x, y, n);
}

}  // namespace ember::kernels
#endif  // HWY_ONCE
