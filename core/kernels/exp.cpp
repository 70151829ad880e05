// exp_row for float: glibc's expf on AVX2 registers (the derivation is in exp.h).
#include "core/kernels/exp.h"

#include <algorithm>
#include <cstring>

#include "core/kernels/cpu.h"
#include "core/kernels/reduce_kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_EXP_X86 1
#endif

namespace ember::kernels {

namespace {

#ifdef EMBER_EXP_X86
// glibc's __exp2f_data (sysdeps/ieee754/flt-32/e_exp2f_data.c), N = 32: tab[j] holds the bits of
// 2^(j / N) minus j << 47, so that adding k << 47 for k = j (mod N) gives 2^(k / N).
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

double from_bits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

float from_bits32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The table's low and high 32-bit halves, eight entries to a register's worth.
struct alignas(32) SplitTable {
  uint32_t lo[32], hi[32];
};
constexpr SplitTable split_table() {
  SplitTable t{};
  for (int j = 0; j < 32; ++j) {
    t.lo[j] = static_cast<uint32_t>(kTable[j]);
    t.hi[j] = static_cast<uint32_t>(kTable[j] >> 32);
  }
  return t;
}
constexpr SplitTable kSplit = split_table();

// t[idx[l] mod 32] for eight 32-bit halves: a permute inside each of the four registers holding
// the 32 entries (it reads the low 3 bits of idx), then bits 3 and 4 choose among them. Faster
// than a gather on the CPUs this runs on.
inline __m256i lookup32(const uint32_t* t, __m256i idx, __m256 bit3, __m256 bit4) {
  const __m256i* r = reinterpret_cast<const __m256i*>(t);
  const __m256 t0 = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_load_si256(r), idx));
  const __m256 t1 = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_load_si256(r + 1), idx));
  const __m256 t2 = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_load_si256(r + 2), idx));
  const __m256 t3 = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_load_si256(r + 3), idx));
  return _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_blendv_ps(t0, t1, bit3), _mm256_blendv_ps(t2, t3, bit3), bit4));
}

// y = p * s of the algorithm for four lanes, given x, kd before the shift is taken out, and the
// table entries t: everything after the lookup.
inline __m128 finish4(__m256d x, __m256d kd, __m256i t) {
  const __m256d inv_ln2_n = _mm256_set1_pd(from_bits(0x40471547652b82fe));  // 32 / ln 2
  const __m256d shift = _mm256_set1_pd(from_bits(0x4338000000000000));      // 0x1.8p52
  const __m256d c0 = _mm256_set1_pd(from_bits(0x3ebc6af84b912394));
  const __m256d c1 = _mm256_set1_pd(from_bits(0x3f2ebfce50fac4f3));
  const __m256d c2 = _mm256_set1_pd(from_bits(0x3f962e42ff0c52d6));
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256i ki = _mm256_castpd_si256(kd);
  const __m256d k = _mm256_sub_pd(kd, shift);
  const __m256d r = _mm256_fmsub_pd(inv_ln2_n, x, k);
  const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
  const __m256d z = _mm256_fmadd_pd(c0, r, c1);
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(r, c2, one);
  y = _mm256_fmadd_pd(z, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

// exp of eight floats on the main path.
inline __m256 exp8_main(__m256 xf) {
  const __m256d inv_ln2_n = _mm256_set1_pd(from_bits(0x40471547652b82fe));
  const __m256d shift = _mm256_set1_pd(from_bits(0x4338000000000000));
  const __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(xf));
  const __m256d x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(xf, 1));
  const __m256d kd0 = _mm256_fmadd_pd(inv_ln2_n, x0, shift);
  const __m256d kd1 = _mm256_fmadd_pd(inv_ln2_n, x1, shift);
  // The low 32 bits of the eight k's, in the order [k0 k1 k'0 k'1 | k2 k3 k'2 k'3] (k of x0,
  // k' of x1): what unpacking the looked-up halves below puts back in order.
  const __m256i idx = _mm256_castps_si256(
      _mm256_shuffle_ps(_mm256_castpd_ps(kd0), _mm256_castpd_ps(kd1), _MM_SHUFFLE(2, 0, 2, 0)));
  const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
  const __m256 bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 27));
  const __m256i lo = lookup32(kSplit.lo, idx, bit3, bit4);
  const __m256i hi = lookup32(kSplit.hi, idx, bit3, bit4);
  const __m256i t0 = _mm256_unpacklo_epi32(lo, hi);  // entries for k0 k1 | k2 k3
  const __m256i t1 = _mm256_unpackhi_epi32(lo, hi);  // entries for k'0 k'1 | k'2 k'3
  return _mm256_setr_m128(finish4(x0, kd0, t0), finish4(x1, kd1, t1));
}

