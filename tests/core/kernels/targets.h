// Running a test on every Highway target this CPU has (core/base/cpu.h): the kernels written
// over Highway are tested target by target against the plain loops they replace
// (hwy::SetSupportedTargetsForTest picks one at a time).
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/cpu.h"
#include "hwy/highway.h"

namespace ember::test {

// The targets compiled in that this CPU has, best first, EMBER_CPU_CAPABILITY's cap applied.
// (Highway 1.0.3's SupportedTargets(), which this asks, leaves the chosen target uncapped until
// the next DisableTargets or SetSupportedTargetsForTest: the call with 0 after it makes the next
// dispatch choose again, capped.)
inline std::vector<int64_t> runnable_targets() {
  cpu::apply_capability();
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  hwy::SetSupportedTargetsForTest(0);
  return targets;
}

// Runs f once on each runnable target, with that target chosen; SCOPED_TRACE names it. Returns
// the targets' names.
template <typename F>
std::vector<std::string> on_every_target(F f) {
  std::vector<std::string> names;
  for (int64_t target : runnable_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    names.push_back(cpu::target_name());
    EXPECT_EQ(names.back(), hwy::TargetName(target));
    f();
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the CPU's own
  return names;
}

// The bits of a float or a double.
template <typename T>
auto bit_pattern(T v) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<uint32_t>(v);
  } else {
    return std::bit_cast<uint64_t>(v);
  }
}

// got and want have the same bits, element by element; the first difference fails the test,
// named by `what` and the element.
template <typename T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(bit_pattern(got[i]), bit_pattern(want[i]))
        << what << " element " << i << ": " << got[i] << " vs the plain loop's " << want[i];
  }
}

inline std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float x : v) out.push_back(std::bit_cast<uint32_t>(x));
  return out;
}

}  // namespace ember::test
