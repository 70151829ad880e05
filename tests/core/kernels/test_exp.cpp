// kernels::exp_row (core/kernels/exp.h), the vectorized exp every float softmax runs through,
// against std::exp: the same bits for a wide sample of floats (every sign and exponent, the
// special values, the edges of glibc's special cases), at every row length modulo 8 (the tail),
// and with the max subtracted first. Plus divide_max_row against its scalar loop, and the fused
// attention's softmax rows against their steps.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/kernels/exp.h"
#include "core/kernels/reduce_kernels.h"

namespace ember {
namespace {

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float x : v) out.push_back(std::bit_cast<uint32_t>(x));
  return out;
}

TEST(ExpRow, SameBitsAsStdExpOverASampleOfAllFloats) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093)
    x.push_back(std::bit_cast<float>(uint32_t(b)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 88.72283f,
                  88.72284f, -103.27893f, -103.27892f, -103.97208f, -103.97209f, -87.33655f,
                  -0x1.9fe368p6f, -0x1.9d1d9ep6f, 0x1.62e42ep6f, std::nextafter(0x1.62e42ep6f, inf),
                  std::nextafter(-0x1.9fe368p6f, -inf), std::nextafter(-0x1.9d1d9ep6f, -inf)}) {
    x.push_back(v);
  }
  std::vector<float> y(x.size()), expected(x.size());
  kernels::exp_row(x.data(), 0.0f, y.data(), static_cast<int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = std::exp(x[i] - 0.0f);
  const std::vector<uint32_t> got = bits_of(y), want = bits_of(expected);
  int64_t mismatches = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (got[i] != want[i] && mismatches++ < 5) {
      ADD_FAILURE() << "exp(" << x[i] << "): " << y[i] << " vs std::exp " << expected[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(ExpRow, TailsAndSubtractedMaxMatchTheScalarExpression) {
  std::vector<float> x(37);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 20.0f - 3.0f;
  x[5] = -std::numeric_limits<float>::infinity();  // a masked score
  for (int64_t n = 0; n <= 37; ++n) {
    for (float m : {0.0f, 17.0f, -2.5f}) {
      std::vector<float> y(x.size(), 7.0f);
      kernels::exp_row(x.data(), m, y.data(), n);
      for (int64_t j = 0; j < 37; ++j) {
        const float want = j < n ? std::exp(x[j] - m) : 7.0f;  // nothing past n is written
        EXPECT_EQ(std::bit_cast<uint32_t>(y[j]), std::bit_cast<uint32_t>(want))
            << "n=" << n << " m=" << m << " j=" << j;
      }
    }
  }
  // In place, as the softmax kernels call it.
  std::vector<float> y = x;
  kernels::exp_row(y.data(), 1.5f, y.data(), 37);
  for (int64_t j = 0; j < 37; ++j) EXPECT_EQ(y[j], std::exp(x[j] - 1.5f));
}

TEST(DivideMaxRow, MatchesTheScalarLoop) {
  for (int64_t n : {0, 1, 7, 8, 9, 64, 1000}) {
    std::vector<float> x(n), y;
    for (int64_t i = 0; i < n; ++i) x[i] = std::cos(float(i) * 0.37f) * 50.0f;
    if (n > 3) x[2] = std::numeric_limits<float>::quiet_NaN();  // skipped, as by q > max
    y = x;
    float want = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      x[i] = x[i] / 8.0f;
      want = x[i] > want ? x[i] : want;
    }
    const float got = kernels::divide_max_row(y.data(), 8.0f, n);
    EXPECT_EQ(got, want) << "n=" << n;
    EXPECT_EQ(bits_of(y), bits_of(x)) << "n=" << n;
  }
}

// softmax_row, softmax_weights_row and softmax_backward_row (one call per row of the fused
// attention) against the steps they fuse (softmax_row_steps, softmax_weights_row_steps,
// softmax_backward_row_steps: divide_max_row, exp_row, vec_lane_sum, vec_lane_dot, the loops): the
// same bits at every valid length 0..70 (the sixteen-lane tails), rows shorter and longer than the
// eight lanes of the sum, scores that overflow exp, a nan, and zeros of both signs. The max may
// differ only in the sign of a zero.
std::vector<float> scores(int64_t n, uint32_t seed) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(float(i * 7 + seed) * 0.37f) * 40.0f;
  if (seed % 3 == 1 && n > 5) x[5] = -0.0f;
  if (seed % 3 == 2 && n > 3) x[3] = 0.0f;
  if (seed % 5 == 4 && n > 9) x[9] = std::numeric_limits<float>::quiet_NaN();
  if (seed % 7 == 6 && n > 1) x[1] = 1e30f;
  return x;
}

TEST(SoftmaxRow, SameBitsAsItsSteps) {
  for (int64_t row : {1, 5, 8, 40, 70}) {
    for (int64_t valid = 0; valid <= row; ++valid) {
      for (uint32_t seed = 0; seed < 7; ++seed) {
        SCOPED_TRACE(::testing::Message()
                     << "row=" << row << " valid=" << valid << " seed=" << seed);
        const int64_t width = row + 3;
        std::vector<float> x = scores(width, seed), y = x;
        float m1 = 0, i1 = 0, m2 = 0, i2 = 0;
        kernels::softmax_row(x.data(), 5.656854f, valid, row, width, &m1, &i1);
        kernels::softmax_row_steps(y.data(), 5.656854f, valid, row, width, &m2, &i2);
        EXPECT_EQ(bits_of(x), bits_of(y));
        EXPECT_TRUE(m1 == m2 || (std::isnan(m1) && std::isnan(m2)));
        EXPECT_EQ(std::bit_cast<uint32_t>(i1), std::bit_cast<uint32_t>(i2));
        // The weights again from the saved max and inverse, as the backward recomputes them.
        std::vector<float> w = scores(width, seed), v = w;
        kernels::softmax_weights_row(w.data(), 5.656854f, m2, i2, valid, width);
        kernels::softmax_weights_row_steps(v.data(), 5.656854f, m2, i2, valid, width);
        EXPECT_EQ(bits_of(w), bits_of(v));
        // The backward of the row: dW (scores reused as gradients, zeros of both signs) into dS.
        std::vector<float> g = scores(width, seed + 1), h = g;
        kernels::softmax_backward_row(g.data(), w.data(), 5.656854f, valid, row, width);
        kernels::softmax_backward_row_steps(h.data(), w.data(), 5.656854f, valid, row, width);
        EXPECT_EQ(bits_of(g), bits_of(h));
      }
    }
  }
  // A row of -0 gradients: every lane's sum stays -0, so D = -0 and dS = +0 / divisor; a lane
  // past `valid` turned to +0 (by adding a padded 0 * 0) would make D = +0 and dS = -0.
  for (int64_t valid : {3, 11, 21}) {
    std::vector<float> w(32, 0.25f), g(32, -0.0f), h = g;
    kernels::softmax_backward_row(g.data(), w.data(), 8.0f, valid, 32, 32);
    kernels::softmax_backward_row_steps(h.data(), w.data(), 8.0f, valid, 32, 32);
    EXPECT_EQ(bits_of(g), bits_of(h)) << "valid=" << valid;
  }
}

}  // namespace
}  // namespace ember