// exp of eight floats, special cases included.
inline __m256 exp8(__m256 x) {
  const __m256 main = exp8_main(x);
  const __m256 overflow = _mm256_set1_ps(from_bits32(0x42b17217));       // 0x1.62e42ep6
  const __m256 underflow = _mm256_set1_ps(from_bits32(0xc2cff1b4));      // -0x1.9fe368p6
  const __m256 may_underflow = _mm256_set1_ps(from_bits32(0xc2ce8ecf));  // -0x1.9d1d9ep6
  const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(x, may_underflow, _CMP_GE_OQ),
                                        _mm256_cmp_ps(x, overflow, _CMP_LE_OQ));  // not nan
  if (_mm256_movemask_ps(in_range) == 0xff) return main;  // every lane on the main path
  __m256 y = main;
  y = _mm256_blendv_ps(y, _mm256_set1_ps(from_bits32(0x00000001)),  // 0x1p-149
                       _mm256_cmp_ps(x, may_underflow, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, underflow, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(from_bits32(0x7f800000)),  // +inf
                       _mm256_cmp_ps(x, overflow, _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return y;
}

// The same algorithm on AVX-512 registers, sixteen floats at a time (two registers of eight
// doubles): the same operations lane by lane, so the same bits (and std::exp's). The 32-entry
// table fits four registers, so the lookup is two two-register permutes and a blend on bit 4 of
// k, instead of eight permutes and six blends per eight values. Compiled for AVX-512 alone and
// run only when the CPU has it (the build stays x86-64-v3; see CMakeLists.txt on GCC 12 and
// AVX-512 constants): every constant comes from memory through `c`, a pointer the compiler
// cannot see through, as broadcasts.
// (GCC 12 warns that its own _mm512_undefined_* placeholders "may be used uninitialized", or
// "are used uninitialized", in these intrinsics' expansions: a known false positive, silenced
// for this block only.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
struct Exp512Constants {
  alignas(64) uint64_t table[32];
  double inv_ln2_n, shift, c0, c1, c2, one;
  float overflow, underflow, may_underflow, tiny, inf;
  uint64_t mask31, bit4;
};
const Exp512Constants kExp512 = {
    {kTable[0],  kTable[1],  kTable[2],  kTable[3],  kTable[4],  kTable[5],  kTable[6],
     kTable[7],  kTable[8],  kTable[9],  kTable[10], kTable[11], kTable[12], kTable[13],
     kTable[14], kTable[15], kTable[16], kTable[17], kTable[18], kTable[19], kTable[20],
     kTable[21], kTable[22], kTable[23], kTable[24], kTable[25], kTable[26], kTable[27],
     kTable[28], kTable[29], kTable[30], kTable[31]},
    from_bits(0x40471547652b82fe),
    from_bits(0x4338000000000000),
    from_bits(0x3ebc6af84b912394),
    from_bits(0x3f2ebfce50fac4f3),
    from_bits(0x3f962e42ff0c52d6),
    1.0,
    from_bits32(0x42b17217),
    from_bits32(0xc2cff1b4),
    from_bits32(0xc2ce8ecf),
    from_bits32(0x00000001),
    from_bits32(0x7f800000),
    31,
    16};

// Eight floats (as doubles) through the algorithm: kd, the lookup, p * s.
__attribute__((target("avx512f"))) inline __m256 exp8_512(__m512d x, const Exp512Constants* c,
                                                          __m512i t0, __m512i t1, __m512i t2,
                                                          __m512i t3) {
  const __m512d inv_ln2_n = _mm512_set1_pd(c->inv_ln2_n), shift = _mm512_set1_pd(c->shift);
  const __m512d kd = _mm512_fmadd_pd(inv_ln2_n, x, shift);
  const __m512i ki = _mm512_castpd_si512(kd);
  // permutex2var reads bits 0..3 of each index (entry and register); bit 4 picks the pair.
  const __m512i low = _mm512_permutex2var_epi64(t0, ki, t1);
  const __m512i high = _mm512_permutex2var_epi64(t2, ki, t3);
  const __mmask8 upper =
      _mm512_test_epi64_mask(ki, _mm512_set1_epi64(static_cast<int64_t>(c->bit4)));
  const __m512i t = _mm512_mask_blend_epi64(upper, low, high);
  const __m512d k = _mm512_sub_pd(kd, shift);
  const __m512d r = _mm512_fmsub_pd(inv_ln2_n, x, k);
  const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
  const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(c->c0), r, _mm512_set1_pd(c->c1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(c->c2), _mm512_set1_pd(c->one));
  y = _mm512_fmadd_pd(z, r2, y);
  return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

// exp of sixteen floats, special cases included (as exp8's).
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x, const Exp512Constants* c,
                                                       __m512i t0, __m512i t1, __m512i t2,
                                                       __m512i t3) {
  const __m256 lo = exp8_512(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), c, t0, t1, t2, t3);
  const __m256 hi =
      exp8_512(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))), c,
               t0, t1, t2, t3);
  const __m512 main = _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
  const __m512 overflow = _mm512_set1_ps(c->overflow);
  const __m512 may_underflow = _mm512_set1_ps(c->may_underflow);
  const __mmask16 in_range = _mm512_cmp_ps_mask(x, may_underflow, _CMP_GE_OQ) &
                             _mm512_cmp_ps_mask(x, overflow, _CMP_LE_OQ);  // not nan
  if (in_range == 0xffff) return main;
  __m512 y = main;
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, may_underflow, _CMP_LT_OQ), y,
                           _mm512_set1_ps(c->tiny));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(c->underflow), _CMP_LT_OQ), y,
                           _mm512_setzero_ps());
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, overflow, _CMP_GT_OQ), y, _mm512_set1_ps(c->inf));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, _mm512_add_ps(x, x));
  return y;
}

