// kernels::libm (core/kernels/libm.h): tanh and erf for float, x86-64 glibc's tanhf and erff on
// every CPU. On x86-64 with glibc they must give std::tanh's and std::erf's bits on a wide sample
// of floats (every sign and exponent, inf, nan, the denormals' edge); everywhere, a hash of their
// bits on that sample must be the hash those x86-64 results have, so an arm64 build (the arm64
// stage of scripts/test, under qemu) checks that it computes x86-64's numbers.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/kernels/libm.h"

namespace ember {
namespace {

// Every 4093rd float bit pattern, and the special values.
std::vector<float> sample() {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093)
    x.push_back(std::bit_cast<float>(uint32_t(b)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()}) {
    x.push_back(v);
  }
  return x;
}

// 64-bit FNV-1a over the results' bits.
template <typename F>
uint64_t hash_of(F f) {
  uint64_t h = 0xcbf29ce484222325;
  for (float v : sample()) {
    const uint32_t bits = std::bit_cast<uint32_t>(f(v));
    for (int byte = 0; byte < 4; ++byte) h = (h ^ ((bits >> (8 * byte)) & 0xff)) * 0x100000001b3;
  }
  return h;
}

#if defined(__x86_64__) && defined(__GLIBC__)
template <typename Ours, typename Std>
int64_t mismatches(Ours ours, Std reference, const char* name) {
  int64_t count = 0;
  for (float v : sample()) {
    const float a = ours(v), b = reference(v);
    if (std::bit_cast<uint32_t>(a) != std::bit_cast<uint32_t>(b) && count++ < 5) {
      ADD_FAILURE() << name << "(" << std::hexfloat << v << "): " << a << " vs std:: " << b;
    }
  }
  return count;
}

TEST(Libm, TanhAndErfHaveX86GlibcsBits) {
  EXPECT_EQ(mismatches([](float v) { return kernels::libm::tanh(v); },
                       [](float v) { return std::tanh(v); }, "tanh"),
            0);
  EXPECT_EQ(mismatches([](float v) { return kernels::libm::erf(v); },
                       [](float v) { return std::erf(v); }, "erf"),
            0);
}
#endif

TEST(Libm, TanhAndErfHaveTheSameBitsOnEveryCpu) {
  // the hashes of x86-64 glibc 2.36's tanhf and erff on the sample (the test above checks that
  // libm:: gives those bits there)
  EXPECT_EQ(hash_of([](float v) { return kernels::libm::tanh(v); }), 0x6afbcfcb6d87eeacu);
  EXPECT_EQ(hash_of([](float v) { return kernels::libm::erf(v); }), 0xe8e339b01ab6503cu);
}

}  // namespace
}  // namespace ember
