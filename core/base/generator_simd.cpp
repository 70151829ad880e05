// The generator's vector code (core/base/generator.h, random_fill::detail): MT19937's twist and
// tempering (and Generator::random_block's loop over them, so that a block dispatches once), and
// the float32 normal block, written once over Highway and compiled for each target
// (core/kernels/README.md, "One source for every CPU"), beside the plain loops in generator.cpp.
// Integer work is exact, so any width gives the plain loops' words; the normal block is PyTorch's
// AVX2 code (normal_fill_16_AVX2, core/base/RNG.md §3.4) operation for operation, each
// _mm256_fmadd_ps an Fma (fused on every target), so every lane rounds as generator.cpp's scalar
// port does.
// tests/core/base/test_generator.cpp checks both on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/base/generator_simd.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/base/fma-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::random_fill::detail::HWY_NAMESPACE {

namespace {

namespace hn = hwy::HWY_NAMESPACE;
using simd::HWY_NAMESPACE::Fma;
using simd::HWY_NAMESPACE::Fms;

// ---------------------------------------------------------------------------------------------
// MT19937 (generator.cpp's twisted and tempered, a vector of words at a time)

template <class D, class V = hn::Vec<D>>
HWY_INLINE V twisted(D d, V word, V next, V far) {
  const V y =
      hn::Or(hn::And(word, hn::Set(d, 0x80000000u)), hn::And(next, hn::Set(d, 0x7FFFFFFFu)));
  // (y & 1) ? kMatrixA : 0, as a mask: 0 - (y & 1) is all ones or all zeros.
  const V odd = hn::Sub(hn::Zero(d), hn::And(y, hn::Set(d, 1u)));
  const V mag = hn::And(odd, hn::Set(d, 0x9908B0DFu));
  return hn::Xor(far, hn::Xor(hn::ShiftRight<1>(y), mag));
}

// Words i .. i + Lanes(d) - 1 of the state from the words at i, next and far.
template <class D>
HWY_INLINE void twist_at(D d, uint32_t* HWY_RESTRICT s, int i, int next, int far) {
  hn::StoreU(twisted(d, hn::LoadU(d, s + i), hn::LoadU(d, s + next), hn::LoadU(d, s + far)), d,
             s + i);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V tempered(D d, V y) {
  y = hn::Xor(y, hn::ShiftRight<11>(y));
  y = hn::Xor(y, hn::And(hn::ShiftLeft<7>(y), hn::Set(d, 0x9D2C5680u)));
  y = hn::Xor(y, hn::And(hn::ShiftLeft<15>(y), hn::Set(d, 0xEFC60000u)));
  return hn::Xor(y, hn::ShiftRight<18>(y));
}

// ---------------------------------------------------------------------------------------------
// The float32 normal block (generator.cpp's normal_block16_scalar, avx2_log and avx2_sincos)

using D8 = hn::CappedTag<float, 8>;  // the eight pairs of a block, Lanes(D8) of them at a time
using VF = hn::Vec<D8>;

HWY_INLINE VF from_bits(uint32_t bits) {
  const D8 df;
  return hn::BitCast(df, hn::Set(hn::RebindToUnsigned<D8>(), bits));
}

// Slots j .. j + Lanes - 1 (the u1's) and j + 8 .. (the u2's) of the block at d, j = 0 here.
HWY_INLINE void normal_lanes(float* HWY_RESTRICT d, float mean, float stddev) {
  const D8 df;
  const hn::RebindToSigned<D8> di;
  const hn::RebindToUnsigned<D8> du;
  const VF one = hn::Set(df, 1.0f);
  const VF u1 = hn::Sub(one, hn::LoadU(df, d));  // (0, 1]
  const VF u2 = hn::LoadU(df, d + 8);

  // ---- avx2_log(u1) ----
  const auto invalid = hn::Le(u1, hn::Zero(df));  // NaN lanes
  const VF x = hn::Max(u1, hn::Set(df, std::numeric_limits<float>::min()));
  const auto biased = hn::BitCast(di, hn::ShiftRight<23>(hn::BitCast(du, x)));
  VF exponent = hn::Add(hn::ConvertTo(df, hn::Sub(biased, hn::Set(di, 127))), one);
  const VF mantissa = hn::BitCast(
      df, hn::Or(hn::And(hn::BitCast(du, x), hn::Set(du, ~0x7F800000u)), hn::Set(du, 0x3F000000u)));
  const auto small = hn::Lt(mantissa, from_bits(0x3F3504F3));  // m < sqrt(1/2)
  exponent = hn::Sub(exponent, hn::IfThenElseZero(small, one));
  const VF t = hn::Add(hn::Sub(mantissa, one), hn::IfThenElseZero(small, mantissa));
  const VF t2 = hn::Mul(t, t);
  const uint32_t kP[9] = {0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A, 0xBDFE5D4F, 0x3E11E9BF,
                          0xBE2AAE50, 0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA};
  VF y = from_bits(kP[0]);
  for (int k = 1; k < 9; ++k) y = Fma(y, t, from_bits(kP[k]));
  y = hn::Mul(y, t);
  y = Fma(y, t2, hn::Mul(exponent, from_bits(0xB95E8083)));
  y = hn::Sub(y, hn::Mul(t2, hn::Set(df, 0.5f)));
  VF log_u1 = hn::Add(hn::Add(t, y), hn::Mul(exponent, from_bits(0x3F318000)));
  log_u1 = hn::Or(log_u1, hn::VecFromMask(df, invalid));
  const VF radius = hn::Sqrt(hn::Mul(hn::Set(df, -2.0f), log_u1));

  // ---- avx2_sincos(2 pi u2) ----
  const VF theta = hn::Mul(from_bits(0x40C90FDB), u2);
  const auto sign_bit = hn::Set(du, 0x80000000u);
  auto sign_sin = hn::And(hn::BitCast(du, theta), sign_bit);
  VF xr = hn::BitCast(df, hn::AndNot(sign_bit, hn::BitCast(du, theta)));  // |theta|
  auto j = hn::ConvertTo(di, hn::Mul(xr, from_bits(0x3FA2F983)));         // truncated
  j = hn::And(hn::Add(j, hn::Set(di, 1)), hn::Set(di, ~1));
  const VF jf = hn::ConvertTo(df, j);
  const auto swap_sign_sin = hn::ShiftLeft<29>(hn::BitCast(du, hn::And(j, hn::Set(di, 4))));
  const auto sine_poly_is_sin =
      hn::RebindMask(df, hn::Eq(hn::And(j, hn::Set(di, 2)), hn::Zero(di)));
  xr = Fma(jf, from_bits(0xBF490000), xr);
  xr = Fma(jf, from_bits(0xB97DA000), xr);
  xr = Fma(jf, from_bits(0xB3222169), xr);
  const auto sign_cos =
      hn::ShiftLeft<29>(hn::BitCast(du, hn::AndNot(hn::Sub(j, hn::Set(di, 2)), hn::Set(di, 4))));
  sign_sin = hn::Xor(sign_sin, swap_sign_sin);
  const VF z = hn::Mul(xr, xr);
  VF cos_poly = Fma(from_bits(0x37CCF5CE), z, from_bits(0xBAB6061A));
  cos_poly = Fma(cos_poly, z, from_bits(0x3D2AAAA5));
  cos_poly = hn::Mul(cos_poly, z);
  cos_poly = Fms(cos_poly, z, hn::Mul(z, hn::Set(df, 0.5f)));
  cos_poly = hn::Add(cos_poly, one);
  VF sin_poly = Fma(from_bits(0xB94CA1F9), z, from_bits(0x3C08839E));
  sin_poly = Fma(sin_poly, z, from_bits(0xBE2AAAA3));
  sin_poly = hn::Mul(sin_poly, z);
  sin_poly = Fma(sin_poly, xr, xr);
  // The selection, then + 0 (which turns -0 into +0), as the original's masks and add.
  const VF sin_value = hn::Add(hn::IfThenElse(sine_poly_is_sin, sin_poly, cos_poly), hn::Zero(df));
  const VF cos_value = hn::Add(hn::IfThenElse(sine_poly_is_sin, cos_poly, sin_poly), hn::Zero(df));
  const VF sin_theta = hn::BitCast(df, hn::Xor(hn::BitCast(du, sin_value), sign_sin));
  const VF cos_theta = hn::BitCast(df, hn::Xor(hn::BitCast(du, cos_value), sign_cos));

  const VF vstd = hn::Set(df, stddev), vmean = hn::Set(df, mean);
  hn::StoreU(Fma(hn::Mul(radius, cos_theta), vstd, vmean), df, d);
  hn::StoreU(Fma(hn::Mul(radius, sin_theta), vstd, vmean), df, d + 8);
}

}  // namespace

// The twist (generator.cpp's twist_scalar), a vector of words at a time. Word i depends on words
// i + 1 and i + shift (old values) or i + shift - n (new values), never on the words i + 1 ..
// i + Lanes - 1 rewritten in the same step, so a vector of consecutive words can be computed
// together; the words around the two boundaries (n - shift and n - 1) go one at a time.
void Twist(uint32_t* HWY_RESTRICT s, int n, int shift) {
  const hn::ScalableTag<uint32_t> d;
  const hn::CappedTag<uint32_t, 1> d1;
  const int N = static_cast<int>(hn::Lanes(d));
  const int first = n - shift;  // words 0 .. first - 1 read an old word i + shift
  int i = 0;
  for (; i + N <= first; i += N) twist_at(d, s, i, i + 1, i + shift);
  for (; i < first; ++i) twist_at(d1, s, i, i + 1, i + shift);
  for (; i + N <= n - 1; i += N) twist_at(d, s, i, i + 1, i - first);  // i - first: new words
  for (; i < n; ++i) twist_at(d1, s, i, (i + 1) % n, i - first);
}

// out[i] = s[i] tempered, for i in [0, n).
void Temper(const uint32_t* HWY_RESTRICT s, uint32_t* HWY_RESTRICT out, int64_t n) {
  const hn::ScalableTag<uint32_t> d;
  const hn::CappedTag<uint32_t, 1> d1;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(tempered(d, hn::LoadU(d, s + i)), d, out + i);
  for (; i < n; ++i) hn::StoreU(tempered(d1, hn::LoadU(d1, s + i)), d1, out + i);
}

// Generator::random_block: the next n outputs of the engine with state s (n_state words) at
// position left, next (Generator's left_ and next_), a call of Twist and Temper per 624 words.
// random() twists when left reaches 0 and then reads word 0; here the twist comes first and
// left = 625 makes the next 624 words readable, after which the state is exactly the one 624
// random() calls would leave.
void RandomBlock(uint32_t* HWY_RESTRICT s, int n_state, int shift, int* HWY_RESTRICT left,
                 int* HWY_RESTRICT next, uint32_t* HWY_RESTRICT out, int64_t n) {
  while (n > 0) {
    if (*left == 1) {
      Twist(s, n_state, shift);
      *left = n_state + 1;
      *next = 0;
    }
    const int64_t k = std::min<int64_t>(n, *left - 1);
    Temper(s + *next, out, k);
    *next += static_cast<int>(k);
    *left -= static_cast<int>(k);
    out += k;
    n -= k;
  }
}

// `blocks` blocks of 16 uniforms from d on, each in place (slot j paired with slot j + 8).
void NormalBlocks16(float* HWY_RESTRICT d, int64_t blocks, float mean, float stddev) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(D8()));
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < 8; j += N) normal_lanes(d + 16 * b + j, mean, stddev);
  }
}

}  // namespace ember::random_fill::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/base/cpu.h"
#include "core/base/generator.h"

namespace ember::random_fill::detail {

HWY_EXPORT(Twist);
HWY_EXPORT(Temper);
HWY_EXPORT(RandomBlock);
HWY_EXPORT(NormalBlocks16);

void twist(uint32_t* s, int n, int shift) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(Twist)(s, n, shift);
}

void temper(const uint32_t* s, uint32_t* out, int64_t n) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(Temper)(s, out, n);
}

void random_block(uint32_t* s, int n_state, int shift, int& left, int& next, uint32_t* out,
                  int64_t n) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(RandomBlock)(s, n_state, shift, &left, &next, out, n);
}

void normal_blocks16(float* d, int64_t blocks, float mean, float stddev) {
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(NormalBlocks16)(d, blocks, mean, stddev);
}

}  // namespace ember::random_fill::detail
#endif  // HWY_ONCE