__attribute__((target("avx512f"), noinline)) void exp_row_avx512(const float* x, float m, float* y,
                                                                 int64_t n,
                                                                 const Exp512Constants* c) {
  const __m512i t0 = _mm512_load_si512(c->table), t1 = _mm512_load_si512(c->table + 8);
  const __m512i t2 = _mm512_load_si512(c->table + 16), t3 = _mm512_load_si512(c->table + 24);
  const __m512 mv = _mm512_set1_ps(m);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    _mm512_storeu_ps(y + j, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), mv), c, t0, t1, t2, t3));
  }
  if (j < n) {  // the tail: lanes past n hold m (exp(0)) and are not written back
    const __mmask16 live = static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 in = _mm512_mask_loadu_ps(mv, live, x + j);
    _mm512_mask_storeu_ps(y + j, live, exp16(_mm512_sub_ps(in, mv), c, t0, t1, t2, t3));
  }
}

// vec_lane_sum's total of its eight lanes (reduce_kernels.h) for a row of `row` values: in its
// shuffle order when the row fills them, else left to right.
inline float add_lanes(__m256 lanes, int64_t row) {
  alignas(32) float a[8];
  _mm256_store_ps(a, lanes);
  if (row >= 8) return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
  float total = a[0];
  for (int64_t k = 1; k < row; ++k) total += a[k];
  return total;
}

