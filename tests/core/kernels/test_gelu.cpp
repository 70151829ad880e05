// The tanh-GELU kernels (core/kernels/gelu.h) on every Highway target this CPU has, against their
// plain loops (gelu_tanh_forward_plain, gelu_tanh_backward_plain): the same bits, float32 and
// float64, for both constants k, the forward with and without its tanh output, the backward in
// both forms, at every length up to 70 (each target's tails), across the 256-element blocks and
// past the size where a second thread starts, in place, and on special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/kernels/gelu.h"
#include "core/kernels/libm.h"
#include "tests/core/kernels/targets.h"

namespace ember {
namespace {

// n values over [-6, 6), some tiny and some large, and the special values at the front.
template <typename T>
std::vector<T> inputs(int64_t n) {
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> special = {T(0),
                                  -T(0),
                                  inf,
                                  -inf,
                                  std::numeric_limits<T>::quiet_NaN(),
                                  T(1e-30),
                                  T(-3e4),
                                  T(12),
                                  std::numeric_limits<T>::denorm_min()};
  std::vector<T> x(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<std::size_t>(i) < special.size()
               ? special[i]
               : static_cast<T>(6 * std::sin(0.37 * static_cast<double>(i) + 0.1));
  }
  return x;
}

template <typename T>
void check_every_target(const std::vector<int64_t>& sizes) {
  for (const double k : {kernels::sqrt_2_over_pi(), kernels::book_sqrt_2_over_pi()}) {
    const T kt = static_cast<T>(k);
    for (const int64_t n : sizes) {
      const std::string what = std::to_string(sizeof(T) * 8) + "-bit, n = " + std::to_string(n);
      const std::vector<T> x = inputs<T>(n);
      std::vector<T> dy(x.size());
      for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<T>(std::cos(0.11 * i) - 0.3);
      std::vector<T> y_plain(x.size()), t_plain(x.size()), slope_plain(x.size()),
          chain_plain(x.size());
      kernels::gelu_tanh_forward_plain(x.data(), y_plain.data(), n, kt, t_plain.data());
      kernels::gelu_tanh_backward_plain(x.data(), t_plain.data(), dy.data(), slope_plain.data(), n,
                                        kt, kernels::GeluBackward::kSlope);
      kernels::gelu_tanh_backward_plain(x.data(), t_plain.data(), dy.data(), chain_plain.data(), n,
                                        kt, kernels::GeluBackward::kBookChain);
      test::on_every_target([&] {
        std::vector<T> y(x.size()), t(x.size()), dx(x.size());
        kernels::gelu_tanh_forward(x.data(), y.data(), n, kt, t.data());
        test::expect_same_bits(y, y_plain, what + ", forward");
        test::expect_same_bits(t, t_plain, what + ", tanh(u)");
        std::vector<T> in_place = x;  // x == y, no tanh output
        kernels::gelu_tanh_forward(in_place.data(), in_place.data(), n, kt);
        test::expect_same_bits(in_place, y_plain, what + ", forward in place");
        kernels::gelu_tanh_backward(x.data(), t.data(), dy.data(), dx.data(), n, kt,
                                    kernels::GeluBackward::kSlope);
        test::expect_same_bits(dx, slope_plain, what + ", backward (slope)");
        kernels::gelu_tanh_backward(x.data(), t.data(), dy.data(), dx.data(), n, kt,
                                    kernels::GeluBackward::kBookChain);
        test::expect_same_bits(dx, chain_plain, what + ", backward (the book's chain)");
      });
    }
  }
}

std::vector<int64_t> lengths() {
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n <= 70; ++n) sizes.push_back(n);
  for (const int64_t n : {255, 256, 257, 1000, 70001}) sizes.push_back(n);
  return sizes;
}

TEST(GeluKernels, EveryTargetHasThePlainLoopsBitsFloat32) {
  const int threads_before = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    check_every_target<float>(lengths());
  }
  set_num_threads(threads_before);
}

TEST(GeluKernels, EveryTargetHasThePlainLoopsBitsFloat64) { check_every_target<double>(lengths()); }

// The plain loops are what they say: one element against the formulas of gelu.h, by hand.
TEST(GeluKernels, ThePlainLoopsAreTheFormulas) {
  const float x = 0.75f, k = static_cast<float>(kernels::sqrt_2_over_pi()), dy = 1.5f;
  const float c = static_cast<float>(kernels::kGeluTanhCubic);
  const float t = kernels::libm::tanh(k * (x + c * (x * x * x)));  // tanh_row's plain loop
  float y = 0, tanh_u = 0, dx = 0;
  kernels::gelu_tanh_forward_plain(&x, &y, 1, k, &tanh_u);
  EXPECT_EQ(tanh_u, t);
  EXPECT_EQ(y, (0.5f * x) * (1.0f + t));
  kernels::gelu_tanh_backward_plain(&x, &tanh_u, &dy, &dx, 1, k, kernels::GeluBackward::kSlope);
  const float slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k *
                                              (1.0f + static_cast<float>(3 * 0.044715) * x * x);
  EXPECT_EQ(dx, dy * slope);
}

}  // namespace
}  // namespace ember
