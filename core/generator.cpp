// PyTorch 1.13's CPU generator and its sampling kernels; see generator.h and
// /work/shared/reference/pytorch_rng.md ("the doc").
//
// Like every file (see CMakeLists.txt), this one is compiled with -ffp-contract=off: PyTorch's x86
// build lets GCC fuse some multiply-adds, and which ones matters to the last bit. Every fusion
// PyTorch gets is written out below as std::fma / std::fmaf; every other operation must stay
// unfused.
#include "core/generator.h"

#include <bit>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/error.h"

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

void Generator::twist() {
  for (int i = 0; i < kStateSize; ++i) {
    const uint32_t y = (state_[i] & kUpperMask) | (state_[(i + 1) % kStateSize] & kLowerMask);
    state_[i] = state_[(i + kShift) % kStateSize] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
  }
  left_ = kStateSize;
  next_ = 0;
}

uint32_t Generator::random() {
  if (--left_ == 0) twist();
  uint32_t y = state_[next_++];
  // Tempering.
  y ^= y >> 11;
  y ^= (y << 7) & 0x9D2C5680u;
  y ^= (y << 15) & 0xEFC60000u;
  y ^= y >> 18;
  return y;
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

// float: the LOW 24 bits of one random(), times 2^-24. Exact.
float uniform24(Generator& g) { return static_cast<float>(g.random() & 0x00FFFFFFu) * 0x1p-24f; }

// double: the low 53 bits of one random64() (two draws), times 2^-53. Exact.
double uniform53(Generator& g) {
  return static_cast<double>(g.random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
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

// float32: normal_fill_16_AVX2 (doc §3.4). mean and stddev arrive already cast to float.
void normal_block16_avx2(float* d, float mean, float stddev) {
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
template <typename T, typename Uniform, typename Block>
void vectorised_normal_fill(T* data, int64_t n, T mean, T stddev, Generator& g, Uniform uniform,
                            Block block16) {
  for (int64_t i = 0; i < n; ++i) data[i] = uniform(g);
  for (int64_t i = 0; i + 16 <= n; i += 16) block16(data + i, mean, stddev);
  if (n % 16 != 0) {
    T* last = data + n - 16;
    for (int k = 0; k < 16; ++k) last[k] = uniform(g);
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

// bernoulli_(p) with a scalar p (doc §4.1): bernoulli_distribution<double>, a U53 per element.
template <typename T>
void bernoulli_fill(T* data, int64_t n, double p, Generator& g) {
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<T>(uniform53(g) < p);
}

// Dropout's noise (doc §4.3): bernoulli_(1 - p), then div_(1 - p) with the scalar cast to T.
template <typename T>
void dropout_noise_fill(T* data, int64_t n, double p, Generator& g) {
  check(p > 0.0 && p < 1.0, "dropout_noise: p must be in (0, 1), got ", p,
        " (p == 0 and p == 1 draw nothing and must be handled by the caller)");
  const double keep = 1.0 - p;
  bernoulli_fill(data, n, keep, g);
  const T divisor = static_cast<T>(keep);
  for (int64_t i = 0; i < n; ++i) data[i] = data[i] / divisor;
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
  for (int64_t i = 0; i < n; ++i) data[i] = std::fmaf(uniform24(g), range, from_f);
}

void uniform(double* data, int64_t n, double from, double to, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  check_uniform_range(from, to);
  const double range = to - from;
  for (int64_t i = 0; i < n; ++i) data[i] = std::fma(uniform53(g), range, from);
}

// normal_kernel (doc §3): which path runs depends on n and contiguity only.
void normal(float* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  if (contiguous && n >= 16) {
    vectorised_normal_fill(data, n, static_cast<float>(mean), static_cast<float>(stddev), g,
                           uniform24, normal_block16_avx2);
  } else {
    serial_normal_fill(data, n, mean, stddev, g);
  }
}

void normal(double* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  if (contiguous && n >= 16) {
    vectorised_normal_fill(data, n, mean, stddev, g, uniform53, normal_block16_libm);
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
