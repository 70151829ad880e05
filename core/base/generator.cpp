// PyTorch 1.13's CPU generator and its sampling kernels; see core/base/generator.h, which names "the
// doc" (the notes on PyTorch's RNG whose § numbers appear below).
//
// Like every file (see CMakeLists.txt), this one is compiled with -ffp-contract=off: PyTorch's x86
// build lets GCC fuse some multiply-adds, and which ones matters to the last bit. Every fusion
// PyTorch gets is written out below as std::fma / std::fmaf; every other operation must stay
// unfused.
#include "core/base/generator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/base/cpu.h"
#include "core/base/error.h"

namespace ember {

// ---------------------------------------------------------------------------------------------
// The MT19937 engine (doc §1.2). It is the textbook MT19937: the same outputs as
// std::mt19937(seed & 0xFFFFFFFF).

namespace {
constexpr uint32_t kMatrixA = 0x9908B0DFu;
constexpr uint32_t kUpperMask = 0x80000000u;
constexpr uint32_t kLowerMask = 0x7FFFFFFFu;
}  // namespace

Generator::Generator(uint64_t seed) { manual_seed(seed); }

Generator::Generator(const Generator& other) { *this = other; }

Generator& Generator::operator=(const Generator& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mutex_, other.mutex_);
  next_double_normal_sample = other.next_double_normal_sample;
  next_float_normal_sample = other.next_float_normal_sample;
  initial_seed_ = other.initial_seed_;
  state_ = other.state_;
  left_ = other.left_;
  next_ = other.next_;
  return *this;
}

std::vector<int64_t> Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> out(state_.begin(), state_.end());
  out.push_back(left_);
  out.push_back(next_);
  out.push_back(static_cast<int64_t>(initial_seed_));
  double d = next_double_normal_sample.value_or(0.0);
  float f = next_float_normal_sample.value_or(0.0f);
  int64_t d_bits = 0;
  int32_t f_bits = 0;
  std::memcpy(&d_bits, &d, sizeof d);
  std::memcpy(&f_bits, &f, sizeof f);
  out.push_back(next_double_normal_sample.has_value());
  out.push_back(d_bits);
  out.push_back(next_float_normal_sample.has_value());
  out.push_back(f_bits);
  out.push_back(0);  // a version for future layouts
  return out;
}

void Generator::set_state(const std::vector<int64_t>& state) {
  constexpr std::size_t kSize = kStateSize + 8;
  check(state.size() == kSize, "Generator::set_state: expected ", kSize, " values, got ",
        state.size());
  for (int i = 0; i < kStateSize; ++i)
    check(state[static_cast<std::size_t>(i)] >= 0 &&
              state[static_cast<std::size_t>(i)] <= 0xFFFFFFFFLL,
          "Generator::set_state: word ", i, " is not a 32-bit value");
  const int64_t left = state[kStateSize], next = state[kStateSize + 1];
  check(left >= 1 && left <= kStateSize + 1 && next >= 0 && next <= kStateSize &&
            state[kSize - 1] == 0,
        "Generator::set_state: not a state from get_state (position ", left, ", ", next, ")");
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < kStateSize; ++i)
    state_[static_cast<std::size_t>(i)] = static_cast<uint32_t>(state[static_cast<std::size_t>(i)]);
  left_ = static_cast<int>(left);
  next_ = static_cast<int>(next);
  initial_seed_ = static_cast<uint64_t>(state[kStateSize + 2]);
  double d = 0;
  float f = 0;
  const int64_t d_bits = state[kStateSize + 4];
  const auto f_bits = static_cast<int32_t>(state[kStateSize + 6]);
  std::memcpy(&d, &d_bits, sizeof d);
  std::memcpy(&f, &f_bits, sizeof f);
  next_double_normal_sample = state[kStateSize + 3] ? std::optional<double>(d) : std::nullopt;
  next_float_normal_sample = state[kStateSize + 5] ? std::optional<float>(f) : std::nullopt;
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  // CPUGeneratorImpl::set_current_seed (doc §1.1): empty the caches, then re-seed the engine
  // with the LOW 32 bits only; the full seed is remembered for initial_seed().
  next_double_normal_sample.reset();
  next_float_normal_sample.reset();
  initial_seed_ = seed;
  state_[0] = static_cast<uint32_t>(seed & 0xFFFFFFFFu);
  for (int j = 1; j < kStateSize; ++j) {
    const uint32_t prev = state_[j - 1];
    state_[j] = 1812433253u * (prev ^ (prev >> 30)) + static_cast<uint32_t>(j);
  }
  left_ = 1;  // the first random() twists
  next_ = 0;
}

