// Elementwise ops: forward values against PyTorch 1.13, broadcasting, dtype promotion (as
// torch.result_type, and what an in-place result may be cast to), comparisons, activations (gelu
// exact and tanh), masked_fill and where; NaN, inf and signed zeros through activations and
// comparisons, and int64 wrapping on overflow, as PyTorch's.
//
// Expected numbers come from /usr/bin/python3 with torch 1.13; the Python line that produced them
// is in the comment above each literal, or they are in tests/fixtures/adversarial.txt
// (scripts/fixtures/gen_adversarial.py).
#include "core/ops/elementwise.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/graph/function.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Pointwise;

constexpr double kInf = std::numeric_limits<double>::infinity();

using test::expect_error;
using test::values;

// PyTorch's tensors for the NaN and int64 tests (scripts/fixtures/gen_adversarial.py).
const test::Fixture& adv() { return test::fixture_file("adversarial.txt"); }

// x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 1.5])
Tensor sample() { return tensor({-2.0, -0.5, 0.0, 0.5, 1.5}); }

Tensor ints() { return arange(3); }  // int64 [0, 1, 2]

// ---- arithmetic and broadcasting ----

TEST(ElementwiseArithmetic, BroadcastsLikePyTorch) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor b = tensor({10, 20, 30});
  Tensor c = tensor({{2}, {4}});
  // (a+b).tolist() -> [[11, 22, 33], [14, 25, 36]]
  Tensor sum = a + b;
  EXPECT_EQ(sum.shape(), (Shape{2, 3}));
  EXPECT_THAT(values(sum), ElementsAre(11, 22, 33, 14, 25, 36));
  // (a-c).tolist() -> [[-1, 0, 1], [0, 1, 2]]
  EXPECT_THAT(values(a - c), ElementsAre(-1, 0, 1, 0, 1, 2));
  // (a*c).tolist() -> [[2, 4, 6], [16, 20, 24]]
  EXPECT_THAT(values(a * c), ElementsAre(2, 4, 6, 16, 20, 24));
  // (b/c).tolist() -> [[5, 10, 15], [2.5, 5, 7.5]]
  Tensor q = b / c;
  EXPECT_EQ(q.shape(), (Shape{2, 3}));
  EXPECT_THAT(values(q), ElementsAre(5, 10, 15, 2.5, 5, 7.5));
  // (-a).tolist() -> [[-1, -2, -3], [-4, -5, -6]]
  EXPECT_THAT(values(-a), ElementsAre(-1, -2, -3, -4, -5, -6));
  EXPECT_THAT(values(neg(a)), ElementsAre(-1, -2, -3, -4, -5, -6));
}

TEST(ElementwiseArithmetic, NamedFunctionsMatchOperators) {
  Tensor a = tensor({1.5, -2.0});
  Tensor b = tensor({0.5, 4.0});
  EXPECT_TRUE(equal(add(a, b), a + b));
  EXPECT_TRUE(equal(sub(a, b), a - b));
  EXPECT_TRUE(equal(mul(a, b), a * b));
  EXPECT_TRUE(equal(div(a, b), a / b));
  EXPECT_THAT(values(add(a, 1.0)), ElementsAre(2.5, -1.0));
  EXPECT_THAT(values(sub(a, 1.0)), ElementsAre(0.5, -3.0));
  EXPECT_THAT(values(mul(a, 2.0)), ElementsAre(3.0, -4.0));
  EXPECT_THAT(values(div(a, 2.0)), ElementsAre(0.75, -1.0));
}

TEST(ElementwiseArithmetic, ScalarOnEitherSide) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  // (2-a).tolist() -> [[1, 0, -1], [-2, -3, -4]]
  EXPECT_THAT(values(2.0 - a), ElementsAre(1, 0, -1, -2, -3, -4));
  EXPECT_THAT(values(a - 2.0), ElementsAre(-1, 0, 1, 2, 3, 4));
  EXPECT_THAT(values(1.0 + a), ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_THAT(values(3.0 * a), ElementsAre(3, 6, 9, 12, 15, 18));
  // (2/a).tolist() -> [[2.0, 1.0, 0.6666666865348816], [0.5, 0.4000000059604645,
  // 0.3333333432674408]]
  EXPECT_THAT(values(2.0 / a), ElementsAre(2.0, 1.0, 0.6666666865348816, 0.5, 0.4000000059604645,
                                           0.3333333432674408));
  EXPECT_EQ((2.0 / a).dtype(), DType::Float32);
}

TEST(ElementwiseArithmetic, BroadcastsBothOperandsToANewShape) {
  Tensor col = tensor({{1}, {2}, {3}});  // [3, 1]
  Tensor row = tensor({10, 20});         // [2]
  Tensor out = col * row;
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_THAT(values(out), ElementsAre(10, 20, 20, 40, 30, 60));
  // A 0-d tensor broadcasts against anything.
  EXPECT_THAT(values(col + scalar_tensor(0.5)), ElementsAre(1.5, 2.5, 3.5));
}

TEST(ElementwiseArithmetic, WorksOnNonContiguousOperands) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor at = a.t();  // [3, 2], strides [1, 3]
  ASSERT_FALSE(at.is_contiguous());
  Tensor out = at + tensor({{100, 200}, {300, 400}, {500, 600}});
  EXPECT_TRUE(out.is_contiguous());
  EXPECT_THAT(values(out), ElementsAre(101, 204, 302, 405, 503, 606));
  // Slices with steps.
  Tensor every_other = arange(10.0, DType::Float32).slice(0, 1, std::nullopt, 3);  // 1, 4, 7
  EXPECT_THAT(values(every_other * 2.0), ElementsAre(2, 8, 14));
}

// ---- dtype promotion ----

TEST(ElementwisePromotion, IntegerAndBoolOperands) {
  Tensor i = tensor({1, 2, 3}, DType::Int64);
  // (i+1).dtype -> torch.int64
  Tensor plus = i + 1;
  EXPECT_EQ(plus.dtype(), DType::Int64);
  EXPECT_THAT(plus.to_vector<int64_t>(), ElementsAre(2, 3, 4));
  // (i/2).dtype -> torch.float32 (true division); values [0.5, 1.0, 1.5]
  Tensor half = i / 2.0;
  EXPECT_EQ(half.dtype(), DType::Float32);
  EXPECT_THAT(values(half), ElementsAre(0.5, 1.0, 1.5));
  // (i*0.5).dtype -> torch.float32, [0.5, 1.0, 1.5]
  Tensor scaled = i * 0.5;
  EXPECT_EQ(scaled.dtype(), DType::Float32);
  EXPECT_THAT(values(scaled), ElementsAre(0.5, 1.0, 1.5));
  // int / int tensor -> float32
  EXPECT_EQ((i / tensor({2, 2, 2}, DType::Int64)).dtype(), DType::Float32);
  // (i + torch.tensor([0.5])).dtype -> torch.float32
  EXPECT_EQ((i + tensor({0.5})).dtype(), DType::Float32);
  // (torch.tensor([True, False]) + 1).tolist() -> [2, 1] (int64)
  Tensor b = tensor({1, 0}, DType::Bool);
  Tensor bp = b + 1;
  EXPECT_EQ(bp.dtype(), DType::Int64);
  EXPECT_THAT(bp.to_vector<int64_t>(), ElementsAre(2, 1));
  // (torch.tensor([True, False]) + torch.tensor([True, True])).tolist() -> [True, True]
  Tensor bb = b + tensor({1, 1}, DType::Bool);
  EXPECT_EQ(bb.dtype(), DType::Bool);
  EXPECT_THAT(bb.to_vector<int64_t>(), ElementsAre(1, 1));
  // bool * bool is logical and.
  Tensor band = b * tensor({1, 1}, DType::Bool);
  EXPECT_EQ(band.dtype(), DType::Bool);
  EXPECT_THAT(band.to_vector<int64_t>(), ElementsAre(1, 0));
}

