// kernels::tanh_row (core/kernels/tanh.h), glibc's tanhf on vector registers, against std::tanh:
// the same bits for a wide sample of floats, densely around every threshold of the algorithm
// (where tanh and expm1 change branch), at every row length modulo 8 (the tail), in place.
// Then the ops that use it (tanh, gelu 'tanh' forward and backward): a contiguous float32 input
// (the vector path) and a transposed one (the scalar loop) give the same bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "core/ember.h"
#include "core/kernels/tanh.h"

namespace ember {
namespace {

int64_t count_mismatches(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  kernels::tanh_row(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t mismatches = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = std::tanh(x[i]);
    if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want) && mismatches++ < 5) {
      ADD_FAILURE() << "tanh(" << std::hexfloat << x[i] << "): " << y[i] << " vs std::tanh "
                    << want;
    }
  }
  return mismatches;
}

TEST(TanhRow, SameBitsAsStdTanhOverASampleOfAllFloats) {
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

TEST(TanhRow, SameBitsAroundEveryBranchOfTheAlgorithm) {
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

TEST(TanhRow, TailsAndInPlace) {
  std::vector<float> x(37);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 3.0f;
  for (int64_t n = 0; n <= 37; ++n) {
    std::vector<float> y(x.size(), 7.0f);
    kernels::tanh_row(x.data(), y.data(), n);
    for (int64_t j = 0; j < 37; ++j) {
      const float want = j < n ? std::tanh(x[j]) : 7.0f;  // nothing past n is written
      EXPECT_EQ(std::bit_cast<uint32_t>(y[j]), std::bit_cast<uint32_t>(want)) << n << " " << j;
    }
  }
  std::vector<float> y = x;
  kernels::tanh_row(y.data(), y.data(), 37);
  for (int64_t j = 0; j < 37; ++j) EXPECT_EQ(y[j], std::tanh(x[j]));
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
        0.5f * v[i] * (1.0f + std::tanh(k * (v[i] + 0.044715f * (v[i] * v[i] * v[i]))));
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
