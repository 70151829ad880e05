// Adversarial: type rules. An in-place result must be castable to the
// destination's dtype, a hook may not change a gradient's dtype, sizes are never negative, a
// fill value must fit float32, and mixed-dtype ops promote as torch.result_type.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;
using test::expect_error;
using test::values;

Tensor ints() { return arange(3); }  // int64 [0, 1, 2]

TEST(AdvTypes, FloatResultIntoInt64IsAnError) {
  // torch.arange(3).add_(torch.full((3,), .7))
  //   -> RuntimeError: result type Float can't be cast to the desired output type Long
  const std::string msg = "result type Float can't be cast to the desired output type Long";
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> ops = {
      {"add_", [](Tensor& t) { t.add_(full({3}, .7)); }},
      {"add_", [](Tensor& t) { t.add_(1.5); }},
      {"add_", [](Tensor& t) { t += full({3}, 2.0); }},
      {"sub_", [](Tensor& t) { t.sub_(full({3}, 1.0)); }},
      {"sub_", [](Tensor& t) { t.sub_(0.5); }},
      {"mul_", [](Tensor& t) { t.mul_(0.5); }},
      {"mul_", [](Tensor& t) { t.mul_(2.0); }},  // a Python float, even a whole one
      {"add_", [](Tensor& t) { t.add_(1.0); }},
      {"mul_", [](Tensor& t) { t.mul_(ones({3})); }},
      {"div_", [](Tensor& t) { t.div_(2.0); }},  // true division: float even for 2
      {"div_", [](Tensor& t) { t.div_(full({3}, 2, DType::Int64)); }},
      {"addcmul_", [](Tensor& t) { t.addcmul_(ones({3}), ones({3})); }},
      {"sqrt_", [](Tensor& t) { t.sqrt_(); }},
      {"clamp_", [](Tensor& t) { t.clamp_(0.5, 1.5); }},
  };
  for (const auto& [op, run] : ops) {
    SCOPED_TRACE(op);
    Tensor t = ints();
    expect_error([&] { run(t); }, op + ": " + msg);
    EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2})) << "must be untouched";
  }
  // float64 into float32 is a cast PyTorch allows.
  Tensor f = zeros({3});
  f.add_(full({3}, 0.1, DType::Float64));
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(values(f)[0], static_cast<double>(0.1f));
}

TEST(AdvTypes, IntegralResultsIntoInt64AreFine) {
  // torch.arange(3).mul_(2) -> tensor([0, 2, 4]); clamp_(0, 1) -> tensor([0, 1, 1])
  Tensor t = ints();
  t.mul_(2);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  t.add_(full({3}, 3, DType::Int64), 2);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{6, 8, 10}));
  t.clamp_(7, 9);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  t.sub_(ones({3}, DType::Bool));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(t.dtype(), DType::Int64);
}

TEST(AdvTypes, IntegralAlphaOnly) {
  // torch.arange(3).add_(torch.ones(3, dtype=torch.long), alpha=0.5)
  //   -> For integral input tensors, argument alpha must not be a floating point number.
  Tensor t = ints();
  expect_error([&] { t.add_(ones({3}, DType::Int64), 0.5); },
               "alpha must not be a floating point number");
  expect_error([&] { t.sub_(ones({3}, DType::Int64), 2.0); },
               "alpha must not be a floating point number");
  t.add_(ones({3}, DType::Int64), 2);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4}));
  expect_error([&] { add(ints(), ints(), 1.5); }, "add: for integral input tensors");
}

TEST(AdvTypes, BoolDestinations) {
  // torch.ones(3, dtype=torch.bool).add_(1)
  //   -> result type Long can't be cast to the desired output type Bool
  Tensor b = ones({3}, DType::Bool);
  expect_error([&] { b.add_(1); },
               "add_: result type Long can't be cast to the desired output type Bool");
  expect_error([&] { b.mul_(0.5); },
               "mul_: result type Float can't be cast to the desired output type Bool");
  b.mul_(tensor({1, 0, 1}).to_bool());  // bool * bool stays bool
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  // torch.arange(3).sub_(torch.ones(3, dtype=torch.bool)) is fine for int64 (above); bool - bool:
  expect_error([&] { b.sub_(b.clone()); }, "with a bool tensor is not supported");
}

TEST(AdvTypes, HookChangingTheDtypeIsAnError) {
  // p.register_hook(lambda g: g.double())
  //   -> hook '<lambda>' has changed the type of value (was torch.FloatTensor got ...Double...)
  Tensor p = ones({2}).requires_grad_();
  p.register_hook([](const Tensor& g) { return g.to(DType::Float64); });
  expect_error([&] { p.sum().backward(); },
               "hook has changed the type of value (was float32 got float64)");
  EXPECT_FALSE(p.grad().defined());
  // The same on a non-leaf (a hook run by its grad_fn).
  Tensor q = ones({2}).requires_grad_();
  Tensor y = q * 2.0;
  y.register_hook([](const Tensor& g) { return g.to(DType::Float64); });
  expect_error([&] { y.sum().backward(); }, "hook has changed the type of value");
  // A hook keeping the dtype still works.
  Tensor r = ones({2}).requires_grad_();
  r.register_hook([](const Tensor& g) { return g * 3.0; });
  r.sum().backward();
  EXPECT_EQ(values(r.grad()), (std::vector<double>{3, 3}));
  EXPECT_EQ(r.grad().dtype(), DType::Float32);
}