TEST(ElementwisePromotion, FloatWidths) {
  // (torch.tensor([1., 2.]) + torch.tensor(1., dtype=torch.float64)).dtype -> torch.float32
  EXPECT_EQ((tensor({1, 2}) + scalar_tensor(1.0, DType::Float64)).dtype(), DType::Float32);
  // (torch.tensor([1., 2.], dtype=torch.float64) + torch.tensor([1.])).dtype -> torch.float64
  EXPECT_EQ((tensor({1, 2}, DType::Float64) + tensor({1.0})).dtype(), DType::Float64);
  // Two 0-d tensors promote normally.
  EXPECT_EQ((scalar_tensor(1.0) + scalar_tensor(1.0, DType::Float64)).dtype(), DType::Float64);
  // Math on integers gives float32: torch.exp(torch.tensor([0, 1])).dtype -> torch.float32
  Tensor e = exp(tensor({0, 1}, DType::Int64));
  EXPECT_EQ(e.dtype(), DType::Float32);
  EXPECT_THAT(values(e), Pointwise(DoubleNear(1e-6), std::vector<double>{1.0, std::exp(1.0)}));
  // torch.tensor([-3, 2]).abs() -> tensor([3, 2]) int64
  Tensor ab = abs(tensor({-3, 2}, DType::Int64));
  EXPECT_EQ(ab.dtype(), DType::Int64);
  EXPECT_THAT(ab.to_vector<int64_t>(), ElementsAre(3, 2));
  // Float64 stays float64 through unary math.
  EXPECT_EQ(exp(tensor({0.0}, DType::Float64)).dtype(), DType::Float64);
}