namespace {

// One word of the twist: word i from words i, i + 1 and i + 397 (indices mod 624).
inline uint32_t twisted(uint32_t word, uint32_t next, uint32_t far) {
  const uint32_t y = (word & kUpperMask) | (next & kLowerMask);
  return far ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
}

inline uint32_t tempered(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9D2C5680u;
  y ^= (y << 15) & 0xEFC60000u;
  y ^= y >> 18;
  return y;
}

// The textbook twist, word by word, in place: word i reads word i + 397 before it is rewritten
// (i < 227) and after (i >= 227, where (i + 397) mod 624 = i - 227).
void twist_scalar(uint32_t* s, int n, int shift) {
  for (int i = 0; i < n; ++i) s[i] = twisted(s[i], s[(i + 1) % n], s[(i + shift) % n]);
}

void temper_scalar(const uint32_t* s, uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = tempered(s[i]);
}

#if defined(__x86_64__)
// Fast path: the same twist eight words at a time. Word i depends on words i + 1 and i + 397
// (old values) or i - 227 (new values), never on words i + 1 .. i + 7 rewritten in the same
// step, so eight consecutive words can be computed together; the few words around the two
// boundaries (227 and 623) are done one by one as above.
__attribute__((target("avx2"))) inline __m256i twisted8(__m256i word, __m256i next, __m256i far) {
  const __m256i y = _mm256_or_si256(_mm256_and_si256(word, _mm256_set1_epi32(kUpperMask)),
                                    _mm256_and_si256(next, _mm256_set1_epi32(kLowerMask)));
  // (y & 1) ? kMatrixA : 0, as a mask: 0 - (y & 1) is all ones or all zeros.
  const __m256i odd =
      _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_and_si256(y, _mm256_set1_epi32(1)));
  const __m256i mag = _mm256_and_si256(odd, _mm256_set1_epi32(static_cast<int>(kMatrixA)));
  return _mm256_xor_si256(far, _mm256_xor_si256(_mm256_srli_epi32(y, 1), mag));
}

__attribute__((target("avx2"))) inline __m256i load8(const uint32_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

__attribute__((target("avx2"))) void twist_avx2(uint32_t* s, int n, int shift) {
  const int first = n - shift;  // 227 words read an old word i + 397
  int i = 0;
  for (; i + 8 <= first; i += 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + i),
                        twisted8(load8(s + i), load8(s + i + 1), load8(s + i + shift)));
  }
  for (; i < first; ++i) s[i] = twisted(s[i], s[i + 1], s[i + shift]);
  for (; i + 8 <= n - 1; i += 8) {  // words i - 227 .. i - 220 are already new
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + i),
                        twisted8(load8(s + i), load8(s + i + 1), load8(s + i - first)));
  }
  for (; i < n; ++i) s[i] = twisted(s[i], s[(i + 1) % n], s[(i + shift) % n]);
}

__attribute__((target("avx2"))) void temper_avx2(const uint32_t* s, uint32_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    y = _mm256_xor_si256(y, _mm256_srli_epi32(y, 11));
    y = _mm256_xor_si256(y,
                         _mm256_and_si256(_mm256_slli_epi32(y, 7), _mm256_set1_epi32(0x9D2C5680)));
    y = _mm256_xor_si256(y,
                         _mm256_and_si256(_mm256_slli_epi32(y, 15), _mm256_set1_epi32(0xEFC60000)));
    y = _mm256_xor_si256(y, _mm256_srli_epi32(y, 18));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), y);
  }
  temper_scalar(s + i, out + i, n - i);
}
#endif

}  // namespace

