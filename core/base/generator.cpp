// PyTorch 1.13's CPU generator and its sampling kernels (core/base/generator.h). The § numbers
// below are sections of core/base/RNG.md, which gives each formula and its order of operations.
//
// Like every file (see CMakeLists.txt), this one is compiled with -ffp-contract=off: PyTorch's x86
// build lets GCC fuse some multiply-adds, and which ones matters to the last bit. Every fusion
// PyTorch gets is written out below as std::fma / std::fmaf; every other operation must stay
// unfused.
#include "core/base/generator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "core/base/bit_cast.h"
#include "core/base/error.h"

namespace ember {

// ---------------------------------------------------------------------------------------------
// The MT19937 engine (RNG.md §1.2). It is the textbook MT19937: the same outputs as
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
  // CPUGeneratorImpl::set_current_seed (RNG.md §1.1): empty the caches, then re-seed the engine
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

}  // namespace

// The plain loops of the twist and the tempering (random_fill::detail::twist and temper, in
// generator_simd.cpp, are the same a vector at a time).
//
// The textbook twist, word by word, in place: word i reads word i + 397 before it is rewritten
// (i < 227) and after (i >= 227, where (i + 397) mod 624 = i - 227).
void random_fill::detail::twist_scalar(uint32_t* s, int n, int shift) {
  for (int i = 0; i < n; ++i) s[i] = twisted(s[i], s[(i + 1) % n], s[(i + shift) % n]);
}

void random_fill::detail::temper_scalar(const uint32_t* s, uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = tempered(s[i]);
}

void Generator::twist() {
  random_fill::detail::twist(state_.data(), kStateSize, kShift);  // generator_simd.cpp
  left_ = kStateSize;
  next_ = 0;
}

uint32_t Generator::random() {
  if (--left_ == 0) twist();
  return tempered(state_[next_++]);
}

void Generator::random_block(uint32_t* out, int64_t n) {
  // generator_simd.cpp: twists and tempers, a vector of words at a time, in one dispatched call
  random_fill::detail::random_block(state_.data(), kStateSize, kShift, left_, next_, out, n);
}

uint64_t Generator::random64() {
  // RNG.md §1.3: the high word is drawn first.
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
// Uniform numbers in [0, 1) (RNG.md §2, transformation::uniform_real).

// double: the low 53 bits of one random64() (two draws), times 2^-53. Exact.
double uniform53(Generator& g) {
  return static_cast<double>(g.random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
}

// float: the LOW 24 bits of one random(), times 2^-24. Exact.

// The uniforms in bulk, for the fills: f(i, u) for the i-th of n uniforms, i = 0 .. n-1,
// in stream order. The raw outputs come kChunk at a time from random_block (tempered a vector
// at a time) instead of one random() call each; the numbers are the same.
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
// ported lane by lane to scalar code (RNG.md §3.4). The eight AVX2 lanes are independent, so this
// port is exact. The intrinsics are plain multiplies and adds in the source, but GCC (with -mfma
// and its default -ffp-contract=fast) fuses some of them; the std::fmaf calls below are exactly
// those fusions.

float float_from_bits(uint32_t bits) { return ember::bit_cast<float>(bits); }

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
  const uint32_t bits = ember::bit_cast<uint32_t>(x);
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

  uint32_t sign_sin = ember::bit_cast<uint32_t>(t) & kSignBit;
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
  sin_out = ember::bit_cast<float>(ember::bit_cast<uint32_t>(sin_value) ^ sign_sin);
  cos_out = ember::bit_cast<float>(ember::bit_cast<uint32_t>(cos_value) ^ sign_cos);
}

// ---------------------------------------------------------------------------------------------
// The vectorised normal path (RNG.md §3.3): Box-Muller on blocks of 16 uniforms, pairing slot j
// with slot j + 8.

}  // namespace

// float32: normal_fill_16_AVX2 (RNG.md §3.4). mean and stddev arrive already cast to float. The
// plain loop of random_fill::detail::normal_blocks16 (generator_simd.cpp), which runs it a vector
// of lanes at a time.
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

namespace {

// float64: normal_fill_16<double> (RNG.md §3.5), in double with libm. GCC fuses
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

void normal_blocks16_libm(double* d, int64_t blocks, double mean, double stddev) {
  for (int64_t b = 0; b < blocks; ++b) normal_block16_libm(d + 16 * b, mean, stddev);
}

// normal_fill (RNG.md §3.3): n >= 16 uniforms, then every full block of 16 in place. If n is not a
// multiple of 16, the LAST 16 slots (overlapping the previous block) get 16 fresh uniforms and
// one more block: n + (n % 16 ? 16 : 0) draws in all.
//
// PyTorch draws all n uniforms, then transforms the blocks. A block reads only its own 16
// uniforms, so drawing and transforming a few thousand at a time (kChunk is a multiple of 16)
// gives the same numbers while they are still in the cache.
// blocks16(d, count, mean, stddev) transforms the `count` blocks of 16 from d on.
template <typename T, typename FillUniform, typename Blocks>
void vectorised_normal_fill(T* data, int64_t n, T mean, T stddev, Generator& g,
                            FillUniform fill_uniform, Blocks blocks16) {
  static_assert(kChunk % 16 == 0);
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    fill_uniform(data + start, m, g);
    blocks16(data + start, m / 16, mean, stddev);
  }
  if (n % 16 != 0) {
    T* last = data + n - 16;
    fill_uniform(last, 16, g);
    blocks16(last, 1, mean, stddev);
  }
}

// The serial normal path (RNG.md §3.2): at::normal_distribution<double>, Box-Muller in double
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

// bernoulli_(p) with a scalar p (RNG.md §4.1): bernoulli_distribution<double>, a U53 per element,
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

// Dropout's noise (RNG.md §4.3): bernoulli_(1 - p), then div_(1 - p) with the scalar cast to T:
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

// uniform_kernel (RNG.md §2): from and to are cast to the element type, and GCC fuses
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

// normal_kernel (RNG.md §3.1): which path runs depends on n and contiguity only.
void normal(float* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  if (contiguous && n >= 16) {
    vectorised_normal_fill(data, n, static_cast<float>(mean), static_cast<float>(stddev), g,
                           fill_uniform24, detail::normal_blocks16);  // generator_simd.cpp
  } else {
    serial_normal_fill(data, n, mean, stddev, g);
  }
}

void normal(double* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  if (contiguous && n >= 16) {
    vectorised_normal_fill(data, n, mean, stddev, g, fill_uniform53, normal_blocks16_libm);
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
  int64_t v = 0;
  randint(&v, 1, low, high, g);
  return v;
}
void randint(int64_t* data, int64_t n, int64_t low, int64_t high, Generator& g) {
  check(low < high, "randint: expects low < high, but got low=", low, ", high=", high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  std::lock_guard<std::mutex> lock(g.mutex());
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = range >= (uint64_t{1} << 32) ? g.random64() : uint64_t{g.random()};
    data[i] = static_cast<int64_t>(r % range + static_cast<uint64_t>(low));
  }
}

}  // namespace random_fill

}  // namespace ember
