// Dispatch to the Highway targets (core/base/cpu.h) and the kernels written over Highway on every
// target compiled in: the targets each architecture must have, EMBER_CPU_CAPABILITY's cap, and
// exp_row and the softmax rows (core/kernels/exp.h) giving the bits of the plain loops they
// replace on each target this CPU can run (hwy::SetSupportedTargetsForTest picks one at a time).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/base/cpu.h"
#include "core/kernels/exp.h"
#include "core/kernels/reduce_kernels.h"
#include "hwy/highway.h"
#include "tests/core/kernels/targets.h"

namespace ember {
namespace {

// The targets each architecture's build must hold (CMakeLists.txt).
int64_t required_targets() {
#if HWY_ARCH_X86_64
  return HWY_AVX3 | HWY_AVX2 | HWY_SCALAR;
#elif HWY_ARCH_ARM_A64
  return HWY_SVE2 | HWY_SVE | HWY_NEON | HWY_SCALAR;
#else
  return HWY_SCALAR;
#endif
}

using test::bits_of;
using test::on_every_target;
using test::runnable_targets;

TEST(Dispatch, EveryTargetOfTheArchitectureIsCompiledInAndRuns) {
  // A target the CPU has but the build left out would be replaced by another one: its name
  // would not come back.
  const int64_t required = required_targets();
  const std::vector<int64_t> runnable = runnable_targets();
  std::vector<std::string> ran = on_every_target([] {});
  for (int64_t bits = required; bits != 0; bits &= bits - 1) {
    const int64_t target = bits & -bits;
    if (std::find(runnable.begin(), runnable.end(), target) == runnable.end()) {
      continue;  // not on this CPU, or capped
    }
    EXPECT_NE(std::find(ran.begin(), ran.end(), hwy::TargetName(target)), ran.end())
        << hwy::TargetName(target) << " did not run";
  }
  // The best required target this CPU has (AVX3 needs AVX-512: a Zen 3 has AVX2 at best) runs
  // first.
  const int64_t on_this_cpu = required & hwy::SupportedTargets();
  // SupportedTargets, outside a mock, leaves Highway's chosen target at the CPU's best, over
  // EMBER_CPU_CAPABILITY's cap; this makes the next dispatch choose again (as runnable_targets).
  hwy::SetSupportedTargetsForTest(0);
  if (std::getenv("EMBER_CPU_CAPABILITY") == nullptr) {
    EXPECT_EQ(hwy::TargetName(on_this_cpu & -on_this_cpu), ran.front())
        << "the best target is missing";
  }
#if HWY_ARCH_X86_64
  if (std::getenv("EMBER_CPU_CAPABILITY") == nullptr && cpu::has_avx512f()) {
    EXPECT_EQ(ran, (std::vector<std::string>{"AVX3", "AVX2", "SCALAR"}));
  }
#endif
}

TEST(Dispatch, EmberCpuCapabilityCapsTheTarget) {
  const char* value = std::getenv("EMBER_CPU_CAPABILITY");
  const std::string capability = value != nullptr ? value : "";
  const std::string name = cpu::target_name();
  if (capability == "scalar") {
    EXPECT_EQ(name, "SCALAR");
  } else if (capability == "avx2") {
    EXPECT_EQ(name, cpu::has_avx2_fma() ? "AVX2" : "SCALAR");
  } else if (capability == "neon") {
    EXPECT_EQ(name, "NEON");
  } else {  // unset, or a value that caps nothing here: the best the CPU has
    EXPECT_EQ(name, hwy::TargetName(runnable_targets().front()));
#if HWY_ARCH_X86_64
    if (cpu::has_avx512f()) {
      EXPECT_EQ(name, "AVX3");
    }
#endif
  }
  EXPECT_EQ(cpu::use_avx512(), name == "AVX3");
}

// exp_row against std::exp on a sample of every sign and exponent, glibc's special values and
// the edges of its special cases, at every tail length up to 40 and with a max subtracted.
TEST(DispatchExp, EveryTargetHasTheBitsOfStdExp) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521)
    x.push_back(std::bit_cast<float>(uint32_t(b)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v :
       {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 0x1.62e42ep6f,
        std::nextafter(0x1.62e42ep6f, inf), -0x1.9fe368p6f, std::nextafter(-0x1.9fe368p6f, -inf),
        -0x1.9d1d9ep6f, std::nextafter(-0x1.9d1d9ep6f, -inf), -87.33655f, 1e-30f, -1e-30f}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = std::exp(x[i] - 1.5f);
  on_every_target([&] {
    std::vector<float> y(x.size());
    kernels::exp_row(x.data(), 1.5f, y.data(), n);
    EXPECT_EQ(bits_of(y), bits_of(want));
    for (int64_t m = 0; m <= 40; ++m) {  // a row of m: nothing past it is written
      std::vector<float> row(x.end() - 41, x.end()), out(41, 7.0f);
      kernels::exp_row(row.data(), 1.5f, out.data(), m);
      for (int64_t j = 0; j < 41; ++j) {
        EXPECT_EQ(std::bit_cast<uint32_t>(out[j]),
                  std::bit_cast<uint32_t>(j < m ? want[n - 41 + j] : 7.0f))
            << "m=" << m << " j=" << j;
      }
    }
  });
}

// The fused softmax rows against the plain loops they replace (divide and max, std::exp,
// vec_lane_sum and vec_lane_dot in PyTorch's lane order, the scaling), on every target, at every
// valid length up to 70 of rows shorter and longer than eight lanes, with a nan, huge scores
// and zeros of both signs among them.
struct PlainRow {
  std::vector<float> weights, recomputed, grads;
  float max, inverse;
};

PlainRow plain_softmax_row(std::vector<float> x, std::vector<float> g, float divisor, int64_t valid,
                           int64_t row) {
  PlainRow out;
  std::vector<float> scores = x;
  out.max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < valid; ++j) {
    x[j] = x[j] / divisor;
    out.max = x[j] > out.max ? x[j] : out.max;
  }
  for (int64_t j = 0; j < valid; ++j) x[j] = std::exp(x[j] - out.max);
  out.inverse = 1.0f / kernels::vec_lane_sum(x.data(), valid, row);
  for (int64_t j = 0; j < valid; ++j) x[j] *= out.inverse;
  std::fill(x.begin() + valid, x.end(), 0.0f);
  out.weights = x;
  for (int64_t j = 0; j < valid; ++j)  // the weights again, from the scores, max and inverse
    scores[j] = std::exp(scores[j] / divisor - out.max) * out.inverse;
  std::fill(scores.begin() + valid, scores.end(), 0.0f);
  out.recomputed = scores;
  const float d = kernels::vec_lane_dot(g.data(), x.data(), valid, row);
  for (int64_t j = 0; j < valid; ++j) g[j] = (x[j] * (g[j] - d)) / divisor;
  std::fill(g.begin() + valid, g.end(), 0.0f);
  out.grads = g;
  return out;
}

std::vector<float> row_values(int64_t n, uint32_t seed) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::cos(float(i * 5 + seed) * 0.61f) * 30.0f;
  if (seed % 3 == 1 && n > 4) x[4] = -0.0f;
  if (seed % 3 == 2 && n > 2) x[2] = 0.0f;
  if (seed % 5 == 3 && n > 10) x[10] = std::numeric_limits<float>::quiet_NaN();
  if (seed % 7 == 5 && n > 6) x[6] = 1e30f;
  return x;
}