TEST(AdvTypes, NegativeSizesAreErrors) {
  expect_error([] { ones({1}).expand({-2}); }, "expand: the expanded size -2 is invalid");
  expect_error([] { ones({2, 1}).expand({2, -3}); }, "expand: the expanded size -3 is invalid");
  expect_error([] { ones({1}).expand({-1, 2}); }, "expand: the expanded size -1 is invalid");
  EXPECT_EQ(ones({2, 1}).expand({-1, 4}).shape(), (Shape{2, 4}));  // -1 keeps a dim
  expect_error([] { ones({2}).view({-2}); }, "view: invalid shape dimension -2");
  expect_error([] { ones({2}).reshape({-3, 1}); }, "reshape: invalid shape dimension -3");
  expect_error([] { zeros({-1}); }, "negative dimension");
  expect_error([] { ones({2, -1}); }, "negative dimension");
  expect_error([] { full({-5}, 1.0); }, "negative dimension");
  expect_error([] { empty({3, -2}, DType::Int64); }, "negative dimension");
}

TEST(AdvTypes, FillValueMustFitFloat32) {
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

TEST(AdvTypes, ResultTypeMatchesTorchResultType) {
  // torch.result_type for each pair: (a, b) -> expected dtype.
  Tensor i = arange(3), f = ones({3}), d = ones({3}, DType::Float64), b = ones({3}, DType::Bool);
  Tensor i0 = scalar_tensor(2, DType::Int64), f0 = scalar_tensor(2.5),
         d0 = scalar_tensor(2.5, DType::Float64), b0 = scalar_tensor(1, DType::Bool);
  struct Case {
    Tensor a, b;
    DType expected;
  };
  const std::vector<Case> cases = {
      {i, f, DType::Float32},   {i, d, DType::Float64},   {f, d, DType::Float64},
      {b, i, DType::Int64},     {b, f, DType::Float32},   {i, f0, DType::Float32},
      {i, d0, DType::Float64},  // a 0-d float64 tensor beside int64 gives float64
      {f, d0, DType::Float32},  // ... but not beside float32 (same category)
      {b, i0, DType::Int64},    {b, d0, DType::Float64},  {i, b0, DType::Int64},
      {f0, d0, DType::Float64}, {i0, f0, DType::Float32}, {f, i0, DType::Float32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.a.dtype()) + " dim " + std::to_string(c.a.dim()) + " with " +
                 dtype_name(c.b.dtype()) + " dim " + std::to_string(c.b.dim()));
    EXPECT_EQ(add(c.a, c.b).dtype(), c.expected);
    EXPECT_EQ(add(c.b, c.a).dtype(), c.expected);
    EXPECT_EQ(mul(c.a, c.b).dtype(), c.expected);
    EXPECT_EQ(maximum(c.a, c.b).dtype(), c.expected);
    EXPECT_EQ(where(ones({3}, DType::Bool), c.a, c.b).dtype(), c.expected);
  }
  // Python scalars: an int keeps int64, a float gives float32 (the default dtype), as
  // torch.arange(3) + 2 (int64) and torch.arange(3) + 2.0 (float32).
  EXPECT_EQ((i + 2).dtype(), DType::Int64);
  EXPECT_EQ((i + 2.0).dtype(), DType::Float32);
  EXPECT_EQ((2.0 - i).dtype(), DType::Float32);
  EXPECT_EQ((2 - i).dtype(), DType::Int64);
  EXPECT_EQ((i * 0.5).dtype(), DType::Float32);
  EXPECT_EQ((i * int64_t{3}).dtype(), DType::Int64);
  EXPECT_EQ((b + 1).dtype(), DType::Int64);
  EXPECT_EQ((b + 1.0).dtype(), DType::Float32);
  EXPECT_EQ(eq(i, 1.5).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ((d + 2.5).dtype(), DType::Float64);
  EXPECT_EQ((i / 2.0).dtype(), DType::Float32);
  EXPECT_EQ(div(i, i).dtype(), DType::Float32);
  EXPECT_EQ(sum(i).dtype(), DType::Int64);
  EXPECT_EQ(sum(b).dtype(), DType::Int64);
  EXPECT_EQ(relu(i).dtype(), DType::Int64);
  EXPECT_EQ(exp(i).dtype(), DType::Float32);
  EXPECT_EQ(pow(i, 2).dtype(), DType::Int64);
  EXPECT_EQ(pow(i, 2.0).dtype(), DType::Float32);
  EXPECT_EQ(pow(i, 0.5).dtype(), DType::Float32);
  expect_error([&] { pow(i, -1); }, "Integers to negative integer powers are not allowed");
  EXPECT_EQ(pow(i, -1.0).dtype(), DType::Float32);
  EXPECT_EQ(clamp(i, 0, 1).dtype(), DType::Int64);
  EXPECT_EQ(clamp(i, 0.5, 1).dtype(), DType::Float32);
  EXPECT_EQ(clamp(i, 0.0, None).dtype(), DType::Float32);
}

TEST(AdvTypes, FloatToInt64CastsOfNonFiniteValuesAreErrors) {
  // The repo's rule (tests/core/test_int_conversion.cpp): a value int64 cannot hold is an Error.
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

}  // namespace
}  // namespace ember
