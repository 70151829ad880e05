// tanh_row for float: glibc 2.36's tanhf (over its expm1f) on AVX2 registers; the derivation is
// in tanh.h. Each scalar operation of that code is one vector operation here, in the same order
// and the same precision (float, no contractions: the build uses -ffp-contract=off), so every
// lane rounds exactly as the scalar call does.
#include "core/kernels/tanh.h"

#include <cstring>

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
// passes): Sun's s_expm1f.c, every case computed and the right one kept per lane.
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
  const __m256 y_k1 =
      select(_mm256_cmp_ps(r, f(-0.25f), _CMP_LT_OQ), mul(f(-2.0f), sub(e, add(r, half))),
             add(one, mul(f(2.0f), sub(r, e))));
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
  y = select(equal_k(k, 1), y_k1, y);
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
  const __m256 z = select(at_least_one, sub(one, div(two, add(t, two))),
                          div(_mm256_xor_ps(t, sign_bit), add(t, two)));
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
#endif

}  // namespace

void tanh_row(const float* x, float* y, int64_t n) {
  int64_t j = 0;
#ifdef EMBER_TANH_X86
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, tanh8(_mm256_loadu_ps(x + j)));
  if (j < n) {  // the tail through a full register, written back in part
    alignas(32) float in[8] = {}, out[8];
    std::memcpy(in, x + j, sizeof(float) * static_cast<std::size_t>(n - j));
    _mm256_store_ps(out, tanh8(_mm256_load_ps(in)));
    std::memcpy(y + j, out, sizeof(float) * static_cast<std::size_t>(n - j));
  }
#else
  for (; j < n; ++j) y[j] = std::tanh(x[j]);
#endif
}

}  // namespace ember::kernels