TEST(DispatchExp, EveryTargetsSoftmaxRowsHaveThePlainLoopsBits) {
  const float divisor = 5.656854f;
  for (int64_t row : {3, 8, 29, 70}) {
    for (int64_t valid = 0; valid <= row; ++valid) {
      for (uint32_t seed = 0; seed < 8; ++seed) {
        const int64_t width = row + 2;
        const std::vector<float> scores = row_values(width, seed);
        // (seed 7: a row of -0 gradients, whose sum D must stay -0)
        const std::vector<float> grads =
            seed == 7 ? std::vector<float>(width, -0.0f) : row_values(width, seed + 11);
        const PlainRow want = plain_softmax_row(scores, grads, divisor, valid, row);
        on_every_target([&] {
          SCOPED_TRACE(::testing::Message()
                       << "row=" << row << " valid=" << valid << " seed=" << seed);
          std::vector<float> x = scores, w = scores, g = grads;
          float max = 0, inverse = 0;
          kernels::softmax_row(x.data(), divisor, valid, row, width, &max, &inverse);
          EXPECT_EQ(bits_of(x), bits_of(want.weights));
          EXPECT_TRUE(max == want.max || (std::isnan(max) && std::isnan(want.max)));
          EXPECT_EQ(std::bit_cast<uint32_t>(inverse), std::bit_cast<uint32_t>(want.inverse));
          kernels::softmax_weights_row(w.data(), divisor, want.max, want.inverse, valid, width);
          EXPECT_EQ(bits_of(w), bits_of(want.recomputed));
          kernels::softmax_backward_row(g.data(), want.weights.data(), divisor, valid, row, width);
          EXPECT_EQ(bits_of(g), bits_of(want.grads));
        });
      }
    }
  }
}

}  // namespace
}  // namespace ember