// softmax_row (exp.h) on sixteen lanes: the divide-and-max pass, then exp with vec_lane_sum's
// eight running sums taken from the registers as they are stored (the low eight lanes, then the
// high eight: element j into sum j mod 8, in order of j), then the scaling pass and the zeros.
// Lanes past `valid` are loaded as m (exp(0) = 1) and zeroed before the sums: adding +0 to a sum
// of exps (never -0) changes nothing.
__attribute__((target("avx512f"), noinline)) void softmax_row_avx512(float* x, float divisor,
                                                                     int64_t valid, int64_t row,
                                                                     int64_t width, float* max_out,
                                                                     float* inverse_out,
                                                                     const Exp512Constants* c) {
  const __m512i t0 = _mm512_load_si512(c->table), t1 = _mm512_load_si512(c->table + 8);
  const __m512i t2 = _mm512_load_si512(c->table + 16), t3 = _mm512_load_si512(c->table + 24);
  const __m512 d = _mm512_set1_ps(divisor);
  const float minus_inf = -c->inf;
  const int64_t whole = valid - valid % 16;
  const auto live = static_cast<__mmask16>((1u << (valid - whole)) - 1);  // the tail's lanes
  // x = x / divisor, m = max x (as divide_max_row: `q > m ? q : m`, a nan skipped)
  __m512 m16 = _mm512_set1_ps(minus_inf);
  for (int64_t j = 0; j < whole; j += 16) {
    const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x + j), d);
    _mm512_storeu_ps(x + j, q);
    m16 = _mm512_max_ps(q, m16);
  }
  if (live != 0) {
    const __m512 q = _mm512_div_ps(_mm512_maskz_loadu_ps(live, x + whole), d);
    _mm512_mask_storeu_ps(x + whole, live, q);
    m16 = _mm512_mask_max_ps(m16, live, q, m16);
  }
  // No lane holds a nan (a nan q leaves its lane as it was), so the lanes' max in any order is
  // the row's, up to the sign of a zero, which exp(x - m) does not see.
  const __m256 m8 =
      _mm256_max_ps(_mm512_castps512_ps256(m16),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(m16), 1)));
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float m = _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
  // e = exp(x - m), s = vec_lane_sum(e, valid, row)
  const __m512 mv = _mm512_set1_ps(m);
  __m256 sums = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), mv), c, t0, t1, t2, t3);
    _mm512_storeu_ps(x + j, e);
    sums = _mm256_add_ps(sums, _mm512_castps512_ps256(e));
    sums = _mm256_add_ps(sums, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
  if (live != 0) {
    const __m512 in = _mm512_mask_loadu_ps(mv, live, x + whole);
    const __m512 e = _mm512_maskz_mov_ps(live, exp16(_mm512_sub_ps(in, mv), c, t0, t1, t2, t3));
    _mm512_mask_storeu_ps(x + whole, live, e);
    sums = _mm256_add_ps(sums, _mm512_castps512_ps256(e));
    sums = _mm256_add_ps(sums, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
  const float s = add_lanes(sums, row);
  // x = e * (1 / s), zeros after the row's valid part
  const float inverse = 1.0f / s;
  const __m512 iv = _mm512_set1_ps(inverse);
  for (int64_t j = 0; j < whole; j += 16) {
    _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), iv));
  }
  if (live != 0) {
    _mm512_mask_storeu_ps(x + whole, live,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(live, x + whole), iv));
  }
  std::fill(x + valid, x + width, 0.0f);
  *max_out = m;
  *inverse_out = inverse;
}