TEST(ElementwisePromotion, ResultTypeMatchesTorchResultType) {
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

// Three operands follow the same rule as two: the 0-d ones raise the dtype of the others only
// from a higher category.
TEST(ElementwisePromotion, ThreeOperandsPromoteAsTorchResultType) {
  const Tensor x = tensor({1.0, 2.0}), y = tensor({3.0, 4.0});
  const Tensor s64 = scalar_tensor(0.1, DType::Float64);
  // torch.addcmul(x, torch.tensor(0.1, dtype=torch.float64), y) -> float32
  //   tensor([1.3000, 2.4000])
  Tensor r = addcmul(x, s64, y);
  EXPECT_EQ(r.dtype(), DType::Float32);
  test::expect_values(r, {1.3, 2.4});
  EXPECT_EQ(addcmul(x, y, s64).dtype(), DType::Float32);
  EXPECT_EQ(addcmul(s64, x, y).dtype(), DType::Float32);
  // With dims, float64 wins: torch.addcmul(x, y.double(), y).dtype -> torch.float64
  EXPECT_EQ(addcmul(x, y.to(DType::Float64), y).dtype(), DType::Float64);
  // All 0-d: torch.addcmul(torch.tensor(1.), torch.tensor(2., dtype=torch.float64),
  //   torch.tensor(3.)).dtype -> torch.float64
  EXPECT_EQ(
      addcmul(scalar_tensor(1.0), scalar_tensor(2.0, DType::Float64), scalar_tensor(3.0)).dtype(),
      DType::Float64);
  // A 0-d float next to integer tensors gives its own dtype:
  //   torch.addcmul(torch.arange(2), torch.tensor(0.5, dtype=torch.float64), torch.arange(2))
  //   -> tensor([0.0000, 1.5000], dtype=torch.float64)
  Tensor i = addcmul(arange(2), scalar_tensor(0.5, DType::Float64), arange(2));
  EXPECT_EQ(i.dtype(), DType::Float64);
  test::expect_values(i, {0.0, 1.5});
}

// Scalars: an integer and a floating point number are both accepted, and mean different things.
static_assert(EMBER_COMPILES(x + 1));
static_assert(EMBER_COMPILES(x + 1.5));
static_assert(EMBER_COMPILES(x.add_(x, 2)));
static_assert(EMBER_COMPILES(x.clamp_(0, 1)));
static_assert(EMBER_COMPILES(x.clamp_(None, 1.5)));

TEST(ElementwisePromotion, IntegerAndFloatScalarsPromoteDifferently) {
  Tensor i = arange(3);
  EXPECT_EQ((i * 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ((i * 2).dtype(), DType::Int64);
  EXPECT_EQ((i * 2.0).dtype(), DType::Float32);  // torch.arange(3) * 2.0 -> float32
  EXPECT_EQ((i * 2u).dtype(), DType::Int64);     // any C++ integer type is an integer
  EXPECT_EQ((i * 2.0f).dtype(), DType::Float32);
}

// Every C++ integer type is its exact value as an integer scalar, as a Python int: char,
// int8_t to int64_t, uint8_t to uint64_t, size_t, long long. An unsigned value above 2^63 - 1
// (a size_t that wrapped) is an Error naming it, as Python's int is refused:
//   torch.arange(3) + 2**63, torch.ones(2) * 2**63, torch.full((2,), 2**63), x.sum(2**63)
//   -> RuntimeError: Overflow when unpacking long
// and a constant expression holding such a Scalar does not compile.
static_assert(Scalar(uint64_t{INT64_MAX}).to_int64() == INT64_MAX);
static_assert(Scalar(static_cast<unsigned char>(255)).to_int64() == 255);
static_assert(Scalar(int8_t{-128}).to_int64() == -128);
static_assert(Scalar('a').to_int64() == 97 && Scalar('a').is_integral());
TEST(ElementwisePromotion, EveryIntegerTypeIsItsExactValue) {
  const Tensor i = zeros({1}, DType::Int64);
  const auto added = [&](Scalar s) { return (i + s).item<int64_t>(); };
  EXPECT_EQ(added(int8_t{-128}), -128);
  EXPECT_EQ(added(uint8_t{255}), 255);
  EXPECT_EQ(added(int16_t{-32768}), -32768);
  EXPECT_EQ(added(uint16_t{65535}), 65535);
  EXPECT_EQ(added(int32_t{INT32_MIN}), INT32_MIN);
  EXPECT_EQ(added(uint32_t{UINT32_MAX}), int64_t{UINT32_MAX});
  EXPECT_EQ(added(INT64_MIN), INT64_MIN);
  EXPECT_EQ(added(uint64_t{INT64_MAX}), INT64_MAX);
  EXPECT_EQ(added(std::size_t{12}), 12);
  EXPECT_EQ(added(12ull), 12);
  EXPECT_EQ(added(-12ll), -12);
  EXPECT_EQ(added('a'), 97);
  EXPECT_EQ(added(static_cast<signed char>(-1)), -1);
  EXPECT_EQ((i + std::size_t{3}).dtype(), DType::Int64);
  const std::string message =
      "Scalar: the integer 9223372036854775808 is out of int64's range [-9223372036854775808, "
      "9223372036854775807] (PyTorch's integers are int64: Python says \"Overflow when "
      "unpacking long\")";
  const uint64_t two63 = uint64_t{1} << 63;
  test::expect_error([&] { (void)(i + two63); }, message);
  test::expect_error([&] { (void)(ones({2}) * two63); }, message);
  test::expect_error([&] { (void)full({2}, two63); }, message);
  test::expect_error([&] { (void)full({2}, std::size_t{0} - 1); },
                     "Scalar: the integer 18446744073709551615 is out of int64's range");
  test::expect_error([&] { (void)ones({2}).sum(std::size_t{0} - 1); },
                     "dim: the integer 18446744073709551615 is out of int64's range");
}

// ---- unary math ----

// pow with an exponent outside PyTorch's special cases is std::pow in double, rounded once: the
// result of PyTorch 1.13's scalar loop, which computes small tensors and the tail of large ones
// (torch.set_num_threads(1)):
//   torch.full((20,), 1e17).pow(0.3) -> 125892.6015625 x16, then 125892.5390625 x4
// The first 16 come from its vector loop, Sleef's powf of float(0.3) (8 ulps away here; up to
// 33 for 2.2): Ember gives every element the scalar loop's 125892.5390625 (core/ops/
// arithmetic.cpp, Pow). For an exponent that is a float (1.5) both loops agree within 1 ulp.
TEST(ElementwiseUnary, PowOfAnyOtherExponentIsPyTorchsScalarLoop) {
  const std::vector<float> y = full({20}, 1e17).pow(0.3).to_vector<float>();
  EXPECT_EQ(y, std::vector<float>(20, 125892.5390625f));
  // torch.tensor([1e30, 123.456, 0.001]).pow(1.1) -> [9.999999944957273e+32, 199.8312530517578,
  // 0.0005011872854083776]
  EXPECT_EQ(
      tensor({1e30, 123.456, 0.001}).pow(1.1).to_vector<float>(),
      (std::vector<float>{9.999999944957273e+32f, 199.8312530517578f, 0.0005011872854083776f}));
}

TEST(ElementwiseUnary, MathFunctions) {
  Tensor x = sample();
  // torch.exp(x).tolist()
  EXPECT_THAT(values(exp(x)), Pointwise(DoubleNear(1e-6), std::vector<double>{
                                                              0.1353352814912796,
                                                              0.6065306663513184,
                                                              1.0,
                                                              1.6487212181091309,
                                                              4.481688976287842,
                                                          }));
  EXPECT_TRUE(allclose(x.exp(), exp(x)));
  // p = torch.tensor([0.25, 1.0, 4.0]); torch.log(p), torch.sqrt(p), p.pow(1.5), p.pow(-1)
  Tensor p = tensor({0.25, 1.0, 4.0});
  EXPECT_THAT(values(log(p)), Pointwise(DoubleNear(1e-6), std::vector<double>{
                                                              -1.3862943649291992,
                                                              0.0,
                                                              1.3862943649291992,
                                                          }));
  EXPECT_THAT(values(p.sqrt()), ElementsAre(0.5, 1.0, 2.0));
  EXPECT_THAT(values(p.pow(1.5)), ElementsAre(0.125, 1.0, 8.0));
  EXPECT_THAT(values(p.pow(-1)), ElementsAre(4.0, 1.0, 0.25));
  EXPECT_THAT(values(p.pow(2)), ElementsAre(0.0625, 1.0, 16.0));
  EXPECT_THAT(values(p.pow(0.5)), ElementsAre(0.5, 1.0, 2.0));
  EXPECT_THAT(values(p.pow(0)), ElementsAre(1.0, 1.0, 1.0));
  EXPECT_THAT(values(abs(x)), ElementsAre(2.0, 0.5, 0.0, 0.5, 1.5));
  EXPECT_THAT(values(x.abs()), ElementsAre(2.0, 0.5, 0.0, 0.5, 1.5));
  EXPECT_THAT(values(x.neg()), ElementsAre(2.0, 0.5, -0.0, -0.5, -1.5));
  // torch.abs(torch.tensor([-0.0, -inf])) -> tensor([0., inf]), and the zero is +0.0
  Tensor az = abs(tensor({-0.0, -std::numeric_limits<double>::infinity()}));
  EXPECT_FALSE(std::signbit(az.at({0})));
  EXPECT_EQ(az.at({1}), std::numeric_limits<double>::infinity());
  // Integer powers of integers stay integers: torch.tensor([2, 3]).pow(2) -> tensor([4, 9])
  Tensor ip = tensor({2, 3}, DType::Int64).pow(2);
  EXPECT_EQ(ip.dtype(), DType::Int64);
  EXPECT_THAT(ip.to_vector<int64_t>(), ElementsAre(4, 9));
}

TEST(ElementwiseUnary, Activations) {
  Tensor x = sample();
  // torch.tanh(x).tolist()
  EXPECT_THAT(values(tanh(x)), Pointwise(DoubleNear(1e-6), std::vector<double>{
                                                               -0.9640275835990906,
                                                               -0.46211716532707214,
                                                               0.0,
                                                               0.46211716532707214,
                                                               0.9051482677459717,
                                                           }));
  // torch.sigmoid(x).tolist()
  EXPECT_THAT(values(sigmoid(x)), Pointwise(DoubleNear(1e-6), std::vector<double>{
                                                                  0.11920291930437088,
                                                                  0.3775406777858734,
                                                                  0.5,
                                                                  0.622459352016449,
                                                                  0.8175744414329529,
                                                              }));
  // torch.relu(x).tolist() -> [0.0, 0.0, 0.0, 0.5, 1.5]
  EXPECT_THAT(values(relu(x)), ElementsAre(0.0, 0.0, 0.0, 0.5, 1.5));
}

TEST(ElementwiseUnary, GeluExactAndTanhMatchPyTorch) {
  Tensor x = sample();
  // torch.nn.functional.gelu(x).tolist()
  EXPECT_THAT(values(gelu(x)), Pointwise(DoubleNear(1e-6), std::vector<double>{
                                                               -0.045500099658966064,
                                                               -0.1542687863111496,
                                                               0.0,
                                                               0.3457311987876892,
                                                               1.3997890949249268,
                                                           }));
  // torch.nn.functional.gelu(x, approximate='tanh').tolist()
  EXPECT_THAT(values(gelu(x, "tanh")), Pointwise(DoubleNear(1e-6), std::vector<double>{
                                                                       -0.04540228843688965,
                                                                       -0.1542859971523285,
                                                                       0.0,
                                                                       0.3457140028476715,
                                                                       1.3995715379714966,
                                                                   }));
  // The two differ (here by ~2e-4 at 1.5), so a mix-up would show.
  EXPECT_GT(std::fabs(gelu(x).at({4}) - gelu(x, "tanh").at({4})), 1e-4);
}

TEST(ElementwiseUnary, GeluGradientsMatchPyTorch) {
  // xd = x.double().requires_grad_(); gelu(xd).sum().backward(); xd.grad.tolist()
  const std::vector<double> exact = {-0.08523180107819692, 0.13250487534383712, 0.5,
                                     0.8674951246561629, 1.1274691922299795};
  // same with approximate='tanh'
  const std::vector<double> approx = {-0.0860992566236183, 0.13263009646535764, 0.5,
                                      0.8673699035346424, 1.127710793151433};
  for (const char* mode : {"none", "tanh"}) {
    Tensor x = sample().to(DType::Float64).requires_grad_();
    Tensor y = gelu(x, mode);
    EXPECT_EQ(y.grad_fn()->name(), "GeluBackward0");
    y.backward(ones_like(y));
    EXPECT_THAT(values(x.grad()),
                Pointwise(DoubleNear(1e-12), std::string(mode) == "none" ? exact : approx))
        << mode;
  }
}

// ---- selections ----

TEST(ElementwiseSelect, MaximumAndMinimumBroadcast) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor b = tensor({2, 2, 7});
  // torch.maximum(a, b).tolist() -> [[2, 2, 7], [4, 5, 7]]
  EXPECT_THAT(values(maximum(a, b)), ElementsAre(2, 2, 7, 4, 5, 7));
  // torch.minimum(a, b).tolist() -> [[1, 2, 3], [2, 2, 6]]
  EXPECT_THAT(values(minimum(a, b)), ElementsAre(1, 2, 3, 2, 2, 6));
  // nan propagates: torch.maximum(torch.tensor([nan]), torch.tensor([1.])) -> nan
  Tensor n = maximum(tensor({std::nan("")}), tensor({1.0}));
  EXPECT_TRUE(std::isnan(n.item()));
}

TEST(ElementwiseSelect, MaximumSplitsTheGradientOnTies) {
  // a = torch.tensor([1., 5., 3.], requires_grad=True); b = torch.tensor([4., 2., 3.], ...)
  // torch.maximum(a, b).sum().backward(); a.grad -> [0, 1, 0.5]; b.grad -> [1, 0, 0.5]
  Tensor a = tensor({1, 5, 3}).requires_grad_();
  Tensor b = tensor({4, 2, 3}).requires_grad_();
  Tensor m = maximum(a, b);
  EXPECT_EQ(m.grad_fn()->name(), "MaximumBackward0");
  m.backward(ones_like(m));
  EXPECT_THAT(values(a.grad()), ElementsAre(0, 1, 0.5));
  EXPECT_THAT(values(b.grad()), ElementsAre(1, 0, 0.5));
  Tensor c = tensor({1, 5, 3}).requires_grad_();
  Tensor mn = minimum(c, tensor({4, 2, 3}));
  EXPECT_EQ(mn.grad_fn()->name(), "MinimumBackward0");
  mn.backward(ones_like(mn));
  EXPECT_THAT(values(c.grad()), ElementsAre(1, 0, 0.5));
}

TEST(ElementwiseSelect, MaskedFillWithMinusInfinityLikeTheBook) {
  // m = torch.triu(torch.ones(3, 3), diagonal=1).bool(); s.masked_fill(m, -torch.inf)
  Tensor mask = triu(ones({3, 3}), 1).to_bool();
  EXPECT_EQ(mask.dtype(), DType::Bool);
  Tensor s = tensor({{0.2899, 0.4656, 0.1723}, {0.1344, 0.5202, 0.9}, {0.7421, 0.0512, 0.3057}});
  Tensor filled = s.masked_fill(mask, -kInf);
  EXPECT_EQ(filled.dtype(), DType::Float32);
  EXPECT_THAT(values(filled),
              ElementsAre(DoubleNear(0.2899, 1e-6), -kInf, -kInf, DoubleNear(0.1344, 1e-6),
                          DoubleNear(0.5202, 1e-6), -kInf, DoubleNear(0.7421, 1e-6),
                          DoubleNear(0.0512, 1e-6), DoubleNear(0.3057, 1e-6)));
  // The input is untouched, and the free function agrees with the method.
  EXPECT_FLOAT_EQ(s.at({0, 1}), 0.4656f);
  EXPECT_TRUE(equal(masked_fill(s, mask, -kInf), filled));
  EXPECT_EQ(repr(filled),
            "tensor([[0.2899,   -inf,   -inf],\n"
            "        [0.1344, 0.5202,   -inf],\n"
            "        [0.7421, 0.0512, 0.3057]])");
}

TEST(ElementwiseSelect, MaskedFillBroadcastsTheMask) {
  Tensor t = zeros({2, 3});
  Tensor row_mask = tensor({1, 0, 1}, DType::Bool);
  EXPECT_THAT(values(t.masked_fill(row_mask, 7)), ElementsAre(7, 0, 7, 7, 0, 7));
  // An int tensor keeps its dtype.
  Tensor i = tensor({1, 2, 3}, DType::Int64).masked_fill(row_mask, -1);
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(-1, 2, -1));
}

TEST(ElementwiseSelect, WhereBroadcastsAllThree) {
  // torch.where(torch.tensor([True, False, True]), torch.tensor([1., 2., 3.]),
  //             torch.tensor([[10.], [20.]])).tolist() -> [[1, 10, 3], [1, 20, 3]]
  Tensor w = where(tensor({1, 0, 1}, DType::Bool), tensor({1, 2, 3}), tensor({{10}, {20}}));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_THAT(values(w), ElementsAre(1, 10, 3, 1, 20, 3));
}

TEST(ElementwiseSelect, WhereGradientsFollowTheCondition) {
  Tensor a = tensor({1, 2, 3}).requires_grad_();
  Tensor b = tensor({{10}, {20}}).requires_grad_();
  Tensor w = where(tensor({1, 0, 1}, DType::Bool), a, b);
  EXPECT_EQ(w.grad_fn()->name(), "WhereBackward0");
  w.backward(ones_like(w));
  // a.grad -> [2, 0, 2] (summed over the broadcast rows); b.grad -> [[1], [1]]
  EXPECT_THAT(values(a.grad()), ElementsAre(2, 0, 2));
  EXPECT_EQ(b.grad().shape(), (Shape{2, 1}));
  EXPECT_THAT(values(b.grad()), ElementsAre(1, 1));
}

// ---- comparisons ----

TEST(ElementwiseCompare, ReturnBoolTensors) {
  Tensor i = tensor({1, 2, 3}, DType::Int64);
  // (i > 1.5).tolist() -> [False, True, True]
  Tensor g = gt(i, 1.5);
  EXPECT_EQ(g.dtype(), DType::Bool);
  EXPECT_THAT(g.to_vector<int64_t>(), ElementsAre(0, 1, 1));
  // (i == 2).tolist() -> [False, True, False]
  EXPECT_THAT(eq(i, 2).to_vector<int64_t>(), ElementsAre(0, 1, 0));
  EXPECT_THAT(ne(i, 2).to_vector<int64_t>(), ElementsAre(1, 0, 1));
  EXPECT_THAT(lt(i, 2).to_vector<int64_t>(), ElementsAre(1, 0, 0));
  EXPECT_THAT(le(i, 2).to_vector<int64_t>(), ElementsAre(1, 1, 0));
  EXPECT_THAT(ge(i, 2).to_vector<int64_t>(), ElementsAre(0, 1, 1));
  // Tensor against tensor, broadcast: a [2, 1] vs b [3]
  Tensor a = tensor({{1}, {3}});
  Tensor b = tensor({1, 2, 3});
  Tensor c = lt(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.dtype(), DType::Bool);
  EXPECT_THAT(c.to_vector<int64_t>(), ElementsAre(0, 1, 1, 0, 0, 0));
  EXPECT_THAT(eq(a, b).to_vector<int64_t>(), ElementsAre(1, 0, 0, 0, 0, 1));
  EXPECT_THAT(ne(a, b).to_vector<int64_t>(), ElementsAre(0, 1, 1, 1, 1, 0));
  EXPECT_THAT(le(a, b).to_vector<int64_t>(), ElementsAre(1, 1, 1, 0, 0, 1));
  EXPECT_THAT(gt(a, b).to_vector<int64_t>(), ElementsAre(0, 0, 0, 1, 1, 0));
  EXPECT_THAT(ge(a, b).to_vector<int64_t>(), ElementsAre(1, 0, 0, 1, 1, 1));
}

TEST(ElementwiseCompare, AreNotRecordedInTheGraph) {
  Tensor x = tensor({1, -1}).requires_grad_();
  Tensor c = gt(x, 0.0);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_EQ(c.grad_fn(), nullptr);
}

// ---- graph names for the arithmetic ops ----

TEST(ElementwiseGradFn, NamesMatchPyTorch) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = tensor({3, 4}).requires_grad_();
  EXPECT_EQ((x + y).grad_fn()->name(), "AddBackward0");
  EXPECT_EQ((x - y).grad_fn()->name(), "SubBackward0");
  EXPECT_EQ((x * y).grad_fn()->name(), "MulBackward0");
  EXPECT_EQ((x / y).grad_fn()->name(), "DivBackward0");
  EXPECT_EQ((2.0 - x).grad_fn()->name(), "RsubBackward1");
  EXPECT_EQ((-x).grad_fn()->name(), "NegBackward0");
  EXPECT_EQ(x.exp().grad_fn()->name(), "ExpBackward0");
  EXPECT_EQ(x.log().grad_fn()->name(), "LogBackward0");
  EXPECT_EQ(x.sqrt().grad_fn()->name(), "SqrtBackward0");
  EXPECT_EQ(x.pow(3).grad_fn()->name(), "PowBackward0");
  EXPECT_EQ(x.abs().grad_fn()->name(), "AbsBackward0");
  EXPECT_EQ(tanh(x).grad_fn()->name(), "TanhBackward0");
  EXPECT_EQ(sigmoid(x).grad_fn()->name(), "SigmoidBackward0");
  EXPECT_EQ(relu(x).grad_fn()->name(), "ReluBackward0");
  EXPECT_EQ(x.masked_fill(tensor({1, 0}, DType::Bool), 0).grad_fn()->name(), "MaskedFillBackward0");
}

