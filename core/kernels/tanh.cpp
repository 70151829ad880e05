// tanh_row for float: glibc 2.36's tanhf (over its expm1f) on AVX2 registers, or AVX-512 ones
// when the CPU has them; the derivation is in tanh.h. Each scalar operation of that code is one
// vector operation here, in the same order and the same precision (float, no contractions: the
// whole build uses -ffp-contract=off, these functions included), so every lane rounds exactly as
// the scalar call does, on either path.
#include "core/kernels/tanh.h"

#include <cstring>

#include "core/base/cpu.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_TANH_X86 1
#endif

namespace ember::kernels {

namespace {

#ifdef EMBER_TANH_X86
inline __m256 splat(uint32_t bits) {
  return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(bits)));
}
inline __m256 f(float v) { return _mm256_set1_ps(v); }
inline __m256i bits_of(__m256 v) { return _mm256_castps_si256(v); }
inline __m256 from_bits(__m256i v) { return _mm256_castsi256_ps(v); }
// a > b for non-negative 32-bit patterns (signed compare is right below 2^31)
inline __m256 greater(__m256i a, uint32_t b) {
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(static_cast<int>(b))));
}
// a < b, the same way
inline __m256 less(__m256i a, uint32_t b) {
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(b)), a));
}
inline __m256 equal_k(__m256i k, int v) {
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(v)));
}
inline __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
inline __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
inline __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
inline __m256 div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
// mask ? a : b, lane by lane
inline __m256 select(__m256 mask, __m256 a, __m256 b) { return _mm256_blendv_ps(b, a, mask); }
// y with k added to its exponent field (2^k y, no rounding)
inline __m256 scale(__m256 y, __m256i k) {
  return from_bits(_mm256_add_epi32(bits_of(y), _mm256_slli_epi32(k, 23)));
}

// expm1(u) for eight finite floats with |u| < 88.72 and u > -27 ln2 (the arguments tanh
// passes): Sun's s_expm1f.c, every case computed (but k = 1's, which tanh never reaches)
// and the right one kept per lane.
inline __m256 expm1_8(__m256 u) {
  const __m256 ln2_hi = splat(0x3f317180), ln2_lo = splat(0x3717f7d1);
  const __m256 invln2 = splat(0x3fb8aa3b);
  const __m256 q1 = splat(0xbd088889), q2 = splat(0x3ad00d01), q3 = splat(0xb8a670cd);
  const __m256 q4 = splat(0x36867e54), q5 = splat(0xb457edbb);
  const __m256 sign_bit = splat(0x80000000);
  const __m256 one = f(1.0f), half = f(0.5f);

  const __m256i hx = bits_of(_mm256_andnot_ps(sign_bit, u));  // |u|'s bits
  const __m256 negative = _mm256_castsi256_ps(_mm256_srai_epi32(bits_of(u), 31));
  // Reduction, for |u| > ln2 / 2: k = +-1 when |u| < 3 ln2 / 2, else k = round-half-away of
  // u / ln2 as the float code computes it (invln2 * u +- 0.5, truncated). With t = k,
  // hi = u - t ln2_hi (exact), lo = t ln2_lo, r = hi - lo, c = (hi - r) - lo. (For k = +-1 this
  // is the scalar code's separate branch, value for value: 1 * ln2_hi is ln2_hi.)
  const __m256 reduce = greater(hx, 0x3eb17218);
  const __m256 near = _mm256_andnot_ps(greater(hx, 0x3f851591), reduce);  // |u| < 1.5 ln2
  const __m256i k_far = _mm256_cvttps_epi32(
      add(mul(invln2, u), _mm256_or_ps(half, _mm256_and_ps(negative, sign_bit))));
  const __m256i k_near =
      _mm256_or_si256(_mm256_set1_epi32(1), _mm256_castps_si256(negative));  // +-1
  __m256i k =
      _mm256_castps_si256(select(near, _mm256_castsi256_ps(k_near), _mm256_castsi256_ps(k_far)));
  k = _mm256_and_si256(k, _mm256_castps_si256(reduce));  // 0 when not reduced
  const __m256 t_k = _mm256_cvtepi32_ps(k);
  const __m256 hi = sub(u, mul(t_k, ln2_hi));
  const __m256 lo = mul(t_k, ln2_lo);
  const __m256 r_reduced = sub(hi, lo);
  const __m256 c = sub(sub(hi, r_reduced), lo);
  const __m256 r = select(reduce, r_reduced, u);

  // The rational approximation on the primary range.
  const __m256 hfx = mul(half, r);
  const __m256 hxs = mul(r, hfx);
  const __m256 r1 =
      add(one,
          mul(hxs, add(q1, mul(hxs, add(q2, mul(hxs, add(q3, mul(hxs, add(q4, mul(hxs, q5))))))))));
  const __m256 t = sub(f(3.0f), mul(r1, hfx));
  const __m256 e0 = mul(hxs, div(sub(r1, t), sub(f(6.0f), mul(r, t))));
  const __m256 y_k0 = sub(r, sub(mul(r, e0), hxs));

  // 2^k (1 + expm1 r) - 1 in the order that suits k.
  const __m256 e = sub(sub(mul(r, sub(e0, c)), c), hxs);
  const __m256 y_km1 = sub(mul(half, sub(r, e)), half);
  const __m256 y_far = sub(scale(sub(one, sub(e, r)), k), one);  // k <= -2 or k > 56
  const __m256i two_minus_k = _mm256_srlv_epi32(_mm256_set1_epi32(0x1000000), k);
  const __m256 one_minus = from_bits(_mm256_sub_epi32(_mm256_set1_epi32(0x3f800000), two_minus_k));
  const __m256 y_mid = scale(sub(one_minus, sub(e, r)), k);  // 2 <= k < 23: t = 1 - 2^-k
  const __m256 pow_minus_k =
      from_bits(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(0x7f), k), 23));
  const __m256 y_high = scale(add(sub(r, add(e, pow_minus_k)), one), k);  // 23 <= k <= 56

  const __m256 k_ge2 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, _mm256_set1_epi32(1)));
  const __m256 k_lt23 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(23), k));
  const __m256 k_le56 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(57), k));
  __m256 y = y_far;
  y = select(_mm256_and_ps(k_ge2, k_le56), y_high, y);
  y = select(_mm256_and_ps(k_ge2, k_lt23), y_mid, y);
  y = select(equal_k(k, -1), y_km1, y);
  y = select(equal_k(k, 0), y_k0, y);
  return select(less(hx, 0x33000000), u, y);  // |u| < 2^-25: u
}