namespace random_fill::detail {
bool has_avx2_fma() { return cpu::has_avx2_fma(); }  // core/base/cpu.h
}  // namespace random_fill::detail

void Generator::twist() {
#if defined(__x86_64__)
  if (random_fill::detail::has_avx2_fma()) {
    twist_avx2(state_.data(), kStateSize, kShift);
    left_ = kStateSize;
    next_ = 0;
    return;
  }
#endif
  twist_scalar(state_.data(), kStateSize, kShift);
  left_ = kStateSize;
  next_ = 0;
}

uint32_t Generator::random() {
  if (--left_ == 0) twist();
  return tempered(state_[next_++]);
}

void Generator::random_block(uint32_t* out, int64_t n) {
  while (n > 0) {
    // random() twists when left_ reaches 0 and then reads word 0; here the twist comes first and
    // left_ = 625 makes the next 624 words readable, after which the state is exactly the one
    // 624 random() calls would leave.
    if (left_ == 1) {
      twist();
      left_ = kStateSize + 1;
    }
    const int64_t k = std::min<int64_t>(n, left_ - 1);
#if defined(__x86_64__)
    if (random_fill::detail::has_avx2_fma()) {
      temper_avx2(state_.data() + next_, out, k);
    } else {
      temper_scalar(state_.data() + next_, out, k);
    }
#else
    temper_scalar(state_.data() + next_, out, k);
#endif
    next_ += static_cast<int>(k);
    left_ -= static_cast<int>(k);
    out += k;
    n -= k;
  }
}

uint64_t Generator::random64() {
  // Doc §1.3: the high word is drawn first.
  const uint64_t hi = random();
  const uint64_t lo = random();
  return (hi << 32) | lo;
}

