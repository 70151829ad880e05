// The optimizers' vector updates (optim/update_kernels.h) on every Highway target this CPU has,
// against their plain loops: the same bits in the parameter and every state array, float32 and
// float64, every combination of the options that changes the arithmetic (Adam and AdamW with
// maximize, amsgrad and weight decay; SGD with maximize, weight decay, a first or a later step of
// momentum, nesterov, no momentum; RMSprop with momentum and centered; Adagrad), at every length up to 40 (the tails) and at an offset.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "optim/update_kernels.h"
#include "tests/core/kernels/targets.h"

namespace ember {
namespace {

using optim::AdagradArrays;
using optim::AdagradConstants;
using optim::AdamArrays;
using optim::AdamConstants;
using optim::RmspropArrays;
using optim::RmspropConstants;
using optim::SgdArrays;
using optim::SgdConstants;

// n values of about `scale`, of both signs, from `seed` (a zero and a tiny one among them).
template <typename T>
std::vector<T> values(int64_t n, double seed, double scale, bool positive = false) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double s = std::sin(seed + 1.7 * static_cast<double>(i));
    v[i] = static_cast<T>(scale * (positive ? s * s : s));
  }
  if (n > 3) v[3] = T(0);
  if (n > 5) v[5] = static_cast<T>(scale * 1e-30);
  return v;
}

// The lengths: every one up to 40, each also starting at element 5.
struct Range {
  int64_t size, begin;
};
std::vector<Range> ranges() {
  std::vector<Range> r;
  for (int64_t n = 0; n <= 40; ++n) r.push_back({n, 0});
  for (int64_t n = 5; n <= 45; n += 4) r.push_back({n, 5});
  r.push_back({1001, 3});
  return r;
}

template <typename T>
std::string describe(int options, Range r) {
  return std::to_string(sizeof(T) * 8) + "-bit, options " + std::to_string(options) +
         ", n = " + std::to_string(r.size) + " from " + std::to_string(r.begin);
}

template <typename T>
void check_adam() {
  for (int which = 0; which < 16; ++which) {
    const bool decoupled = which & 1, maximize = which & 2, amsgrad = which & 4, decay = which & 8;
    const double wd = decay ? 0.1 : 0.0, lr = 1e-3, beta1 = 0.9, beta2 = 0.999, step = 3;
    const AdamConstants<T> c{static_cast<T>(beta1),
                             static_cast<T>(beta2),
                             static_cast<T>(1 - beta1),
                             static_cast<T>(1 - beta2),
                             static_cast<T>(wd),
                             static_cast<T>(1 - lr * wd),
                             static_cast<T>(std::sqrt(1 - std::pow(beta2, step))),
                             static_cast<T>(1e-8),
                             static_cast<T>(-lr / (1 - std::pow(beta1, step))),
                             decoupled,
                             maximize,
                             amsgrad,
                             !decoupled && wd != 0};
    for (const Range r : ranges()) {
      const std::string what = describe<T>(which, r);
      const std::vector<T> p0 = values<T>(r.size, 0.3, 0.5), g = values<T>(r.size, 1.1, 1e-2),
                           m0 = values<T>(r.size, 2.3, 1e-3),
                           v0 = values<T>(r.size, 3.7, 1e-5, true),
                           max0 = values<T>(r.size, 4.1, 1e-5, true);
      std::vector<T> p = p0, m = m0, v = v0, vmax = max0;
      const auto arrays = [&](std::vector<T>& pp, std::vector<T>& mm, std::vector<T>& vv,
                              std::vector<T>& mx) {
        return AdamArrays<T>{pp.data(), g.data(), mm.data(), vv.data(),
                             amsgrad ? mx.data() : nullptr};
      };
      optim::adam_update_plain(arrays(p, m, v, vmax), c, r.begin, r.size);
      test::on_every_target([&] {
        std::vector<T> p1 = p0, m1 = m0, v1 = v0, max1 = max0;
        optim::adam_update(arrays(p1, m1, v1, max1), c, r.begin, r.size);
        test::expect_same_bits(p1, p, what + ", param");
        test::expect_same_bits(m1, m, what + ", exp_avg");
        test::expect_same_bits(v1, v, what + ", exp_avg_sq");
        test::expect_same_bits(max1, vmax, what + ", max_exp_avg_sq");
      });
    }
  }
}