// softmax_weights_row (exp.h) on sixteen lanes: one pass of divide, exp, scale; then the zeros.
__attribute__((target("avx512f"), noinline)) void softmax_weights_row_avx512(
    float* x, float divisor, float m, float inverse, int64_t valid, int64_t width,
    const Exp512Constants* c) {
  const __m512i t0 = _mm512_load_si512(c->table), t1 = _mm512_load_si512(c->table + 8);
  const __m512i t2 = _mm512_load_si512(c->table + 16), t3 = _mm512_load_si512(c->table + 24);
  const __m512 d = _mm512_set1_ps(divisor), mv = _mm512_set1_ps(m);
  const __m512 iv = _mm512_set1_ps(inverse);
  const int64_t whole = valid - valid % 16;
  for (int64_t j = 0; j < whole; j += 16) {
    const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x + j), d);
    _mm512_storeu_ps(x + j, _mm512_mul_ps(exp16(_mm512_sub_ps(q, mv), c, t0, t1, t2, t3), iv));
  }
  const auto live = static_cast<__mmask16>((1u << (valid - whole)) - 1);
  if (live != 0) {  // lanes past valid are computed from zeros and not stored
    const __m512 q = _mm512_div_ps(_mm512_maskz_loadu_ps(live, x + whole), d);
    _mm512_mask_storeu_ps(x + whole, live,
                          _mm512_mul_ps(exp16(_mm512_sub_ps(q, mv), c, t0, t1, t2, t3), iv));
  }
  std::fill(x + valid, x + width, 0.0f);
}

// softmax_backward_row (exp.h): vec_lane_dot's eight running sums on eight-float registers
// (the first eight products rounded, every later one added with an fma; a partial group's
// lanes past `valid` keep their sums through a blend, as the scalar loop leaves them), then
// dS on sixteen lanes.
__attribute__((target("avx512f"), noinline)) void softmax_backward_row_avx512(
    float* g, const float* w, float divisor, int64_t valid, int64_t row, int64_t width) {
  // Partial groups through zero-padded copies; lanes past `valid` keep their sums by a blend
  // whose mask is built in memory (no vector constants in AVX-512 code, see exp16).
  auto partial = [](const float* x, int64_t count) {
    alignas(32) float buffer[8] = {};
    std::copy_n(x, count, buffer);
    return _mm256_load_ps(buffer);
  };
  __m256 acc;
  if (valid >= 8) {
    acc = _mm256_mul_ps(_mm256_loadu_ps(g), _mm256_loadu_ps(w));
  } else {  // 0 * 0 = +0 in the unused lanes, as their sums start
    acc = _mm256_mul_ps(partial(g, valid), partial(w, valid));
  }
  int64_t k = 8;
  for (; k + 8 <= valid; k += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(g + k), _mm256_loadu_ps(w + k), acc);
  }
  if (k < valid) {
    alignas(32) int32_t live[8];
    for (int64_t j = 0; j < 8; ++j) live[j] = j < valid - k ? -1 : 0;
    const __m256 sum = _mm256_fmadd_ps(partial(g + k, valid - k), partial(w + k, valid - k), acc);
    acc = _mm256_blendv_ps(acc, sum, _mm256_load_ps(reinterpret_cast<const float*>(live)));
  }
  const float d = add_lanes(acc, row);
  const __m512 dv = _mm512_set1_ps(d), q = _mm512_set1_ps(divisor);
  const int64_t whole = valid - valid % 16;
  for (int64_t j = 0; j < whole; j += 16) {
    const __m512 da =
        _mm512_mul_ps(_mm512_loadu_ps(w + j), _mm512_sub_ps(_mm512_loadu_ps(g + j), dv));
    _mm512_storeu_ps(g + j, _mm512_div_ps(da, q));
  }
  const auto tail = static_cast<__mmask16>((1u << (valid - whole)) - 1);
  if (tail != 0) {
    const __m512 da = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, w + whole),
                                    _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, g + whole), dv));
    _mm512_mask_storeu_ps(g + whole, tail, _mm512_div_ps(da, q));
  }
  std::fill(g + valid, g + width, 0.0f);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool cpu_has_avx512() {
  static const bool has = use_avx512();  // core/kernels/cpu.h (EMBER_CPU_CAPABILITY=avx2)
  return has;
}
#endif

}  // namespace

