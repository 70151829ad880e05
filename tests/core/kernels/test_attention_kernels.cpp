// The fused attention's elementwise kernel (core/kernels/attention.h: multiply_row, the dropout
// mask's product) on every Highway target this CPU has against its plain loop: the same bits,
// float32 and float64, at every length up to 70 (the tails), in place, with a dropout mask's
// values (0 and 1 / (1 - p)) and special values; nothing past n is written.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels/attention.h"
#include "tests/core/kernels/targets.h"

namespace ember {
namespace {

template <typename T>
void check() {
  constexpr int64_t kMax = 70;
  std::vector<T> a(kMax), mask(kMax);
  for (int64_t j = 0; j < kMax; ++j) {
    a[j] = static_cast<T>(std::sin(0.7 * static_cast<double>(j)) * 3);
    mask[j] = j % 3 == 1 ? T(0) : static_cast<T>(1 / (1 - 0.1));
  }
  a[2] = std::numeric_limits<T>::infinity();  // inf * 0 = nan, inf * 1.11 = inf
  a[4] = std::numeric_limits<T>::quiet_NaN();
  a[5] = -T(0);
  test::on_every_target([&] {
    for (int64_t n = 0; n <= kMax; ++n) {
      std::vector<T> want(kMax, T(7)), got(kMax, T(7));
      kernels::multiply_row_plain(a.data(), mask.data(), want.data(), n);
      kernels::multiply_row(a.data(), mask.data(), got.data(), n);
      std::vector<T> in_place = a;
      kernels::multiply_row(in_place.data(), mask.data(), in_place.data(), n);
      for (int64_t j = 0; j < kMax; ++j) {
        ASSERT_EQ(test::bit_pattern(got[j]), test::bit_pattern(want[j]))
            << sizeof(T) * 8 << "-bit, n = " << n << ", " << j;
        ASSERT_EQ(test::bit_pattern(in_place[j]), test::bit_pattern(j < n ? want[j] : a[j]))
            << "in place, n = " << n;
      }
      if (n > 1) {
        ASSERT_EQ(want[1], T(0));  // the plain loop multiplied
      }
      if (n < kMax) {
        ASSERT_EQ(want[n], T(7));  // and wrote nothing past n
      }
    }
  });
}

TEST(AttentionKernels, MultiplyRowOnEveryTargetHasThePlainLoopsBits) {
  check<float>();
  check<double>();
}

}  // namespace
}  // namespace ember