Generator& default_generator() {
  static Generator generator(Generator::kDefaultSeed);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace random_fill {

namespace {

// ---------------------------------------------------------------------------------------------
// Uniform numbers in [0, 1) (doc §2, transformation::uniform_real).

// double: the low 53 bits of one random64() (two draws), times 2^-53. Exact.
double uniform53(Generator& g) {
  return static_cast<double>(g.random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
}

// float: the LOW 24 bits of one random(), times 2^-24. Exact.

// The uniforms in bulk, for the fills: f(i, u) for the i-th of n uniforms, i = 0 .. n-1,
// in stream order. The raw outputs come kChunk at a time from random_block (eight at a time
// with AVX2) instead of one random() call each; the numbers are the same.
constexpr int64_t kChunk = 1024;

template <typename F>
void for_each_uniform24(int64_t n, Generator& g, F f) {
  uint32_t bits[kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    g.random_block(bits, m);
    for (int64_t i = 0; i < m; ++i) {
      // (int32, not uint32: the value is below 2^24 either way, and int32 converts faster.)
      f(start + i, static_cast<float>(static_cast<int32_t>(bits[i] & 0x00FFFFFFu)) * 0x1p-24f);
    }
  }
}

template <typename F>
void for_each_uniform53(int64_t n, Generator& g, F f) {
  uint32_t bits[2 * kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    g.random_block(bits, 2 * m);
    for (int64_t i = 0; i < m; ++i) {
      const uint64_t r = (uint64_t{bits[2 * i]} << 32) | bits[2 * i + 1];  // high word first
      f(start + i,
        static_cast<double>(static_cast<int64_t>(r & ((uint64_t{1} << 53) - 1))) * 0x1p-53);
    }
  }
}

void fill_uniform24(float* data, int64_t n, Generator& g) {
  for_each_uniform24(n, g, [data](int64_t i, float u) { data[i] = u; });
}

void fill_uniform53(double* data, int64_t n, Generator& g) {
  for_each_uniform53(n, g, [data](int64_t i, double u) { data[i] = u; });
}

// ---------------------------------------------------------------------------------------------
// The float32 log, sin and cos of PyTorch's AVX2 normal kernel (avx_mathfun.h, Cephes-style),
// ported lane by lane to scalar code (doc §3.4). The eight AVX2 lanes are independent, so this
// port is exact. The intrinsics are plain multiplies and adds in the source, but GCC (with -mfma
// and its default -ffp-contract=fast) fuses some of them; the std::fmaf calls below are exactly
// those fusions.

float float_from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

// Natural log for x in (0, 1], the only inputs the normal kernel gives it.
float avx2_log(float x) {
  const float kSqrtHalf = float_from_bits(0x3F3504F3);  // cephes_SQRTHF
  const float kP[9] = {
      float_from_bits(0x3D9021BB), float_from_bits(0xBDEBD1B8), float_from_bits(0x3DEF251A),
      float_from_bits(0xBDFE5D4F), float_from_bits(0x3E11E9BF), float_from_bits(0xBE2AAE50),
      float_from_bits(0x3E4CCEAC), float_from_bits(0xBE7FFFFC), float_from_bits(0x3EAAAAAA)};
  const float kQ1 = float_from_bits(0xB95E8083);  // -2.12194440e-4
  const float kQ2 = float_from_bits(0x3F318000);  // 0.693359375

  // The original returns NaN for x <= 0 and raises denormals to the smallest normal float.
  if (!(x > 0.0f)) return std::numeric_limits<float>::quiet_NaN();
  x = std::fmax(x, std::numeric_limits<float>::min());

  // Split x = m * 2^e with the mantissa m in [0.5, 1).
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  float exponent = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127) + 1.0f;
  const float mantissa = float_from_bits((bits & ~0x7F800000u) | 0x3F000000u);

  // If m < sqrt(1/2), use 2m - 1 and one less in the exponent; the original computes 2m - 1
  // as (m - 1) + m, and otherwise m - 1 (the + 0 it adds changes nothing).
  float t = mantissa - 1.0f;
  if (mantissa < kSqrtHalf) {
    exponent = exponent - 1.0f;
    t = t + mantissa;
  }

  const float t2 = t * t;
  float y = kP[0];
  for (int k = 1; k < 9; ++k) y = std::fmaf(y, t, kP[k]);  // Horner, fused
  y = y * t;
  y = std::fmaf(y, t2, exponent * kQ1);  // exponent * kQ1 is rounded first
  y = y - t2 * 0.5f;
  return (t + y) + exponent * kQ2;  // exponent * kQ2 is exact
}

// sin and cos of t, for t in [0, 2*pi) here (the sign handling of the original is kept).
void avx2_sincos(float t, float& sin_out, float& cos_out) {
  const float kFourOverPi = float_from_bits(0x3FA2F983);  // cephes_FOPI
  // minus_cephes_DP1..3: -pi/4 split in three parts, for the argument reduction.
  const float kMinusDP1 = float_from_bits(0xBF490000);
  const float kMinusDP2 = float_from_bits(0xB97DA000);
  const float kMinusDP3 = float_from_bits(0xB3222169);
  const float kCos0 = float_from_bits(0x37CCF5CE);
  const float kCos1 = float_from_bits(0xBAB6061A);
  const float kCos2 = float_from_bits(0x3D2AAAA5);
  const float kSin0 = float_from_bits(0xB94CA1F9);
  const float kSin1 = float_from_bits(0x3C08839E);
  const float kSin2 = float_from_bits(0xBE2AAAA3);
  constexpr uint32_t kSignBit = 0x80000000u;

  uint32_t sign_sin = std::bit_cast<uint32_t>(t) & kSignBit;
  float x = std::fabs(t);

  // j = the octant, rounded up to even (cvttps truncates toward zero).
  int32_t j = static_cast<int32_t>(x * kFourOverPi);
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  const uint32_t swap_sign_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool sine_poly_is_sin = (j & 2) == 0;

  // x - j * pi/4 in three steps, fused by GCC. (Unfused, 3 of the 2^24 possible thetas differ.)
  x = std::fmaf(y, kMinusDP1, x);
  x = std::fmaf(y, kMinusDP2, x);
  x = std::fmaf(y, kMinusDP3, x);

  const uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= swap_sign_sin;

  const float z = x * x;
  // The cosine polynomial on [-pi/4, pi/4].
  float cos_poly = std::fmaf(kCos0, z, kCos1);
  cos_poly = std::fmaf(cos_poly, z, kCos2);
  cos_poly = cos_poly * z;
  cos_poly = std::fmaf(cos_poly, z, -(z * 0.5f));
  cos_poly = cos_poly + 1.0f;
  // The sine polynomial on [-pi/4, pi/4].
  float sin_poly = std::fmaf(kSin0, z, kSin1);
  sin_poly = std::fmaf(sin_poly, z, kSin2);
  sin_poly = sin_poly * z;
  sin_poly = std::fmaf(sin_poly, x, x);

  // The original selects with masks and adds the unselected lane's +0, which turns -0 into +0.
  const float sin_value = (sine_poly_is_sin ? sin_poly : cos_poly) + 0.0f;
  const float cos_value = (sine_poly_is_sin ? cos_poly : sin_poly) + 0.0f;
  sin_out = std::bit_cast<float>(std::bit_cast<uint32_t>(sin_value) ^ sign_sin);
  cos_out = std::bit_cast<float>(std::bit_cast<uint32_t>(cos_value) ^ sign_cos);
}

// ---------------------------------------------------------------------------------------------
// The vectorised normal path (doc §3.3): Box-Muller on blocks of 16 uniforms, pairing slot j
// with slot j + 8.

}  // namespace

// float32: normal_fill_16_AVX2 (doc §3.4). mean and stddev arrive already cast to float.
void detail::normal_block16_scalar(float* d, float mean, float stddev) {
  const float kTwoPi = float_from_bits(0x40C90FDB);  // (float)(2 * pi)
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - d[j];  // [0, 1) -> (0, 1] for the log; exact
    const float u2 = d[j + 8];
    const float radius = std::sqrt(-2.0f * avx2_log(u1));
    const float theta = kTwoPi * u2;
    float sin_theta = 0.0f;
    float cos_theta = 0.0f;
    avx2_sincos(theta, sin_theta, cos_theta);
    d[j] = std::fmaf(radius * cos_theta, stddev, mean);  // _mm256_fmadd_ps in the source
    d[j + 8] = std::fmaf(radius * sin_theta, stddev, mean);
  }
}

#if defined(__x86_64__)
namespace {
// (Helpers, not lambdas: a lambda does not inherit its function's target attribute.)
__attribute__((target("avx2"))) inline __m256 splat(uint32_t bits) {
  return _mm256_set1_ps(float_from_bits(bits));
}
__attribute__((target("avx2"))) inline __m256i as_int(__m256 x) { return _mm256_castps_si256(x); }
__attribute__((target("avx2"))) inline __m256 as_float(__m256i x) { return _mm256_castsi256_ps(x); }
}  // namespace

// Fast path: the same block with the eight lanes in one AVX2 register, as PyTorch runs it. The
// operations are those of the scalar port above, one for one (a std::fmaf there is an
// _mm256_fmadd_ps here), so the bits are the same (tests/core/base/test_generator.cpp checks every
// possible uniform).
__attribute__((target("avx2,fma"))) void detail::normal_block16_avx2(float* d, float mean,
                                                                     float stddev) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 u1 = _mm256_sub_ps(one, _mm256_loadu_ps(d));  // (0, 1]
  const __m256 u2 = _mm256_loadu_ps(d + 8);

  // ---- avx2_log(u1) ----
  const __m256 invalid = _mm256_cmp_ps(u1, _mm256_setzero_ps(), _CMP_LE_OQ);  // NaN lanes
  __m256 x = _mm256_max_ps(u1, _mm256_set1_ps(std::numeric_limits<float>::min()));
  const __m256i biased = _mm256_srli_epi32(as_int(x), 23);
  __m256 exponent =
      _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(biased, _mm256_set1_epi32(127))), one);
  const __m256 mantissa = as_float(_mm256_or_si256(
      _mm256_and_si256(as_int(x), _mm256_set1_epi32(static_cast<int>(~0x7F800000u))),
      _mm256_set1_epi32(0x3F000000)));
  const __m256 small = _mm256_cmp_ps(mantissa, splat(0x3F3504F3), _CMP_LT_OS);  // m < sqrt(1/2)
  exponent = _mm256_sub_ps(exponent, _mm256_and_ps(one, small));
  __m256 t = _mm256_add_ps(_mm256_sub_ps(mantissa, one), _mm256_and_ps(mantissa, small));
  const __m256 t2 = _mm256_mul_ps(t, t);
  const uint32_t kP[9] = {0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A, 0xBDFE5D4F, 0x3E11E9BF,
                          0xBE2AAE50, 0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA};
  __m256 y = splat(kP[0]);
  for (int k = 1; k < 9; ++k) y = _mm256_fmadd_ps(y, t, splat(kP[k]));
  y = _mm256_mul_ps(y, t);
  y = _mm256_fmadd_ps(y, t2, _mm256_mul_ps(exponent, splat(0xB95E8083)));
  y = _mm256_sub_ps(y, _mm256_mul_ps(t2, _mm256_set1_ps(0.5f)));
  __m256 log_u1 = _mm256_add_ps(_mm256_add_ps(t, y), _mm256_mul_ps(exponent, splat(0x3F318000)));
  log_u1 = _mm256_or_ps(log_u1, invalid);
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log_u1));

  // ---- avx2_sincos(2 pi u2) ----
  const __m256 theta = _mm256_mul_ps(splat(0x40C90FDB), u2);
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  __m256i sign_sin = _mm256_and_si256(as_int(theta), sign_bit);
  __m256 xr = as_float(_mm256_andnot_si256(sign_bit, as_int(theta)));  // |theta|
  __m256i j = _mm256_cvttps_epi32(_mm256_mul_ps(xr, splat(0x3FA2F983)));
  j = _mm256_and_si256(_mm256_add_epi32(j, _mm256_set1_epi32(1)), _mm256_set1_epi32(~1));
  const __m256 jf = _mm256_cvtepi32_ps(j);
  const __m256i swap_sign_sin = _mm256_slli_epi32(_mm256_and_si256(j, _mm256_set1_epi32(4)), 29);
  const __m256 sine_poly_is_sin = as_float(
      _mm256_cmpeq_epi32(_mm256_and_si256(j, _mm256_set1_epi32(2)), _mm256_setzero_si256()));
  xr = _mm256_fmadd_ps(jf, splat(0xBF490000), xr);
  xr = _mm256_fmadd_ps(jf, splat(0xB97DA000), xr);
  xr = _mm256_fmadd_ps(jf, splat(0xB3222169), xr);
  const __m256i sign_cos = _mm256_slli_epi32(
      _mm256_andnot_si256(_mm256_sub_epi32(j, _mm256_set1_epi32(2)), _mm256_set1_epi32(4)), 29);
  sign_sin = _mm256_xor_si256(sign_sin, swap_sign_sin);
  const __m256 z = _mm256_mul_ps(xr, xr);
  __m256 cos_poly = _mm256_fmadd_ps(splat(0x37CCF5CE), z, splat(0xBAB6061A));
  cos_poly = _mm256_fmadd_ps(cos_poly, z, splat(0x3D2AAAA5));
  cos_poly = _mm256_mul_ps(cos_poly, z);
  cos_poly = _mm256_fmsub_ps(cos_poly, z, _mm256_mul_ps(z, _mm256_set1_ps(0.5f)));
  cos_poly = _mm256_add_ps(cos_poly, one);
  __m256 sin_poly = _mm256_fmadd_ps(splat(0xB94CA1F9), z, splat(0x3C08839E));
  sin_poly = _mm256_fmadd_ps(sin_poly, z, splat(0xBE2AAAA3));
  sin_poly = _mm256_mul_ps(sin_poly, z);
  sin_poly = _mm256_fmadd_ps(sin_poly, xr, xr);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 sin_value =
      _mm256_add_ps(_mm256_blendv_ps(cos_poly, sin_poly, sine_poly_is_sin), zero);
  const __m256 cos_value =
      _mm256_add_ps(_mm256_blendv_ps(sin_poly, cos_poly, sine_poly_is_sin), zero);
  const __m256 sin_theta = as_float(_mm256_xor_si256(as_int(sin_value), sign_sin));
  const __m256 cos_theta = as_float(_mm256_xor_si256(as_int(cos_value), sign_cos));

  const __m256 vstd = _mm256_set1_ps(stddev), vmean = _mm256_set1_ps(mean);
  _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_mul_ps(radius, cos_theta), vstd, vmean));
  _mm256_storeu_ps(d + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, sin_theta), vstd, vmean));
}
#else
void detail::normal_block16_avx2(float*, float, float) {
  fail("normal_block16_avx2: not an x86-64 build");
}
#endif