void exp_row(const float* x, float m, float* y, int64_t n) {
  int64_t j = 0;
#ifdef EMBER_EXP_X86
  if (n >= 16 && cpu_has_avx512()) {
    // (The pointer goes through an empty asm, so that the constants are loads, not folded.)
    const Exp512Constants* c = &kExp512;
    asm("" : "+r"(c));
    exp_row_avx512(x, m, y, n, c);
    return;
  }
  const __m256 mv = _mm256_set1_ps(m);
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(y + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv)));
  }
  if (j < n) {  // the tail through a full register: padded with m, written back in part
    alignas(32) float in[8] = {m, m, m, m, m, m, m, m}, out[8];
    std::memcpy(in, x + j, sizeof(float) * static_cast<std::size_t>(n - j));
    _mm256_store_ps(out, exp8(_mm256_sub_ps(_mm256_load_ps(in), mv)));
    std::memcpy(y + j, out, sizeof(float) * static_cast<std::size_t>(n - j));
  }
#else
  for (; j < n; ++j) y[j] = std::exp(x[j] - m);
#endif
}

float divide_max_row(float* x, float divisor, int64_t n) {
  float max = -INFINITY;
  int64_t j = 0;
#ifdef EMBER_EXP_X86
  // Eight running maxima. _mm256_max_ps(q, m) is `q > m ? q : m` lane by lane (a nan q gives
  // m); the maximum of a set does not depend on the order it is taken in (but for the sign of
  // a zero, which exp(x - max) does not see).
  const __m256 d = _mm256_set1_ps(divisor);
  __m256 m = _mm256_set1_ps(max);
  for (; j + 8 <= n; j += 8) {
    const __m256 q = _mm256_div_ps(_mm256_loadu_ps(x + j), d);
    _mm256_storeu_ps(x + j, q);
    m = _mm256_max_ps(q, m);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  for (float v : lanes) max = v > max ? v : max;
#endif
  for (; j < n; ++j) {
    x[j] = x[j] / divisor;
    max = x[j] > max ? x[j] : max;
  }
  return max;
}

void softmax_row(float* x, float divisor, int64_t valid, int64_t row, int64_t width, float* max,
                 float* inverse) {
#ifdef EMBER_EXP_X86
  if (cpu_has_avx512()) {
    const Exp512Constants* c = &kExp512;
    asm("" : "+r"(c));
    softmax_row_avx512(x, divisor, valid, row, width, max, inverse, c);
    return;
  }
#endif
  softmax_row_steps(x, divisor, valid, row, width, max, inverse);
}

void softmax_weights_row(float* x, float divisor, float max, float inverse, int64_t valid,
                         int64_t width) {
#ifdef EMBER_EXP_X86
  if (cpu_has_avx512()) {
    const Exp512Constants* c = &kExp512;
    asm("" : "+r"(c));
    softmax_weights_row_avx512(x, divisor, max, inverse, valid, width, c);
    return;
  }
#endif
  softmax_weights_row_steps(x, divisor, max, inverse, valid, width);
}

void softmax_backward_row(float* g, const float* w, float divisor, int64_t valid, int64_t row,
                          int64_t width) {
#ifdef EMBER_EXP_X86
  if (cpu_has_avx512()) {
    softmax_backward_row_avx512(g, w, divisor, valid, row, width);
    return;
  }
#endif
  softmax_backward_row_steps(g, w, divisor, valid, row, width);
}

}  // namespace ember::kernels