// tanh of eight floats, special cases included.
inline __m256 tanh8(__m256 x) {
  const __m256 sign_bit = splat(0x80000000);
  const __m256 one = f(1.0f), two = f(2.0f);
  const __m256 a = _mm256_andnot_ps(sign_bit, x);
  const __m256i ix = bits_of(a);
  const __m256 at_least_one = greater(ix, 0x3f7fffff);
  const __m256 u = select(at_least_one, mul(two, a), mul(f(-2.0f), a));
  const __m256 t = expm1_8(u);
  // One division for both branches: q = 2 / (t + 2) (a >= 1) or -t / (t + 2) (a < 1), then
  // z = 1 - q or q. Each lane divides what the scalar code divides, so the same bits.
  const __m256 q = div(select(at_least_one, two, _mm256_xor_ps(t, sign_bit)), add(t, two));
  const __m256 z = select(at_least_one, sub(one, q), q);
  __m256 y = _mm256_or_ps(z, _mm256_and_ps(x, sign_bit));  // z >= 0: the sign of x
  // Lanes off the main range 2^-55 <= |x| < 22 (rare in practice): blend in their values.
  const __m256 main = _mm256_andnot_ps(greater(ix, 0x41afffff), greater(ix, 0x23ffffff));
  if (_mm256_movemask_ps(main) == 0xff) return y;
  y = select(greater(ix, 0x41afffff), _mm256_or_ps(one, _mm256_and_ps(x, sign_bit)), y);  // +-1
  y = select(less(ix, 0x24000000), mul(x, add(one, x)), y);  // x (1 + x)
  y = select(_mm256_castsi256_ps(_mm256_cmpeq_epi32(ix, _mm256_setzero_si256())), x, y);  // +-0
  const __m256 inverse = div(one, x);  // inf, nan
  y = select(greater(ix, 0x7f7fffff),
             select(_mm256_castsi256_ps(_mm256_srai_epi32(bits_of(x), 31)), sub(inverse, one),
                    add(inverse, one)),
             y);
  return y;
}