namespace {

// The block the float32 path runs: PyTorch's AVX2 arithmetic, in AVX2 when the CPU has it.
void normal_block16_f32(float* d, float mean, float stddev) {
  if (detail::has_avx2_fma()) {
    detail::normal_block16_avx2(d, mean, stddev);
  } else {
    detail::normal_block16_scalar(d, mean, stddev);
  }
}

// float64: normal_fill_16<double> (doc §3.5), in double with libm. GCC fuses
// `radius * cos(theta) * stddev + mean` into fma(radius * cos(theta), stddev, mean).
void normal_block16_libm(double* d, double mean, double stddev) {
  const double kTwoPi = 2.0 * std::numbers::pi;
  for (int j = 0; j < 8; ++j) {
    const double u1 = 1.0 - d[j];
    const double u2 = d[j + 8];
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double theta = kTwoPi * u2;
    d[j] = std::fma(radius * std::cos(theta), stddev, mean);
    d[j + 8] = std::fma(radius * std::sin(theta), stddev, mean);
  }
}

// normal_fill (doc §3.3): n >= 16 uniforms, then every full block of 16 in place. If n is not a
// multiple of 16, the LAST 16 slots (overlapping the previous block) get 16 fresh uniforms and
// one more block: n + (n % 16 ? 16 : 0) draws in all.
//
// PyTorch draws all n uniforms, then transforms the blocks. A block reads only its own 16
// uniforms, so drawing and transforming a few thousand at a time (kChunk is a multiple of 16)
// gives the same numbers while they are still in the cache.
template <typename T, typename FillUniform, typename Block>
void vectorised_normal_fill(T* data, int64_t n, T mean, T stddev, Generator& g,
                            FillUniform fill_uniform, Block block16) {
  static_assert(kChunk % 16 == 0);
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    fill_uniform(data + start, m, g);
    for (int64_t i = start; i + 16 <= start + m; i += 16) block16(data + i, mean, stddev);
  }
  if (n % 16 != 0) {
    T* last = data + n - 16;
    fill_uniform(last, 16, g);
    block16(last, mean, stddev);
  }
}