TEST(ElementwiseGradFn, UnaryGradientsMatchPyTorch) {
  // x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
  // for f in [exp, log, sqrt, tanh, sigmoid, relu, abs, pow(3), neg, 2 - x, 2 / x, x / 2]:
  //   f(x).sum().backward(); x.grad
  struct Case {
    const char* name;
    Tensor (*f)(const Tensor&);
    std::vector<double> grad;
  };
  const std::vector<Case> cases = {
      {"exp",
       [](const Tensor& x) { return exp(x); },
       {1.6487212707001282, 2.718281828459045, 7.38905609893065}},
      {"log", [](const Tensor& x) { return log(x); }, {2.0, 1.0, 0.5}},
      {"sqrt",
       [](const Tensor& x) { return sqrt(x); },
       {0.7071067811865475, 0.5, 0.35355339059327373}},
      {"tanh",
       [](const Tensor& x) { return tanh(x); },
       {0.7864477329659274, 0.41997434161402614, 0.07065082485316443}},
      {"sigmoid",
       [](const Tensor& x) { return sigmoid(x); },
       {0.2350037122015945, 0.19661193324148185, 0.10499358540350662}},
      {"relu", [](const Tensor& x) { return relu(x - 0.75); }, {0.0, 1.0, 1.0}},
      {"abs", [](const Tensor& x) { return abs(x - 1.0); }, {-1.0, 0.0, 1.0}},
      {"pow3", [](const Tensor& x) { return x.pow(3); }, {0.75, 3.0, 12.0}},
      {"neg", [](const Tensor& x) { return -x; }, {-1.0, -1.0, -1.0}},
      {"rsub", [](const Tensor& x) { return 2.0 - x; }, {-1.0, -1.0, -1.0}},
      {"rdiv", [](const Tensor& x) { return 2.0 / x; }, {-8.0, -2.0, -0.5}},
      {"div", [](const Tensor& x) { return x / 2.0; }, {0.5, 0.5, 0.5}},
  };
  for (const Case& c : cases) {
    Tensor x = tensor({0.5, 1.0, 2.0}, DType::Float64).requires_grad_();
    Tensor y = c.f(x);
    y.backward(ones_like(y));
    EXPECT_THAT(values(x.grad()), Pointwise(DoubleNear(1e-12), c.grad)) << c.name;
  }
}