// The same code on AVX-512 registers, sixteen floats at a time: operation for operation expm1_8
// and tanh8 (same order, same float roundings, no fused multiply-adds), with comparisons giving
// __mmask16 and selects as mask blends, so every lane has the 8-lane code's bits (and tanhf's).
// Only AVX-512F instructions (the bitwise float ops are integer ones, as AVX-512F has no
// vandps). Compiled for AVX-512 alone and run only when the CPU has it (the build stays
// x86-64-v3; see CMakeLists.txt on GCC 12 and AVX-512 constants): every constant comes from
// memory through `c`, a pointer the compiler cannot see through, as broadcasts (as exp_row's
// AVX-512 path, core/kernels/exp.cpp).
// (GCC 12 warns that its own _mm512_undefined_* placeholders "may be used uninitialized" in
// these intrinsics' expansions, or at -O0, as the sanitizer presets build, "is used
// uninitialized": a known false positive, silenced for this block only.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
struct Tanh512Constants {
  // float constants, as their bits
  uint32_t ln2_hi, ln2_lo, invln2, q1, q2, q3, q4, q5, sign_bit, one, half, two, minus_two, three,
      six;
  // integer constants and thresholds on |x| or |u|'s bits
  int32_t k_one, two_24, one_bits, bias, k_23, k_57, reduce_above, near_above, tiny_below,
      one_above, big_above, small_above, small_below, finite_above;
};
const Tanh512Constants kTanh512 = {
    0x3f317180, 0x3717f7d1, 0x3fb8aa3b, 0xbd088889, 0x3ad00d01, 0xb8a670cd, 0x36867e54, 0xb457edbb,
    0x80000000, 0x3f800000, 0x3f000000, 0x40000000, 0xc0000000, 0x40400000, 0x40c00000, 1,
    0x1000000,  0x3f800000, 0x7f,       23,         57,         0x3eb17218, 0x3f851591, 0x33000000,
    0x3f7fffff, 0x41afffff, 0x23ffffff, 0x24000000, 0x7f7fffff};

__attribute__((target("avx512f"))) inline __m512 splat16(uint32_t bits) {
  return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(bits)));
}
__attribute__((target("avx512f"))) inline __m512i bits16(__m512 v) {
  return _mm512_castps_si512(v);
}
__attribute__((target("avx512f"))) inline __m512 from_bits16(__m512i v) {
  return _mm512_castsi512_ps(v);
}
// a > b and a < b for 32-bit patterns (as greater and less above)
__attribute__((target("avx512f"))) inline __mmask16 greater16(__m512i a, int32_t b) {
  return _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(b));
}
__attribute__((target("avx512f"))) inline __mmask16 less16(__m512i a, int32_t b) {
  return _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(b), a);
}
// y with k added to its exponent field (2^k y, no rounding)
__attribute__((target("avx512f"))) inline __m512 scale16(__m512 y, __m512i k) {
  return from_bits16(_mm512_add_epi32(bits16(y), _mm512_slli_epi32(k, 23)));
}