// The serial normal path (doc §3.2): at::normal_distribution<double>, Box-Muller in double
// with the second value cached in the generator. PyTorch 1.13 uses log(1 - u2).
double serial_normal_sample(double mean, double stddev, Generator& g) {
  if (g.next_double_normal_sample.has_value()) {
    const double cached = *g.next_double_normal_sample;
    g.next_double_normal_sample.reset();
    return std::fma(cached, stddev, mean);  // transformation::normal, fused by GCC
  }
  const double kTwoPi = 2.0 * std::numbers::pi;
  const double u1 = uniform53(g);
  const double u2 = uniform53(g);
  const double radius = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = kTwoPi * u1;
  g.next_double_normal_sample = radius * std::sin(theta);
  return std::fma(radius * std::cos(theta), stddev, mean);
}

template <typename T>
void serial_normal_fill(T* data, int64_t n, double mean, double stddev, Generator& g) {
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<T>(serial_normal_sample(mean, stddev, g));
}

// bernoulli_(p) with a scalar p (doc §4.1): bernoulli_distribution<double>, a U53 per element,
// kept where u < p, written as `one` (0 elsewhere). u = r 2^-53 exactly for the 53-bit integer
// r, and p 2^53 is exact too (a power-of-two scaling), so u < p is r < ceil(p 2^53): the test is
// made on the integers. (Converting each r to double first, as uniform53 does, is a scalar
// instruction per element on AVX2, which has no packed int64 -> double: that loop takes 3x the
// generator's own time, serial, in the chapter-5 training step.)
template <typename T>
void bernoulli_values(T* data, int64_t n, double p, T one, Generator& g) {
  constexpr uint64_t kMask = (uint64_t{1} << 53) - 1;
  uint64_t threshold = 0;  // p <= 0 (or NaN): u < p never holds
  if (p >= 1) {
    threshold = uint64_t{1} << 53;  // every r
  } else if (p > 0) {
    threshold = static_cast<uint64_t>(std::ceil(p * 0x1p53));
  }
  uint32_t bits[2 * kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    g.random_block(bits, 2 * m);
    T* out = data + start;
    for (int64_t i = 0; i < m; ++i) {
      const uint64_t r = ((uint64_t{bits[2 * i]} << 32) | bits[2 * i + 1]) & kMask;  // high first
      out[i] = r < threshold ? one : T(0);
    }
  }
}

