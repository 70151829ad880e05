// kernels::tanh_row (core/kernels/tanh.h), glibc's tanhf on vector registers, against std::tanh:
// the same bits for a wide sample of floats, densely around every threshold of the algorithm
// (where tanh and expm1 change branch), at every row length modulo 8 and 16 (the tails), in
// place; each on the path tanh_row picks and on both vector paths called directly. The AVX-512
// path against the AVX2 one on a dense structured set (every sign and exponent, every branch
// edge, all denormals), and the path EMBER_CPU_CAPABILITY=avx2 selects (tests/CMakeLists.txt
// runs these tests again with it set). Then the ops that use it (tanh, gelu 'tanh' forward and
// backward): a contiguous float32 input (the vector path) and a transposed one (the scalar loop)
// give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "core/base/cpu.h"
#include "core/ember.h"
#include "core/kernels/tanh.h"

namespace ember {
namespace {

using RowFn = bool (*)(const float*, float*, int64_t);

bool dispatched(const float* x, float* y, int64_t n) {
  kernels::tanh_row(x, y, n);
  return true;
}

// tanh_row as dispatched, then each vector path that this build and CPU can run.
struct Path {
  const char* name;
  RowFn fn;
};
const Path kPaths[] = {{"tanh_row", dispatched},
                       {"tanh_row_avx2", kernels::tanh_row_avx2},
                       {"tanh_row_avx512", kernels::tanh_row_avx512}};

int64_t count_mismatches(const std::vector<float>& x) {
  int64_t mismatches = 0;
  for (const Path& path : kPaths) {
    std::vector<float> y(x.size());
    if (!path.fn(x.data(), y.data(), static_cast<int64_t>(x.size()))) continue;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want = std::tanh(x[i]);
      if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want) && mismatches++ < 5) {
        ADD_FAILURE() << path.name << "(" << std::hexfloat << x[i] << "): " << y[i]
                      << " vs std::tanh " << want;
      }
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
  std::vector<float> x(53);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 3.0f;
  for (const Path& path : kPaths) {
    for (int64_t n = 0; n <= 53; ++n) {
      std::vector<float> y(x.size(), 7.0f);
      if (!path.fn(x.data(), y.data(), n)) break;
      for (int64_t j = 0; j < 53; ++j) {
        const float want = j < n ? std::tanh(x[j]) : 7.0f;  // nothing past n is written
        EXPECT_EQ(std::bit_cast<uint32_t>(y[j]), std::bit_cast<uint32_t>(want))
            << path.name << " " << n << " " << j;
      }
    }
    std::vector<float> y = x;
    if (!path.fn(y.data(), y.data(), 53)) continue;
    for (int64_t j = 0; j < 53; ++j) EXPECT_EQ(y[j], std::tanh(x[j])) << path.name;
  }
}

// The row length of the chunks below: an odd number, so each path's tail runs too.
constexpr std::size_t kChunk = (std::size_t{1} << 16) + 5;

// Collects the floats with bits in [first, last] (clamped to 32 bits), and compares the two
// paths on them a chunk at a time (and at flush), counting the mismatches.
struct PathComparer {
  std::vector<float> x = std::vector<float>(kChunk), avx2 = x, avx512 = x;
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
    const auto n = static_cast<int64_t>(size);
    EXPECT_TRUE(kernels::tanh_row_avx2(x.data(), avx2.data(), n));
    EXPECT_TRUE(kernels::tanh_row_avx512(x.data(), avx512.data(), n));
    if (std::memcmp(avx2.data(), avx512.data(), sizeof(float) * size) != 0) {
      for (std::size_t i = 0; i < size; ++i) {
        if (std::bit_cast<uint32_t>(avx2[i]) != std::bit_cast<uint32_t>(avx512[i]) &&
            mismatches++ < 5) {
          ADD_FAILURE() << "tanh(" << std::hexfloat << x[i] << " = 0x" << std::hex
                        << std::bit_cast<uint32_t>(x[i]) << "): AVX-512 " << avx512[i]
                        << " vs AVX2 " << avx2[i];
        }
      }
    }
    compared += n;
    size = 0;
  }
};

TEST(TanhRow, Avx512PathHasTheAvx2PathsBitsOnADenseStructuredSet) {
  float probe = 0.5f, out = 0.0f;
  if (!kernels::tanh_row_avx2(&probe, &out, 1)) {
    GTEST_SKIP()
        << "this build has no AVX2 + FMA tanh path (not x86-64-v3): no AVX-512 path either";
  }
  if (!kernels::tanh_row_avx512(&probe, &out, 1)) {
    GTEST_SKIP() << "this CPU has no AVX-512F: only the AVX2 path exists here (the other tests "
                    "check it against std::tanh)";
  }
  PathComparer cmp;
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

// EMBER_CPU_CAPABILITY=avx2 keeps the 8-lane path on an AVX-512 CPU (so does scalar, until tanh is
// written over Highway); otherwise tanh_row takes the widest path the CPU has. (tests/CMakeLists.txt runs the TanhRow tests with and without it.)
TEST(TanhRow, PathFollowsTheCpuAndEmberCpuCapability) {
  const std::string isa = kernels::tanh_isa();
  float probe = 0.5f, out = 0.0f;
  if (!kernels::tanh_row_avx2(&probe, &out, 1)) {
    EXPECT_EQ(isa, "portable");
    return;
  }
  const char* capability = std::getenv("EMBER_CPU_CAPABILITY");
  const bool forced_avx2 = capability != nullptr && (std::string(capability) == "avx2" ||
                                                     std::string(capability) == "scalar");
  if (forced_avx2 || !cpu::has_avx512f()) {
    EXPECT_EQ(isa, "avx2");
  } else {
    EXPECT_EQ(isa, "avx512");
  }
  EXPECT_EQ(cpu::use_avx512(), isa == "avx512");
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