TEST(ElementwiseGradFn, BinaryGradientsMatchPyTorch) {
  // a = torch.tensor([[1., 2.], [3., 4.]], dtype=torch.float64, requires_grad=True)
  // b = torch.tensor([0.5, 4.], dtype=torch.float64, requires_grad=True)
  // (a / b).sum().backward() -> a.grad [[2, 0.25], [2, 0.25]], b.grad [-16, -0.375]
  Tensor a = tensor({{1, 2}, {3, 4}}, DType::Float64).requires_grad_();
  Tensor b = tensor({0.5, 4}, DType::Float64).requires_grad_();
  Tensor q = a / b;
  q.backward(ones_like(q));
  EXPECT_THAT(values(a.grad()), ElementsAre(2, 0.25, 2, 0.25));
  EXPECT_THAT(values(b.grad()), ElementsAre(-16, -0.375));
  // (a * b - a).sum().backward() -> a.grad [[-0.5, 3], [-0.5, 3]], b.grad [4, 6]
  a.set_grad(Tensor());
  b.set_grad(Tensor());
  Tensor r = a * b - a;
  r.backward(ones_like(r));
  EXPECT_THAT(values(a.grad()), ElementsAre(-0.5, 3, -0.5, 3));
  EXPECT_THAT(values(b.grad()), ElementsAre(4, 6));
}

TEST(ElementwiseInPlace, AddAndMulWriteIntoTheStorage) {
  Tensor t = tensor({1, 2, 3});
  const void* data = t.storage()->data();
  int64_t version = t.version();
  t.add_(tensor({10, 10, 10}));
  t += tensor({1, 1, 1});
  t.mul_(2.0);
  EXPECT_EQ(t.storage()->data(), data);
  EXPECT_GT(t.version(), version);
  EXPECT_THAT(values(t), ElementsAre(24, 26, 28));
  // In place on an int tensor keeps the dtype (the float result is cast back).
  Tensor i = tensor({1, 2}, DType::Int64);
  i.add_(tensor({1, 1}, DType::Int64));
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(2, 3));
  // masked_fill_ writes through.
  Tensor m = zeros({2, 2});
  m.masked_fill_(tensor({{1, 0}, {0, 1}}, DType::Bool), 5);
  EXPECT_THAT(values(m), ElementsAre(5, 0, 0, 5));
}

TEST(ElementwiseInPlace, BroadcastingIntoTheDestinationOnly) {
  Tensor t = zeros({2, 3});
  t.add_(tensor({1, 2, 3}));
  EXPECT_THAT(values(t), ElementsAre(1, 2, 3, 1, 2, 3));
  Tensor small = zeros({3});
  EXPECT_THROW(small.add_(ones({2, 3})), Error);
  EXPECT_THAT(values(small), ElementsAre(0, 0, 0));
}

TEST(ElementwiseInPlace, BoolNegAndSubAreRefusedWhileMathPromotes) {
  Tensor b = tensor({1, 0}, DType::Bool);
  try {
    (void)neg(b);
    FAIL() << "neg of a bool tensor should throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("neg"));
  }
  EXPECT_THROW((void)(b - b), Error);
  // Math functions take bools as float32: torch.exp(torch.tensor([True, False]))
  // -> tensor([2.7183, 1.0000])
  Tensor e = exp(b);
  EXPECT_EQ(e.dtype(), DType::Float32);
  EXPECT_THAT(values(e), Pointwise(DoubleNear(1e-6), std::vector<double>{std::exp(1.0), 1.0}));
}

// An in-place result must be castable to the destination's dtype, as in PyTorch.
TEST(ElementwiseInPlace, FloatResultIntoInt64IsAnError) {
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

TEST(ElementwiseInPlace, IntegralResultsIntoInt64AreFine) {
  // torch.arange(3).mul_(2) -> tensor([0, 2, 4]); clamp_(0, 1) -> tensor([0, 1, 1])
  Tensor t = ints();
  t.mul_(2);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  t.add_(full({3}, 3, DType::Int64), 2);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{6, 8, 10}));
  t.clamp_(7, 9);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  t.sub_(ones({3}, DType::Int64));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(t.dtype(), DType::Int64);
}

TEST(ElementwiseInPlace, IntegralAlphaOnly) {
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

TEST(ElementwiseInPlace, BoolDestinations) {
  // torch.ones(3, dtype=torch.bool).add_(1)
  //   -> result type Long can't be cast to the desired output type Bool
  Tensor b = ones({3}, DType::Bool);
  expect_error([&] { b.add_(1); },
               "add_: result type Long can't be cast to the desired output type Bool");
  expect_error([&] { b.mul_(0.5); },
               "mul_: result type Float can't be cast to the desired output type Bool");
  b.mul_(tensor({1, 0, 1}).to_bool());  // bool * bool stays bool
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  // bool - bool:
  expect_error([&] { b.sub_(b.clone()); }, "with a bool tensor is not supported");
}

// A subtraction with a bool operand on either side is an Error, as PyTorch's sub_check, whatever
// the other operand's type (the result type is not bool there).
TEST(ElementwiseInPlace, SubtractionWithABoolOperandIsAnError) {
  const Tensor mask = tensor({1, 0, 1}).to_bool();
  // torch.arange(3).sub_(torch.ones(3, dtype=torch.bool)), torch.arange(3.) - mask, mask - 1,
  // 1 - mask, mask - torch.arange(3)
  //   -> Subtraction, the `-` operator, with a bool tensor is not supported. ...
  Tensor t = ints();
  expect_error([&] { t.sub_(mask); }, "sub: subtraction, the `-` operator, with a bool tensor");
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  expect_error([&] { (void)(arange(3.0) - mask); }, "sub: subtraction");
  expect_error([&] { (void)(mask - 1); }, "sub: subtraction");
  expect_error([&] { (void)(1 - mask); }, "rsub: subtraction");
  expect_error([&] { (void)sub(mask, ints(), 2); }, "with a bool tensor is not supported");
  expect_error([&] { (void)(mask - ints()); }, "(got bool [3] - int64 [3])");
}

TEST(ElementwiseGelu, RejectsUnknownApproximation) {
  try {
    (void)gelu(sample(), "erf");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("gelu"));
    EXPECT_THAT(e.what(), HasSubstr("erf"));
  }
}