// expm1_8 on sixteen lanes. (_mm512_mask_blend_ps(m, b, a) is m ? a : b, lane by lane.)
__attribute__((target("avx512f"))) inline __m512 expm1_16(__m512 u, const Tanh512Constants* c) {
  const __m512 ln2_hi = splat16(c->ln2_hi), ln2_lo = splat16(c->ln2_lo);
  const __m512 invln2 = splat16(c->invln2);
  const __m512 q1 = splat16(c->q1), q2 = splat16(c->q2), q3 = splat16(c->q3);
  const __m512 q4 = splat16(c->q4), q5 = splat16(c->q5);
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(c->sign_bit));
  const __m512 one = splat16(c->one), half = splat16(c->half);

  const __m512i hx = _mm512_andnot_si512(sign_bit, bits16(u));  // |u|'s bits
  const __m512i negative = _mm512_srai_epi32(bits16(u), 31);
  // The reduction, as in expm1_8.
  const __mmask16 reduce = greater16(hx, c->reduce_above);
  const __mmask16 near = static_cast<__mmask16>(~greater16(hx, c->near_above) & reduce);
  const __m512i k_far = _mm512_cvttps_epi32(_mm512_add_ps(
      _mm512_mul_ps(invln2, u),
      from_bits16(_mm512_or_si512(bits16(half), _mm512_and_si512(negative, sign_bit)))));
  const __m512i k_near = _mm512_or_si512(_mm512_set1_epi32(c->k_one), negative);  // +-1
  const __m512i k = _mm512_maskz_mov_epi32(reduce, _mm512_mask_blend_epi32(near, k_far, k_near));
  const __m512 t_k = _mm512_cvtepi32_ps(k);
  const __m512 hi = _mm512_sub_ps(u, _mm512_mul_ps(t_k, ln2_hi));
  const __m512 lo = _mm512_mul_ps(t_k, ln2_lo);
  const __m512 r_reduced = _mm512_sub_ps(hi, lo);
  const __m512 cr = _mm512_sub_ps(_mm512_sub_ps(hi, r_reduced), lo);
  const __m512 r = _mm512_mask_blend_ps(reduce, u, r_reduced);

  // The rational approximation on the primary range.
  const __m512 hfx = _mm512_mul_ps(half, r);
  const __m512 hxs = _mm512_mul_ps(r, hfx);
  const __m512 r1 = _mm512_add_ps(
      one,
      _mm512_mul_ps(
          hxs,
          _mm512_add_ps(
              q1,
              _mm512_mul_ps(
                  hxs, _mm512_add_ps(
                           q2, _mm512_mul_ps(
                                   hxs, _mm512_add_ps(
                                            q3, _mm512_mul_ps(
                                                    hxs, _mm512_add_ps(
                                                             q4, _mm512_mul_ps(hxs, q5))))))))));
  const __m512 t = _mm512_sub_ps(splat16(c->three), _mm512_mul_ps(r1, hfx));
  const __m512 e0 = _mm512_mul_ps(
      hxs,
      _mm512_div_ps(_mm512_sub_ps(r1, t), _mm512_sub_ps(splat16(c->six), _mm512_mul_ps(r, t))));
  const __m512 y_k0 = _mm512_sub_ps(r, _mm512_sub_ps(_mm512_mul_ps(r, e0), hxs));

  // 2^k (1 + expm1 r) - 1 in the order that suits k.
  const __m512 e = _mm512_sub_ps(_mm512_sub_ps(_mm512_mul_ps(r, _mm512_sub_ps(e0, cr)), cr), hxs);
  const __m512 y_km1 = _mm512_sub_ps(_mm512_mul_ps(half, _mm512_sub_ps(r, e)), half);
  const __m512 y_far =
      _mm512_sub_ps(scale16(_mm512_sub_ps(one, _mm512_sub_ps(e, r)), k), one);  // k <= -2, > 56
  const __m512i two_minus_k = _mm512_srlv_epi32(_mm512_set1_epi32(c->two_24), k);
  const __m512 one_minus =
      from_bits16(_mm512_sub_epi32(_mm512_set1_epi32(c->one_bits), two_minus_k));
  const __m512 y_mid = scale16(_mm512_sub_ps(one_minus, _mm512_sub_ps(e, r)), k);  // 2..22
  const __m512 pow_minus_k =
      from_bits16(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(c->bias), k), 23));
  const __m512 y_high =
      scale16(_mm512_add_ps(_mm512_sub_ps(r, _mm512_add_ps(e, pow_minus_k)), one), k);  // 23..56

  const __mmask16 k_ge2 = _mm512_cmpgt_epi32_mask(k, _mm512_set1_epi32(c->k_one));
  const __mmask16 k_lt23 = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(c->k_23), k);
  const __mmask16 k_le56 = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(c->k_57), k);
  const __m512i k_one = _mm512_set1_epi32(c->k_one);
  __m512 y = y_far;
  y = _mm512_mask_blend_ps(static_cast<__mmask16>(k_ge2 & k_le56), y, y_high);
  y = _mm512_mask_blend_ps(static_cast<__mmask16>(k_ge2 & k_lt23), y, y_mid);
  y = _mm512_mask_blend_ps(
      _mm512_cmpeq_epi32_mask(k, _mm512_sub_epi32(_mm512_setzero_si512(), k_one)), y, y_km1);
  y = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(k, _mm512_setzero_si512()), y, y_k0);
  return _mm512_mask_blend_ps(less16(hx, c->tiny_below), y, u);  // |u| < 2^-25: u
}

