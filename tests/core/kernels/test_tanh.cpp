// kernels::tanh_row (core/kernels/tanh.h), glibc's tanhf on vectors, on every Highway target
// this CPU has, against its plain loop libm::tanh (x86-64 glibc's tanhf on every CPU;
// test_libm.cpp checks it against std::tanh there): the same bits for a wide sample of floats,
// densely around every threshold of the algorithm (where tanh and expm1 change branch), at every
// row length up to 53 (the tails), in place, and on a dense structured set (every sign and
// exponent, every branch edge, all denormals). Then the ops that use it (tanh, gelu 'tanh'
// forward and backward): a contiguous float32 input (the vector path) and a transposed one (the
// scalar loop) give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "core/ember.h"
#include "core/kernels/libm.h"
#include "core/kernels/tanh.h"
#include "tests/core/kernels/targets.h"

namespace ember {
namespace {

using test::on_every_target;

std::vector<float> plain_loop(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = kernels::libm::tanh(x[i]);
  return y;
}

// tanh_row on every target against the plain loop; the mismatches, the first five reported.
int64_t count_mismatches(const std::vector<float>& x) {
  const std::vector<float> want = plain_loop(x);
  int64_t mismatches = 0;
  on_every_target([&] {
    std::vector<float> y(x.size());
    kernels::tanh_row(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want[i]) && mismatches++ < 5) {
        ADD_FAILURE() << "tanh_row(" << std::hexfloat << x[i] << " = 0x" << std::hex
                      << std::bit_cast<uint32_t>(x[i]) << "): " << y[i] << " vs libm::tanh "
                      << want[i];
      }
    }
  });
  return mismatches;
}

TEST(TanhRow, EveryTargetHasThePlainLoopsBitsOverASampleOfAllFloats) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093)
    x.push_back(std::bit_cast<float>(uint32_t(b)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v :
       {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
        -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
        -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()}) {
    x.push_back(v);
  }
  EXPECT_EQ(count_mismatches(x), 0);
}

TEST(TanhRow, EveryTargetHasThePlainLoopsBitsAroundEveryBranch) {
  // |x| patterns where tanhf or expm1f(+-2|x|) changes branch: 2^-55, 2^-26 (expm1's |u| <
  // 2^-25), ln2/4 and 3 ln2/4 (|u| = ln2/2, 3 ln2/2), 1, the k = 22/23 and 56/57 steps of the
  // reduction (2|x| = 22.5 ln2, 56.5 ln2), 22.
  const std::vector<uint32_t> edges = {0x24000000, 0x32800000, 0x3e317218, 0x3f051592,
                                       0x3f800000, 0x40f98000, 0x419ca000, 0x41b00000};
  std::vector<float> x;
  for (uint32_t edge : edges) {
    for (int64_t d = -2000; d <= 2000; ++d) {
      const auto b = static_cast<uint32_t>(static_cast<int64_t>(edge) + d);
      x.push_back(std::bit_cast<float>(b));
      x.push_back(-std::bit_cast<float>(b));
    }
  }
  // the k boundaries themselves, found by value: 2|x| = (k + 1/2) ln2 for k = 1..63
  for (int k = 1; k <= 63; ++k) {
    float v = static_cast<float>((k + 0.5) * std::numbers::ln2 / 2);
    for (int d = 0; d < 300; ++d) v = std::nextafter(v, 0.0f);
    for (int d = 0; d < 600; ++d, v = std::nextafter(v, 100.0f)) x.push_back(v);
  }
  EXPECT_EQ(count_mismatches(x), 0);
}

TEST(TanhRow, EveryTargetsTailsAndInPlace) {
  std::vector<float> x(53);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 3.0f;
  const std::vector<float> want = plain_loop(x);
  on_every_target([&] {
    for (int64_t n = 0; n <= 53; ++n) {
      std::vector<float> y(x.size(), 7.0f);
      kernels::tanh_row(x.data(), y.data(), n);
      for (int64_t j = 0; j < 53; ++j) {  // nothing past n is written
        EXPECT_EQ(std::bit_cast<uint32_t>(y[j]), std::bit_cast<uint32_t>(j < n ? want[j] : 7.0f))
            << n << " " << j;
      }
    }
    std::vector<float> y = x;
    kernels::tanh_row(y.data(), y.data(), 53);
    EXPECT_EQ(test::bits_of(y), test::bits_of(want));
  });
}

// The row length of the chunks below: an odd number, so each path's tail runs too.
constexpr std::size_t kChunk = (std::size_t{1} << 16) + 5;