TEST(ElementwiseLargeValues, StayFinite) {
  // sigmoid(-100) and sigmoid(100) are 0 and 1 without nan; exp overflows to inf like torch.
  // torch.sigmoid(torch.tensor([-100., 100.])) -> [3.7200760e-44, 1.]
  Tensor s = sigmoid(tensor({-100.0, 100.0}));
  EXPECT_NEAR(s.at({0}), 0.0, 1e-40);
  EXPECT_EQ(s.at({1}), 1.0);
  EXPECT_EQ(exp(tensor({100.0})).item(), kInf);
  EXPECT_THAT(values(tanh(tensor({-30.0, 30.0}))), ElementsAreArray({-1.0, 1.0}));
}

// ---- NaN, inf and signed zeros ----

// NaN propagates through activations and comparison-based ops, with PyTorch's gradients.
TEST(ElementwiseNan, ReluOfNanIsNanAndPassesItsGradient) {
  // torch.relu(torch.tensor([nan, -1., 2.])) -> tensor([nan, 0., 2.]); grad [1, 0, 1]
  Tensor x = tensor({NAN, -1.0, 2.0}).requires_grad_();
  Tensor y = relu(x);
  EXPECT_TRUE(std::isnan(y.to_vector<double>()[0]));
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 1}));
}

TEST(ElementwiseNan, UnaryOpsOnNanInfAndSignedZeroMatchPyTorch) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -1.0, 1.0); }},
      {"clamp_min", [](const Tensor& t) { return clamp(t, 0.0); }},
      {"abs", [](const Tensor& t) { return abs(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
  };
  for (const auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    Tensor v = adv().tensor("nan/in/v").requires_grad_();
    Tensor y = fn(v);
    y.backward(ones_like(y));
    adv().expect_exact(y, "nan/" + name + "/out");
    // tanh's and gelu's backward formulas round differently in the last bit; NaN, inf and zero
    // gradients still match exactly (equal_nan).
    adv().expect_near(v.grad(), "nan/" + name + "/grad", 1e-15);
  }
}

TEST(ElementwiseNan, MaximumMinimumWithNanMatchPyTorch) {
  for (bool is_max : {true, false}) {
    const std::string name = is_max ? "maximum" : "minimum";
    SCOPED_TRACE(name);
    Tensor a = adv().tensor("nan/in/v").requires_grad_(),
           b = adv().tensor("nan/in/other").requires_grad_();
    Tensor y = is_max ? maximum(a, b) : minimum(a, b);
    y.backward(ones_like(y));
    adv().expect_exact(y, "nan/" + name + "/out");
    adv().expect_exact(a.grad(), "nan/" + name + "/grad_a");
    adv().expect_exact(b.grad(), "nan/" + name + "/grad_b");
  }
}

// A NaN bound: with both bounds given every element is NaN, a single NaN bound is ignored, as
// PyTorch's clamp; the gradient is 0 wherever a NaN bound takes part.
TEST(ElementwiseNan, ClampWithANanBoundMatchesPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor({1.0, 2.0, 3.0});
  // torch.clamp(torch.tensor([1., 2., 3.]), nan, 2.) -> tensor([nan, nan, nan])
  test::expect_values(clamp(x, nan, 2.0), {nan, nan, nan});
  // torch.clamp(torch.tensor([1., 2., 3.]), 1.5, nan) -> tensor([nan, nan, nan])
  test::expect_values(clamp(x, 1.5, nan), {nan, nan, nan});
  // torch.clamp(torch.arange(3), nan, 1) -> tensor([nan, nan, nan]) (float32)
  Tensor i = clamp(arange(3), nan, 1);
  EXPECT_EQ(i.dtype(), DType::Float32);
  test::expect_values(i, {nan, nan, nan});
  // torch.tensor([1., 2., 3.]).clamp_(0., nan) -> tensor([nan, nan, nan])
  Tensor y = x.clone();
  y.clamp_(0.0, nan);
  test::expect_values(y, {nan, nan, nan});
  // torch.clamp(x, min=nan), torch.clamp(x, max=nan) -> tensor([1., 2., 3.])
  test::expect_values(clamp(x, nan), {1, 2, 3});
  test::expect_values(clamp(x, None, nan), {1, 2, 3});
  // x.requires_grad_(); torch.clamp(x, nan, 2.).sum().backward(); x.grad -> tensor([0., 0., 0.])
  Tensor w = tensor({1.0, 2.0, 3.0}).requires_grad_();
  clamp(w, nan, 2.0).sum().backward();
  test::expect_values(w.grad(), {0, 0, 0});
}

// pow's exponents -0.5, -1 and -2 are PyTorch's rsqrt, reciprocal and 1 / (x x) in the element
// type, not std::pow: the edges (rsqrt(-0.0) = -inf, rsqrt(-inf) = nan, a float32 1e20^-2 = 0)
// and the float32 rounding (6^-0.5 through double would be 0.408248305).
TEST(ElementwiseEdges, PowOfMinusHalfOneAndTwoRoundAsPyTorch) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = tensor({-0.0, -INFINITY, 6.0, 1e20});
  // x = torch.tensor([-0.0, -inf, 6.0, 1e20]); x.pow(-0.5)
  //   -> tensor([-inf, nan, 0.408248276, 1.00000001e-10])
  const std::vector<float> rs = x.pow(-0.5).to_vector<float>();
  EXPECT_EQ(rs[0], -inf);
  EXPECT_TRUE(std::isnan(rs[1]));
  EXPECT_EQ(rs[2], 0.408248276f);
  EXPECT_EQ(rs[3], 1.00000001e-10f);
  // x.pow(-2) -> tensor([inf, 0., 0.027777778, 0.])
  EXPECT_THAT(x.pow(-2.0).to_vector<float>(), ElementsAre(inf, 0.0f, 0.027777778f, 0.0f));
  // x.pow(-1) -> tensor([-inf, -0., 0.166666672, 9.99999968e-21])
  const std::vector<float> r = x.pow(-1.0).to_vector<float>();
  EXPECT_THAT(r, ElementsAre(-inf, 0.0f, 0.166666672f, 9.99999968e-21f));
  EXPECT_TRUE(std::signbit(r[1]));
  // x = torch.tensor([-0.0, 0.0, 4.0], dtype=torch.float64, requires_grad=True)
  // x.pow(0.5).sum().backward(); x.grad -> tensor([-inf, inf, 0.25])  (0.5 * rsqrt(x))
  const Tensor xd = tensor({-0.0, 0.0, 4.0}, DType::Float64).requires_grad_();
  xd.pow(0.5).sum().backward();
  EXPECT_THAT(xd.grad().to_vector<double>(), ElementsAre(-INFINITY, INFINITY, 0.25));
}

// pow and clamp take bool tensors as PyTorch does: an integer exponent or integer bounds give an
// int64 result, a float one the default dtype; a negative integer power is refused.
TEST(ElementwiseBool, PowAndClampOfBoolTensorsFollowPyTorchsResultType) {
  const Tensor b = tensor({1, 0}).to_bool();
  // B = torch.tensor([True, False]); B.pow(2), B.pow(0) -> int64 [1, 0], [1, 1]
  EXPECT_EQ(b.pow(2).dtype(), DType::Int64);
  EXPECT_THAT(b.pow(2).to_vector<int64_t>(), ElementsAre(1, 0));
  EXPECT_THAT(b.pow(0).to_vector<int64_t>(), ElementsAre(1, 1));
  // B.pow(0.5) -> float32 [1., 0.]; B.pow(-1.0) -> float32 [1., inf]
  EXPECT_EQ(b.pow(0.5).dtype(), DType::Float32);
  EXPECT_THAT(b.pow(-1.0).to_vector<float>(),
              ElementsAre(1.0f, std::numeric_limits<float>::infinity()));
  // B.pow(-1) -> Integers to negative integer powers are not allowed.
  expect_error([&] { (void)b.pow(-1); }, "Integers to negative integer powers are not allowed");
  // B.clamp(0, 1) -> int64 [1, 0]; B.clamp(2) -> int64 [2, 2]; B.clamp(max=0.5) -> float32 [0.5, 0.]
  EXPECT_EQ(clamp(b, 0, 1).dtype(), DType::Int64);
  EXPECT_THAT(clamp(b, 0, 1).to_vector<int64_t>(), ElementsAre(1, 0));
  EXPECT_THAT(clamp(b, 2).to_vector<int64_t>(), ElementsAre(2, 2));
  EXPECT_EQ(clamp(b, std::nullopt, 0.5).dtype(), DType::Float32);
  EXPECT_THAT(clamp(b, std::nullopt, 0.5).to_vector<float>(), ElementsAre(0.5f, 0.0f));
}