template <typename T>
void bernoulli_fill(T* data, int64_t n, double p, Generator& g) {
  bernoulli_values(data, n, p, static_cast<T>(1), g);
}

// Dropout's noise (doc §4.3): bernoulli_(1 - p), then div_(1 - p) with the scalar cast to T:
// the kept elements are 1 / (1 - p) rounded to T, written as the draws are made (the same bits
// as dividing the 0s and 1s afterwards, without that second pass).
template <typename T>
void dropout_noise_fill(T* data, int64_t n, double p, Generator& g) {
  check(p > 0.0 && p < 1.0, "dropout_noise: p must be in (0, 1), got ", p,
        " (p == 0 and p == 1 draw nothing and must be handled by the caller)");
  const double keep = 1.0 - p;
  bernoulli_values(data, n, keep, static_cast<T>(T(1) / static_cast<T>(keep)), g);
}

void check_uniform_range(double from, double to) {
  check(from <= to, "uniform_: expects a [from, to) range, but found from=", from, " > to=", to);
}

}  // namespace

// uniform_kernel (doc §2): from and to are cast to the element type, and GCC fuses
// x * (to - from) + from. In memory order, one element at a time.
void uniform(float* data, int64_t n, double from, double to, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  check_uniform_range(from, to);
  const float from_f = static_cast<float>(from);
  const float to_f = static_cast<float>(to);
  const float range = to_f - from_f;
  for_each_uniform24(n, g, [=](int64_t i, float u) { data[i] = std::fmaf(u, range, from_f); });
}