// Collects the floats with bits in [first, last] (clamped to 32 bits), and compares tanh_row on
// every target with the plain loop on them a chunk at a time (and at flush), counting the
// mismatches.
struct TargetComparer {
  std::vector<float> x = std::vector<float>(kChunk);
  std::size_t size = 0;
  int64_t compared = 0, mismatches = 0;

  void add(int64_t first, int64_t last) {
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, 0xffffffff);
    for (int64_t b = first; b <= last; ++b) {
      x[size++] = std::bit_cast<float>(static_cast<uint32_t>(b));
      if (size == kChunk) flush();
    }
  }
  void flush() {
    x.resize(size);
    mismatches += count_mismatches(x);
    compared += static_cast<int64_t>(size);
    x.resize(kChunk);
    size = 0;
  }
};

TEST(TanhRow, EveryTargetHasThePlainLoopsBitsOnADenseStructuredSet) {
  TargetComparer cmp;
  // Every sign and exponent (denormals, inf and nan included): the first and last 2048
  // mantissas and every 61st between.
  for (int64_t top = 0; top < 512; ++top) {
    const int64_t base = top << 23;
    cmp.add(base, base + 2047);
    for (int64_t m = 2048; m < (int64_t{1} << 23) - 2048; m += 61) cmp.add(base + m, base + m);
    cmp.add(base + (int64_t{1} << 23) - 2048, base + (int64_t{1} << 23) - 1);
  }
  // 2^16 floats each side of every edge, both signs: the smallest normal, 2^-55 (tanh's tiny case),
  // 2^-26 (expm1's |u| < 2^-25), ln2/4 and 3 ln2/4 (|u| = ln2/2, 3 ln2/2), 0.5, 1, the k = 22/23
  // and 56/57 steps (2|x| = 22.5 ln2, 56.5 ln2), 22, the largest finite float and inf.
  for (int64_t edge :
       {0x00800000, 0x24000000, 0x32800000, 0x33000000, 0x3e317218, 0x3f051592, 0x3f000000,
        0x3f800000, 0x40f98000, 0x419ca000, 0x41b00000, 0x7f7fffff, 0x7f800000}) {
    cmp.add(edge - 65536, edge + 65536);
    cmp.add(edge + 0x80000000 - 65536, edge + 0x80000000 + 65536);
  }
  // Every k of the reduction: 2|x| = (k + 1/2) ln2, k = 1..63, 4096 floats each side.
  for (int k = 1; k <= 63; ++k) {
    const auto b = static_cast<int64_t>(
        std::bit_cast<uint32_t>(static_cast<float>((k + 0.5) * std::numbers::ln2 / 2)));
    cmp.add(b - 4096, b + 4096);
    cmp.add(b + 0x80000000 - 4096, b + 0x80000000 + 4096);
  }
  cmp.flush();
  EXPECT_GT(cmp.compared, 75'000'000);
  EXPECT_EQ(cmp.mismatches, 0) << "of " << cmp.compared << " floats";
}

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float v : t.contiguous().to_vector<float>()) out.push_back(std::bit_cast<uint32_t>(v));
  return out;
}

TEST(TanhOps, VectorPathAndScalarLoopGiveTheSameBits) {
  manual_seed(7);
  const Tensor base = randn({37, 19}) * 3.0;
  const Tensor strided = base.t().contiguous().t();  // same values, column-major: the scalar loop
  ASSERT_FALSE(strided.is_contiguous());
  EXPECT_EQ(bits(tanh(base)), bits(tanh(strided)));
  EXPECT_EQ(bits(gelu(base, "tanh")), bits(gelu(strided, "tanh")));
  // and against the scalar formula itself, PyTorch's order of operations (GeluKernel.cpp:
  // x_cube = x * x * x; inner = kBeta * (x + kKappa * x_cube))
  const std::vector<float> v = base.to_vector<float>(), g = gelu(base, "tanh").to_vector<float>();
  const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float want =
        0.5f * v[i] * (1.0f + kernels::libm::tanh(k * (v[i] + 0.044715f * (v[i] * v[i] * v[i]))));
    EXPECT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(want)) << i;
  }
  // backward: d gelu / dx through both paths
  for (const char* mode : {"tanh"}) {
    const Tensor a = base.detach().requires_grad_(), b = strided.detach().requires_grad_();
    gelu(a, mode).sum().backward();
    gelu(b, mode).sum().backward();
    EXPECT_EQ(bits(a.grad()), bits(b.grad()));
    const Tensor c = base.detach().requires_grad_(), d = strided.detach().requires_grad_();
    tanh(c).sum().backward();
    tanh(d).sum().backward();
    EXPECT_EQ(bits(c.grad()), bits(d.grad()));
  }
}

}  // namespace
}  // namespace ember