// A C++ bool is Python's True/False beside a tensor: a bool tensor stays bool, another tensor
// keeps its dtype, and what PyTorch refuses of a bool scalar is an Error.
TEST(ElementwiseBool, BoolScalarsPromoteAsPyTorchsTrue) {
  const Tensor m = tensor({1, 0}).to_bool(), i = tensor({1, -2}, DType::Int64);
  const Tensor f = tensor({1.5, -2.5});
  auto bools = [](const Tensor& t) {
    EXPECT_EQ(t.dtype(), DType::Bool);
    return t.to(DType::Int64).to_vector<int64_t>();
  };
  // m + True, True * m, m * True -> bool [True, True], [True, False]; m / True -> float32 [1., 0.]
  EXPECT_THAT(bools(m + true), ElementsAre(1, 1));
  EXPECT_THAT(bools(true * m), ElementsAre(1, 0));
  EXPECT_THAT(bools(m * true), ElementsAre(1, 0));
  EXPECT_THAT((m / true).to_vector<float>(), ElementsAre(1.0f, 0.0f));
  // m.clone().add_(True), m.clone().mul_(True) -> bool [True, True], [True, False]
  EXPECT_THAT(bools(m.clone().add_(true)), ElementsAre(1, 1));
  EXPECT_THAT(bools(m.clone().mul_(true)), ElementsAre(1, 0));
  // i + True -> int64 [2, -1]; f * True -> float32 [1.5, -2.5]; i == True -> [True, False]
  EXPECT_EQ((i + true).dtype(), DType::Int64);
  EXPECT_THAT((i + true).to_vector<int64_t>(), ElementsAre(2, -1));
  EXPECT_THAT((f * true).to_vector<float>(), ElementsAre(1.5f, -2.5f));
  EXPECT_THAT(bools(eq(i, true)), ElementsAre(1, 0));
  // i - True, True - f, f.sub_(True) -> Subtraction, the `-` operator, with a bool tensor is not
  // supported
  expect_error([&] { (void)(i - true); }, "sub: subtraction, the `-` operator, with a bool tensor");
  expect_error([&] { (void)(true - f); }, "rsub: subtraction, the `-` operator, with a bool");
  expect_error([&] { f.clone().sub_(true); }, "subtraction, the `-` operator, with a bool tensor");
  // torch.add(i, i, alpha=True) -> Boolean alpha only supported for Boolean results.
  expect_error([&] { (void)add(i, i, true); }, "add: Boolean alpha only supported for Boolean");
  expect_error([&] { (void)sub(f, f, false); }, "sub: Boolean alpha only supported for Boolean");
  // torch.add(m, m, alpha=True) -> bool [True, False]
  EXPECT_THAT(bools(add(m, m, true)), ElementsAre(1, 0));
  // m.pow(True) -> "pow" not implemented for 'Bool'; i.pow(True) -> int64 [1, -2]
  expect_error([&] { (void)m.pow(true); }, "pow: not implemented for bool");
  EXPECT_THAT(i.pow(true).to_vector<int64_t>(), ElementsAre(1, -2));
  // m.clamp(False, True), m.clamp(min=True) -> "clamp_scalar_cpu" not implemented for 'Bool';
  // m.clamp(True, 1) -> int64 [1, 1]; i.clamp(False, True) -> int64 [1, 0]
  expect_error([&] { (void)m.clamp(false, true); }, "clamp: not implemented for bool");
  expect_error([&] { (void)m.clamp(true); }, "clamp: not implemented for bool");
  EXPECT_THAT(m.clamp(true, 1).to_vector<int64_t>(), ElementsAre(1, 1));
  EXPECT_THAT(i.clamp(false, true).to_vector<int64_t>(), ElementsAre(1, 0));
  // i.clone().fill_(True), torch.full_like(m, True) -> int64 [1, 1], bool [True, True]
  EXPECT_THAT(i.clone().fill_(true).to_vector<int64_t>(), ElementsAre(1, 1));
  EXPECT_THAT(bools(full_like(m, true)), ElementsAre(1, 1));
}

// The ops PyTorch has no int64 or bool kernel for are Errors naming the op and the dtype; those
// it computes give its result dtype and values.
TEST(ElementwiseBool, Int64AndBoolInputsComputeOrRaiseAsPyTorch) {
  const Tensor m = tensor({1, 0}).to_bool(), i = tensor({1, -2}, DType::Int64);
  // F.gelu(i), F.gelu(m) -> "GeluKernelImpl" not implemented for 'Long' / 'Bool'
  expect_error([&] { (void)gelu(i); }, "gelu: not implemented for int64");
  expect_error([&] { (void)gelu(m, "tanh"); }, "gelu: not implemented for bool");
  // torch.relu(m) -> Boolean inputs not supported for relu; torch.relu(i) -> int64 [1, 0]
  expect_error([&] { (void)relu(m); }, "relu: Boolean inputs not supported for relu");
  EXPECT_THAT(relu(i).to_vector<int64_t>(), ElementsAre(1, 0));
  // torch.abs(m) -> "abs_cpu" not implemented for 'Bool' (the message names the op)
  expect_error([&] { (void)abs(m); }, "abs: not implemented for bool tensors");
  // torch.topk(m, 1) -> "topk_cpu" not implemented for 'Bool'; torch.sort(m) computes
  expect_error([&] { (void)topk(m, 1); }, "topk: not implemented for bool");
  EXPECT_THAT(argsort(m).to_vector<int64_t>(), ElementsAre(1, 0));
  // i.addcmul(i, i, value=2) -> int64 [3, 6]; value=0.5 truncates to 0 -> [1, -2]
  EXPECT_EQ(addcmul(i, i, i, 2).dtype(), DType::Int64);
  EXPECT_THAT(addcmul(i, i, i, 2).to_vector<int64_t>(), ElementsAre(3, 6));
  EXPECT_THAT(addcmul(i, i, i, 0.5).to_vector<int64_t>(), ElementsAre(1, -2));
  EXPECT_THAT(i.clone().addcmul_(i, i).to_vector<int64_t>(), ElementsAre(2, 2));
  // i.addcmul(i, torch.tensor([1.5, -2.5])) -> float32 [2.5, 3.]
  EXPECT_THAT(addcmul(i, i, tensor({1.5, -2.5}), 1).to_vector<float>(), ElementsAre(2.5f, 3.0f));
  // m.addcmul(m, m) -> "addcmul_cpu_out" not implemented for 'Bool'
  expect_error([&] { (void)addcmul(m, m, m, 1); }, "addcmul: not implemented for bool");
  // F.dropout(i, 0.5, training=False) and F.dropout(i, 0.) -> i; F.dropout(i, 1.) -> [0, 0];
  // F.dropout(i, 0.5) -> result type Float can't be cast to the desired output type Long
  EXPECT_THAT(dropout(i, 0.5, false).to_vector<int64_t>(), ElementsAre(1, -2));
  EXPECT_THAT(dropout(i, 0.0).to_vector<int64_t>(), ElementsAre(1, -2));
  EXPECT_THAT(dropout(i, 1.0).to_vector<int64_t>(), ElementsAre(0, 0));
  EXPECT_EQ(dropout(m, 1.0).dtype(), DType::Bool);
  expect_error([&] { (void)dropout(i, 0.5); },
               "dropout: result type Float can't be cast to the desired output type Long");
  // torch.manual_seed(0); torch.zeros(12, dtype=torch.long).bernoulli_(0.37)
  // -> [0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 1], the draws of a float32 or bool tensor
  manual_seed(0);
  Tensor draws = zeros({12}, DType::Int64);
  bernoulli_(draws, 0.37);
  EXPECT_THAT(draws.to_vector<int64_t>(), ElementsAre(0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 1));
}