void uniform(double* data, int64_t n, double from, double to, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  check_uniform_range(from, to);
  const double range = to - from;
  for_each_uniform53(n, g, [=](int64_t i, double u) { data[i] = std::fma(u, range, from); });
}

// normal_kernel (doc §3): which path runs depends on n and contiguity only.
void normal(float* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  if (contiguous && n >= 16) {
    vectorised_normal_fill(data, n, static_cast<float>(mean), static_cast<float>(stddev), g,
                           fill_uniform24, normal_block16_f32);
  } else {
    serial_normal_fill(data, n, mean, stddev, g);
  }
}

void normal(double* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  if (contiguous && n >= 16) {
    vectorised_normal_fill(data, n, mean, stddev, g, fill_uniform53, normal_block16_libm);
  } else {
    serial_normal_fill(data, n, mean, stddev, g);
  }
}

void bernoulli(float* data, int64_t n, double p, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  bernoulli_fill(data, n, p, g);
}
void bernoulli(double* data, int64_t n, double p, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  bernoulli_fill(data, n, p, g);
}
void bernoulli(bool* data, int64_t n, double p, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  bernoulli_fill(data, n, p, g);
}

void dropout_noise(float* data, int64_t n, double p, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  dropout_noise_fill(data, n, p, g);
}
void dropout_noise(double* data, int64_t n, double p, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  dropout_noise_fill(data, n, p, g);
}

// random_from_to (uniform_int_from_to_distribution): the range is computed in uint64, a
// 32-bit draw is used when it fits, and the sum wraps like PyTorch's uint64 arithmetic.
int64_t randint(int64_t low, int64_t high, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  check(low < high, "randint: expects low < high, but got low=", low, ", high=", high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t r = range >= (uint64_t{1} << 32) ? g.random64() : uint64_t{g.random()};
  return static_cast<int64_t>(r % range + static_cast<uint64_t>(low));
}

}  // namespace random_fill

}  // namespace ember