// tanh8 on sixteen lanes, special cases included.
__attribute__((target("avx512f"))) inline __m512 tanh16(__m512 x, const Tanh512Constants* c) {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(c->sign_bit));
  const __m512 one = splat16(c->one), two = splat16(c->two);
  const __m512i ix = _mm512_andnot_si512(sign_bit, bits16(x));
  const __m512 a = from_bits16(ix);
  const __m512i x_sign = _mm512_and_si512(bits16(x), sign_bit);
  const __mmask16 at_least_one = greater16(ix, c->one_above);
  const __m512 u = _mm512_mask_blend_ps(at_least_one, _mm512_mul_ps(splat16(c->minus_two), a),
                                        _mm512_mul_ps(two, a));
  const __m512 t = expm1_16(u, c);
  const __m512 q = _mm512_div_ps(
      _mm512_mask_blend_ps(at_least_one, from_bits16(_mm512_xor_si512(bits16(t), sign_bit)), two),
      _mm512_add_ps(t, two));  // one division, as tanh8's
  const __m512 z = _mm512_mask_blend_ps(at_least_one, q, _mm512_sub_ps(one, q));
  __m512 y = from_bits16(_mm512_or_si512(bits16(z), x_sign));  // z >= 0: the sign of x
  // Lanes off the main range 2^-55 <= |x| < 22: blend in their values.
  const __mmask16 big = greater16(ix, c->big_above);
  const __mmask16 main = static_cast<__mmask16>(~big & greater16(ix, c->small_above));
  if (main == 0xffff) return y;
  y = _mm512_mask_blend_ps(big, y, from_bits16(_mm512_or_si512(bits16(one), x_sign)));  // +-1
  y = _mm512_mask_blend_ps(less16(ix, c->small_below), y,
                           _mm512_mul_ps(x, _mm512_add_ps(one, x)));                    // x (1 + x)
  y = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(ix, _mm512_setzero_si512()), y, x);  // +-0
  const __m512 inverse = _mm512_div_ps(one, x);                                         // inf, nan
  const __m512 special =
      _mm512_mask_blend_ps(_mm512_test_epi32_mask(bits16(x), sign_bit), _mm512_add_ps(inverse, one),
                           _mm512_sub_ps(inverse, one));
  return _mm512_mask_blend_ps(greater16(ix, c->finite_above), y, special);
}

__attribute__((target("avx512f"), noinline)) void tanh_row_512(const float* x, float* y, int64_t n,
                                                               const Tanh512Constants* c) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, tanh16(_mm512_loadu_ps(x + j), c));
  if (j < n) {  // the tail: lanes past n hold 0 and are not written back
    const __mmask16 live = static_cast<__mmask16>((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(y + j, live, tanh16(_mm512_maskz_loadu_ps(live, x + j), c));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void tanh_row_256(const float* x, float* y, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, tanh8(_mm256_loadu_ps(x + j)));
  if (j < n) {  // the tail through a full register, written back in part
    alignas(32) float in[8] = {}, out[8];
    std::memcpy(in, x + j, sizeof(float) * static_cast<std::size_t>(n - j));
    _mm256_store_ps(out, tanh8(_mm256_load_ps(in)));
    std::memcpy(y + j, out, sizeof(float) * static_cast<std::size_t>(n - j));
  }
}

void tanh_row_avx512_unchecked(const float* x, float* y, int64_t n) {
  // (The pointer goes through an empty asm, so that the constants are loads, not folded.)
  const Tanh512Constants* c = &kTanh512;
  asm("" : "+r"(c));
  tanh_row_512(x, y, n, c);
}
#endif

}  // namespace

void tanh_row(const float* x, float* y, int64_t n) {
#ifdef EMBER_TANH_X86
  static const bool avx512 = cpu::use_avx512();  // core/base/cpu.h (EMBER_CPU_CAPABILITY)
  if (avx512) {
    tanh_row_avx512_unchecked(x, y, n);
  } else {
    tanh_row_256(x, y, n);
  }
#else
  for (int64_t j = 0; j < n; ++j) y[j] = std::tanh(x[j]);
#endif
}

const char* tanh_isa() {
#ifdef EMBER_TANH_X86
  return cpu::use_avx512() ? "avx512" : "avx2";
#else
  return "portable";
#endif
}

bool tanh_row_avx2(const float* x, float* y, int64_t n) {
#ifdef EMBER_TANH_X86
  tanh_row_256(x, y, n);
  return true;
#else
  (void)x, (void)y, (void)n;
  return false;
#endif
}

bool tanh_row_avx512(const float* x, float* y, int64_t n) {
#ifdef EMBER_TANH_X86
  if (!cpu::has_avx512f()) return false;
  tanh_row_avx512_unchecked(x, y, n);
  return true;
#else
  (void)x, (void)y, (void)n;
  return false;
#endif
}

}  // namespace ember::kernels