// A number divided by a tensor is PyTorch's Tensor.__rdiv__, x.reciprocal() * s, rounded twice,
// with its nodes (MulBackward0 after ReciprocalBackward0) and their gradient -(y y) (g s).
TEST(ElementwiseEdges, ScalarDividedByATensorIsTheReciprocalTimesTheScalar) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = tensor({1e-39, 3.0, 7.0, 0.0});
  // x = torch.tensor([1e-39, 3.0, 7.0, 0.0]); 0.1 / x -> [inf, 0.0333333351, 0.0142857153, inf]
  // (0.1 / 7 rounded once is 0.0142857144)
  EXPECT_THAT((0.1 / x).to_vector<float>(), ElementsAre(inf, 0.0333333351f, 0.0142857153f, inf));
  // 1e-10 / x -> [inf, 3.33333361e-11, 1.4285715e-11, inf] (1e-10 / 1e-39 is 1e29 rounded once)
  EXPECT_THAT((1e-10 / x).to_vector<float>(),
              ElementsAre(inf, 3.33333361e-11f, 1.4285715e-11f, inf));
  // 0.0 / x -> [nan, 0., 0., nan]
  const std::vector<float> z = (0.0 / x).to_vector<float>();
  EXPECT_TRUE(std::isnan(z[0]));
  EXPECT_EQ(z[1], 0.0f);
  EXPECT_TRUE(std::isnan(z[3]));
  // xd = torch.tensor([3.0, 7.0], dtype=torch.float64, requires_grad=True); y = 0.1 / xd
  //   -> y.grad_fn MulBackward0, y [0.033333333333333333, 0.014285714285714285],
  //      xd.grad after y.sum().backward() [-0.011111111111111112, -0.002040816326530612]
  Tensor xd = tensor({3.0, 7.0}, DType::Float64).requires_grad_();
  const Tensor y = 0.1 / xd;
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  EXPECT_THAT(y.to_vector<double>(), ElementsAre(0.033333333333333333, 0.014285714285714285));
  y.sum().backward();
  EXPECT_THAT(xd.grad().to_vector<double>(),
              ElementsAre(-0.011111111111111112, -0.002040816326530612));
  // 2 / torch.tensor([3]) is float32, as the reciprocal of an integer tensor
  EXPECT_EQ((2 / tensor({3}, DType::Int64)).dtype(), DType::Float32);
}

// A scalar argument (alpha, value, weight, a clamp bound) beyond float32's range is an Error for a
// float32 computation, as PyTorch's Scalar conversion; inf and nan pass, and an operand such as
// x * 1e39 is a number beside the tensor, not an argument (inf, as PyTorch's).
TEST(ElementwiseEdges, ScalarArgumentsOutOfFloat32RangeAreErrors) {
  const Tensor x = ones({2});
  const char* overflow = "value 1e+39 cannot be converted to type float without overflow";
  // torch.clamp(x, -1e39), torch.clamp(x, None, 1e39), torch.add(x, x, alpha=1e39),
  // torch.sub(x, x, alpha=-1e39), torch.addcmul(x, x, x, value=1e39),
  // torch.addcdiv(x, x, x, value=-1e39), torch.lerp(x, x, 1e39)
  //   -> RuntimeError: value cannot be converted to type float without overflow
  expect_error([&] { (void)clamp(x, -1e39); }, std::string("clamp: ") + "value -1e+39");
  expect_error([&] { (void)clamp(x, std::nullopt, 1e39); }, std::string("clamp: ") + overflow);
  expect_error([&] { (void)add(x, x, 1e39); }, std::string("add: ") + overflow);
  expect_error([&] { (void)sub(x, x, -1e39); }, std::string("sub: ") + overflow);
  expect_error([&] { (void)addcmul(x, x, x, 1e39); }, std::string("addcmul: ") + overflow);
  expect_error([&] { (void)addcdiv(x, x, x, -1e39); }, "addcdiv: value -1e+39");
  expect_error([&] { (void)lerp(x, x, 1e39); }, std::string("lerp: ") + overflow);
  // torch.clamp(torch.tensor([1, 2]), 1e39): the float32 result type, the same Error
  expect_error([&] { (void)clamp(tensor({1, 2}, DType::Int64), 1e39); }, "clamp: value 1e+39");
  Tensor y = ones({2});
  expect_error([&] { y.clamp_(1e39); }, "clamp: value 1e+39");
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(2, 1.0f));  // untouched
  // torch.clamp(x, -inf, inf) -> [1., 1.]; torch.add(x, x, alpha=inf) -> [inf, inf];
  // torch.clamp(x.double(), 1e39) -> [1e39, 1e39]; x * 1e39 -> [inf, inf]
  EXPECT_EQ(clamp(x, -INFINITY, INFINITY).to_vector<float>(), std::vector<float>(2, 1.0f));
  EXPECT_EQ(add(x, x, INFINITY).to_vector<float>(),
            std::vector<float>(2, std::numeric_limits<float>::infinity()));
  EXPECT_EQ(clamp(x.to(DType::Float64), 1e39).to_vector<double>(), std::vector<double>(2, 1e39));
  EXPECT_EQ((x * 1e39).to_vector<float>(),
            std::vector<float>(2, std::numeric_limits<float>::infinity()));
}

// ---- int64 ----

// An int64 power takes the integer exponent exactly: 2^63 - 1 and 2^53 + 1 are odd (as doubles
// they round to even numbers).
TEST(ElementwiseInt64, PowWithAHugeOddExponentIsExact) {
  const Tensor t = from_vector(std::vector<int64_t>{-1, 2, 3, -3}, {4});
  // torch.tensor([-1, 2, 3, -3]).pow(2**63 - 1)
  //   -> tensor([-1, 0, -6148914691236517205, 6148914691236517205])
  EXPECT_THAT(t.pow(std::numeric_limits<int64_t>::max()).to_vector<int64_t>(),
              ElementsAre(-1, 0, -6148914691236517205, 6148914691236517205));
  // torch.tensor([-1, 2, 3, -3]).pow(2**53 + 1)
  //   -> tensor([-1, 0, 6593269854470406147, -6593269854470406147])
  EXPECT_THAT(t.pow((int64_t{1} << 53) + 1).to_vector<int64_t>(),
              ElementsAre(-1, 0, 6593269854470406147, -6593269854470406147));
}

// int64 arithmetic is exact and wraps on overflow as PyTorch's does.
TEST(ElementwiseInt64, Int64OverflowWrapsAsPyTorch) {
  Tensor big = adv().tensor("int/in/big");
  adv().expect_exact(big + 1, "int/add_1");
  adv().expect_exact(big - 1, "int/sub_1");
  adv().expect_exact(big * 4, "int/mul_4");
  adv().expect_exact(-big, "int/neg");
  adv().expect_exact(big.abs(), "int/abs");
  adv().expect_exact(big.pow(3), "int/pow_3");
  adv().expect_exact(big.sum(), "int/sum");
  adv().expect_exact(big + big, "int/add_self");
  Tensor mat = big.reshape({2, 3});
  adv().expect_exact(matmul(mat, mat.t()), "int/mm");
  adv().expect_exact(pow(tensor({3}, DType::Int64), 40), "int/pow_40_of_3");
  // The in-place forms and alpha wrap the same way.
  Tensor t = big.clone();
  t.add_(ones({6}, DType::Int64));
  adv().expect_exact(t, "int/add_1");
  Tensor u = big.clone();
  u.add_(big, 1);
  adv().expect_exact(u, "int/add_self");
  Tensor w = big.clone();
  w.mul_(4);
  adv().expect_exact(w, "int/mul_4");
  // sum along a dim, and of a strided view, wrap too.
  Tensor two = tensor({{4611686018427387904.0, 4611686018427387904.0}}, DType::Int64);
  EXPECT_EQ(two.sum(1).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(sum(two.t(), {0}).item<int64_t>(), std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace ember
