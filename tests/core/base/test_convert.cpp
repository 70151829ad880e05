// Element conversions (core/base/convert.h): a value the destination cannot hold (inf, nan or an
// out-of-range value into int64, a fill value beyond float32's range) is an ember::Error, never
// undefined behaviour; arithmetic that overflows float32 gives inf, as in PyTorch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::values;

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
              ::testing::HasSubstr("full: value nan cannot be converted"));
  EXPECT_THAT(message_of([&] { t.set({0}, 1e30); }), ::testing::HasSubstr("set: value"));
  // Representable values still work.
  EXPECT_EQ(masked_fill(t, mask, -7.0).at({0}), -7.0);
}

TEST(IntConversion, FloatToInt64CastsOfNonFiniteValuesAreErrors) {
  const std::string msg = "cannot be converted to type int64 without overflow";
  expect_error([] { tensor({1.0, NAN}).to(DType::Int64); }, msg);
  expect_error([] { tensor({INFINITY}).to(DType::Int64); }, msg);
  expect_error([] { tensor({1e30}, DType::Float64).to(DType::Int64); }, msg);
  expect_error([] { zeros({2}, DType::Int64).copy_(tensor({1.0, -INFINITY})); }, msg);
  expect_error([] { tensor({NAN}).item<int64_t>(); }, msg);
  expect_error([] { tensor({9.3e18}, DType::Float64).item<int64_t>(); }, msg);
  EXPECT_EQ(tensor({-2.75}).to(DType::Int64).item<int64_t>(), -2);  // truncates, as PyTorch
  EXPECT_EQ(tensor({-9.2e18}, DType::Float64).item<int64_t>(), -9200000000000000000LL);
}

TEST(FloatConversion, FillValueMustFitFloat32) {
  // torch.full((2,), 1e300) -> RuntimeError: value cannot be converted to type float without
  // overflow; the same for fill_, masked_fill_ and an element write.
  const std::string msg = "cannot be converted to type float without overflow";
  expect_error([] { full({2}, 1e300); }, msg);
  expect_error([] { full({2}, -3.5e38); }, msg);
  expect_error([] { ones({2}).fill_(1e39); }, msg);
  expect_error([] { ones({2}).masked_fill_(ones({2}, DType::Bool), 1e300); }, msg);
  expect_error([] { masked_fill(ones({2}), ones({2}, DType::Bool), -1e300); }, msg);
  expect_error([] { ones({2}).set({0}, 1e300); }, msg);
  expect_error([] { scalar_tensor(1e40); }, msg);
  // float64 holds it; inf, nan and float32's largest value are representable.
  EXPECT_EQ(full({1}, 1e300, DType::Float64).item(), 1e300);
  EXPECT_TRUE(std::isinf(full({1}, INFINITY).item()));
  EXPECT_TRUE(std::isnan(full({1}, NAN).item()));
  EXPECT_EQ(full({1}, 3.4028234663852886e38).item(), 3.4028234663852886e38);
  // Arithmetic with a huge scalar is not a fill: it overflows to inf as in PyTorch
  // (torch.ones(2) + 1e300 -> tensor([inf, inf])).
  EXPECT_TRUE(std::isinf(values(ones({2}) + 1e300)[0]));
  Tensor t = ones({2});
  t.mul_(1e300);
  EXPECT_TRUE(std::isinf(values(t)[1]));
}

}  // namespace
}  // namespace ember