template <typename T>
void check_sgd() {
  for (int which = 0; which < 32; ++which) {
    const bool maximize = which & 1, decay = which & 2, first = which & 4, nesterov = which & 8,
               momentum = which & 16;
    if (nesterov && !momentum) continue;
    const SgdConstants<T> c{static_cast<T>(decay ? 0.01 : 0.0),
                            static_cast<T>(0.9),
                            static_cast<T>(nesterov ? 1.0 : 1 - 0.1),
                            static_cast<T>(-0.05),
                            maximize,
                            decay,
                            first,
                            nesterov};
    for (const Range r : ranges()) {
      const std::string what = describe<T>(which, r);
      const std::vector<T> p0 = values<T>(r.size, 0.3, 0.5), g = values<T>(r.size, 1.1, 1e-1),
                           buf0 = values<T>(r.size, 2.3, 1e-1);
      std::vector<T> p = p0, buf = buf0;
      optim::sgd_update_plain(SgdArrays<T>{p.data(), g.data(), momentum ? buf.data() : nullptr}, c,
                              r.begin, r.size);
      test::on_every_target([&] {
        std::vector<T> p1 = p0, buf1 = buf0;
        optim::sgd_update(SgdArrays<T>{p1.data(), g.data(), momentum ? buf1.data() : nullptr}, c,
                          r.begin, r.size);
        test::expect_same_bits(p1, p, what + ", param");
        test::expect_same_bits(buf1, buf, what + ", momentum_buffer");
      });
    }
  }
}

template <typename T>
void check_rmsprop() {
  for (int which = 0; which < 16; ++which) {
    const bool maximize = which & 1, decay = which & 2, momentum = which & 4, centered = which & 8;
    const RmspropConstants<T> c{static_cast<T>(0.99),
                                static_cast<T>(1 - 0.99),
                                static_cast<T>(decay ? 0.01 : 0.0),
                                static_cast<T>(1e-8),
                                static_cast<T>(0.9),
                                static_cast<T>(-0.01),
                                maximize,
                                decay};
    for (const Range r : ranges()) {
      const std::string what = describe<T>(which, r);
      const std::vector<T> p0 = values<T>(r.size, 0.3, 0.5), g = values<T>(r.size, 1.1, 1e-1),
                           sq0 = values<T>(r.size, 2.3, 1e-2, true),
                           buf0 = values<T>(r.size, 3.1, 1e-1), ga0 = values<T>(r.size, 4.7, 1e-2);
      const auto arrays = [&](std::vector<T>& p, std::vector<T>& sq, std::vector<T>& buf,
                              std::vector<T>& ga) {
        return RmspropArrays<T>{p.data(), g.data(), sq.data(), momentum ? buf.data() : nullptr,
                                centered ? ga.data() : nullptr};
      };
      std::vector<T> p = p0, sq = sq0, buf = buf0, ga = ga0;
      optim::rmsprop_update_plain(arrays(p, sq, buf, ga), c, r.begin, r.size);
      test::on_every_target([&] {
        std::vector<T> p1 = p0, sq1 = sq0, buf1 = buf0, ga1 = ga0;
        optim::rmsprop_update(arrays(p1, sq1, buf1, ga1), c, r.begin, r.size);
        test::expect_same_bits(p1, p, what + ", param");
        test::expect_same_bits(sq1, sq, what + ", square_avg");
        test::expect_same_bits(buf1, buf, what + ", momentum_buffer");
        test::expect_same_bits(ga1, ga, what + ", grad_avg");
      });
    }
  }
}

template <typename T>
void check_adagrad() {
  for (int which = 0; which < 4; ++which) {
    const bool maximize = which & 1, decay = which & 2;
    const AdagradConstants<T> c{static_cast<T>(decay ? 0.01 : 0.0), static_cast<T>(1e-10),
                                static_cast<T>(-0.01 / (1 + 2 * 0.001)), maximize, decay};
    for (const Range r : ranges()) {
      const std::string what = describe<T>(which, r);
      const std::vector<T> p0 = values<T>(r.size, 0.3, 0.5), g = values<T>(r.size, 1.1, 1e-1),
                           sum0 = values<T>(r.size, 2.3, 1e-2, true);
      std::vector<T> p = p0, sum = sum0;
      optim::adagrad_update_plain(AdagradArrays<T>{p.data(), g.data(), sum.data()}, c, r.begin,
                                  r.size);
      test::on_every_target([&] {
        std::vector<T> p1 = p0, sum1 = sum0;
        optim::adagrad_update(AdagradArrays<T>{p1.data(), g.data(), sum1.data()}, c, r.begin,
                              r.size);
        test::expect_same_bits(p1, p, what + ", param");
        test::expect_same_bits(sum1, sum, what + ", sum");
      });
    }
  }
}

TEST(UpdateKernels, AdamOnEveryTargetHasThePlainLoopsBits) {
  check_adam<float>();
  check_adam<double>();
}

TEST(UpdateKernels, SgdOnEveryTargetHasThePlainLoopsBits) {
  check_sgd<float>();
  check_sgd<double>();
}

TEST(UpdateKernels, RmspropOnEveryTargetHasThePlainLoopsBits) {
  check_rmsprop<float>();
  check_rmsprop<double>();
}

TEST(UpdateKernels, AdagradOnEveryTargetHasThePlainLoopsBits) {
  check_adagrad<float>();
  check_adagrad<double>();
}

}  // namespace
}  // namespace ember
