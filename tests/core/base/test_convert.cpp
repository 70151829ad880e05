// Values that an int64 tensor cannot hold are errors, never undefined behaviour.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/ember.h"

namespace ember {
namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(IntConversion, InfinityIntoInt64IsAnError) {
  // torch.zeros(2, dtype=torch.long).masked_fill(torch.tensor([True, False]), float('-inf'))
  // -> RuntimeError: value cannot be converted to type int64_t without overflow
  Tensor t = zeros({2}, DType::Int64);
  Tensor mask = tensor({1, 0}).to_bool();
  EXPECT_THAT(message_of([&] { masked_fill(t, mask, -INFINITY); }),
              ::testing::HasSubstr("cannot be converted to type int64 without overflow"));
  EXPECT_THAT(message_of([&] { full({2}, NAN, DType::Int64); }),
              ::testing::HasSubstr("fill_: value nan cannot be converted"));
  EXPECT_THAT(message_of([&] { t.set({0}, 1e30); }), ::testing::HasSubstr("set: value"));
  // Representable values still work.
  EXPECT_EQ(masked_fill(t, mask, -7.0).at({0}), -7.0);
}

}  // namespace
}  // namespace ember
