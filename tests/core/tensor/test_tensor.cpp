// The tensor handle: dtypes and conversions (int64 exact end to end), factories (and the sizes
// they refuse), element access, copies, comparisons, a 0-d tensor's dims.
//
// Expected values come from PyTorch 1.13 (/usr/bin/python3 -c 'import torch; ...'); the Python
// expression is in the comment above each literal.
#include "core/tensor/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/base/error.h"
#include "core/graph/node.h"
#include "core/ops/elementwise.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using test::error_of;
using test::expect_error;
using test::expect_tensor;
using test::kHugeDim;
using test::kInt64Max;
using test::values;

// PyTorch's int64 tensors (scripts/fixtures/gen_adversarial.py).
const test::Fixture& adv() { return test::fixture_file("adversarial.txt"); }

// ---- dtypes ----

TEST(TensorDType, DefaultsToFloat32) {
  Tensor t = tensor({{1, 2}, {3, 4}});
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(zeros({2}).dtype(), DType::Float32);
  EXPECT_EQ(ones({2}).dtype(), DType::Float32);
  EXPECT_EQ(full({2}, 3).dtype(), DType::Float32);
  EXPECT_EQ(empty({2}).dtype(), DType::Float32);
  EXPECT_EQ(eye(2).dtype(), DType::Float32);
  EXPECT_EQ(scalar_tensor(1).dtype(), DType::Float32);
}

TEST(TensorDType, EveryDTypeStoresItsValues) {
  Tensor f64 = tensor({0.1, 0.2}, DType::Float64);
  EXPECT_EQ(f64.dtype(), DType::Float64);
  EXPECT_EQ(f64.at({0}), 0.1);  // exact in double
  EXPECT_EQ(f64.data_ptr<double>()[1], 0.2);
  Tensor f32 = tensor({0.1, 0.2});
  EXPECT_EQ(f32.at({0}), static_cast<double>(0.1f));  // rounded to float
  EXPECT_EQ(f32.data_ptr<float>()[1], 0.2f);
  Tensor i64 = tensor({3, -4}, DType::Int64);
  EXPECT_EQ(i64.data_ptr<int64_t>()[1], -4);
  EXPECT_THAT(i64.to_vector<int64_t>(), ElementsAre(3, -4));
  Tensor b = tensor({1, 0, 1}, DType::Bool);
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_THAT(b.to_vector<int64_t>(), ElementsAre(1, 0, 1));
  EXPECT_TRUE(b.data_ptr<bool>()[0]);
  // Asking for the wrong C++ type is an Error, not a reinterpretation.
  EXPECT_THAT(error_of([&] { (void)f32.data_ptr<double>(); }), HasSubstr("float32"));
}

TEST(TensorDType, ToConvertsLikePyTorch) {
  // torch.tensor([1.7, -1.7, 0.5]).to(torch.int64) -> tensor([ 1, -1,  0])
  Tensor i = tensor({1.7, -1.7, 0.5}).to(DType::Int64);
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(1, -1, 0));
  // torch.tensor([1.7, -1.7, 0.0]).bool() -> tensor([ True,  True, False])
  Tensor b = tensor({1.7, -1.7, 0.0}).to_bool();
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_THAT(b.to_vector<int64_t>(), ElementsAre(1, 1, 0));
  // torch.tensor([True, False]).float() -> tensor([1., 0.])
  Tensor f = tensor({1, 0}, DType::Bool).to(DType::Float32);
  EXPECT_THAT(values(f), ElementsAre(1, 0));
  Tensor d = tensor({0.1}).to(DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_EQ(d.item(), static_cast<double>(0.1f));
  // Same dtype: the same tensor, no copy.
  Tensor same = tensor({1, 2});
  EXPECT_TRUE(same.to(DType::Float32).is_same(same));
  // A conversion copies: writing to the copy leaves the source alone.
  Tensor copy = same.to(DType::Float64);
  copy.set({0}, 9);
  EXPECT_EQ(same.at({0}), 1);
}

TEST(TensorDType, ToIsDifferentiableBetweenFloatTypes) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = x.to(DType::Float64);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "ToCopyBackward0");
  y.backward(tensor({0.5, 0.25}, DType::Float64));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::Float32);  // the gradient has the leaf's dtype
  EXPECT_THAT(values(x.grad()), ElementsAre(0.5, 0.25));
  // To an integer type: no graph.
  Tensor n = x.to(DType::Int64);
  EXPECT_FALSE(n.requires_grad());
  EXPECT_EQ(n.grad_fn(), nullptr);
}

TEST(TensorDType, Int64IsExactEndToEnd) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not a double
  Tensor t = full({1}, 0, DType::Int64);
  t.add_(big);  // an integral Scalar, kept exactly
  EXPECT_EQ(t.item<int64_t>(), big);
  EXPECT_EQ(repr(t), "tensor([9007199254740993])");
  Tensor largest = adv().tensor("int/in/big").slice(0, 0, 1);
  EXPECT_EQ(largest.item<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(repr(largest), "tensor([9223372036854775807])");
  EXPECT_EQ(repr(adv().tensor("int/in/big")),
            "tensor([ 9223372036854775807, -9223372036854775808,  4611686018427387904,\n"
            "                          -5,                    3,     9007199254740993])");
  EXPECT_EQ(repr(adv().tensor("int/sum")), "tensor(4620693217682128894)");  // wrapped twice
  EXPECT_EQ(repr(adv().tensor("int/add_1")).substr(0, 30), "tensor([-9223372036854775808, ");
  EXPECT_EQ(adv().tensor("int/in/big").to_vector<int64_t>()[5], big);
  EXPECT_EQ((adv().tensor("int/in/big") * 1).to_vector<int64_t>()[5], big);
  // item<int> of other integer widths reads the integer too.
  EXPECT_EQ(scalar_tensor(7, DType::Int64).item<int>(), 7);
  EXPECT_EQ(scalar_tensor(1, DType::Bool).item<int64_t>(), 1);
  EXPECT_EQ(scalar_tensor(-3.9).item<int64_t>(), -3);
}

// ---- factories ----

TEST(TensorFactory, NestedListsGiveShapeAndValues) {
  Tensor t = tensor({{0.43, 0.15, 0.89}, {0.55, 0.87, 0.66}});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.offset(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FLOAT_EQ(t.at({1, 2}), 0.66f);
  Tensor cube = tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  EXPECT_EQ(cube.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(cube.strides(), (Shape{4, 2, 1}));
  EXPECT_THAT(values(cube), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  Tensor vec = tensor({1, 2, 3});
  EXPECT_EQ(vec.shape(), (Shape{3}));
  Tensor scalar = tensor(2.5);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.shape(), Shape{});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.item(), 2.5);
  Tensor one = tensor({7});
  EXPECT_EQ(one.shape(), (Shape{1}));
}

TEST(TensorFactory, UnevenNestingIsAnError) {
  // torch.tensor([[1, 2], [3]]) -> ValueError: expected sequence of length 2 at dim 1 (got 1)
  EXPECT_THAT(error_of([] { (void)tensor({{1, 2}, {3}}); }), HasSubstr("tensor"));
  EXPECT_THAT(error_of([] { (void)tensor({{1, 2}, {3}}); }), HasSubstr("length"));
  // A scalar where a list was expected, and the other way round.
  EXPECT_THAT(error_of([] { (void)tensor({{1, 2}, 3}); }), HasSubstr("tensor"));
  EXPECT_THAT(error_of([] { (void)tensor({1, {2, 3}}); }), HasSubstr("tensor"));
  EXPECT_THAT(error_of([] { (void)tensor({{{1}, {2}}, {3, 4}}); }), HasSubstr("tensor"));
  EXPECT_THAT(error_of([] { (void)tensor({{1, 2}, {{3}, {4}}}); }), HasSubstr("tensor"));
}

TEST(TensorFactory, ZerosOnesFullEmpty) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_THAT(values(z), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_THAT(values(ones({2, 2}, DType::Int64)), ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(ones({2}, DType::Int64).dtype(), DType::Int64);
  Tensor f = full({3}, -1.5, DType::Float64);
  EXPECT_EQ(f.dtype(), DType::Float64);
  EXPECT_THAT(values(f), ElementsAre(-1.5, -1.5, -1.5));
  Tensor b = full({2}, 1, DType::Bool);
  EXPECT_THAT(b.to_vector<int64_t>(), ElementsAre(1, 1));
  Tensor e = empty({4, 0});
  EXPECT_EQ(e.shape(), (Shape{4, 0}));
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(empty({3}, DType::Int64).dtype(), DType::Int64);
  EXPECT_EQ(scalar_tensor(3, DType::Int64).item<int64_t>(), 3);
  EXPECT_THAT(error_of([] { (void)zeros({2, -1}); }), HasSubstr("negative"));
}

// An integer value fills an int64 tensor exactly, beyond 2^53 and up to int64's ends, as
// libtorch's Scalar: full, full_like, scalar_tensor, fill_, masked_fill and masked_fill_.
TEST(TensorFactory, IntegerFillValuesAreExactInInt64) {
  constexpr int64_t odd = (int64_t{1} << 53) + 1;  // no double holds it
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  // torch.full((2,), 2**53 + 1) -> tensor([9007199254740993, 9007199254740993])
  EXPECT_THAT(full({2}, odd, DType::Int64).to_vector<int64_t>(), ElementsAre(odd, odd));
  // torch.full((1,), 2**63 - 1), torch.full((1,), -2**63): the ends of int64
  EXPECT_THAT(full({1}, kInt64Max, DType::Int64).to_vector<int64_t>(), ElementsAre(kInt64Max));
  EXPECT_THAT(full({1}, kMin, DType::Int64).to_vector<int64_t>(), ElementsAre(kMin));
  EXPECT_EQ(scalar_tensor(odd, DType::Int64).item<int64_t>(), odd);
  EXPECT_THAT(full_like(arange(2), kInt64Max).to_vector<int64_t>(),
              ElementsAre(kInt64Max, kInt64Max));
  Tensor t = zeros({2}, DType::Int64);
  t.fill_(odd);
  EXPECT_THAT(t.to_vector<int64_t>(), ElementsAre(odd, odd));
  // torch.arange(2).masked_fill(torch.tensor([False, True]), 2**63 - 1)
  //   -> tensor([0, 9223372036854775807])
  const Tensor mask = from_vector(std::vector<int64_t>{0, 1}, {2}).to(DType::Bool);
  EXPECT_THAT(arange(2).masked_fill(mask, kInt64Max).to_vector<int64_t>(),
              ElementsAre(0, kInt64Max));
  Tensor u = arange(2);
  u.masked_fill_(mask, odd);
  EXPECT_THAT(u.to_vector<int64_t>(), ElementsAre(0, odd));
  u.set({0}, kInt64Max);
  EXPECT_THAT(u.to_vector<int64_t>(), ElementsAre(kInt64Max, odd));
  // A float value is truncated and checked as before: torch.full((1,), 2.5, dtype=torch.int64)
  // -> tensor([2]); 1e19 -> "value cannot be converted to type int64_t without overflow"
  EXPECT_THAT(full({1}, 2.5, DType::Int64).to_vector<int64_t>(), ElementsAre(2));
  expect_error([] { (void)full({1}, 1e19, DType::Int64); },
               "full: value 1e+19 cannot be converted to type int64 without overflow");
}

// A fill value the dtype cannot hold is an Error naming the op the caller called (full,
// full_like, masked_fill and masked_fill_ fill through fill_), and nothing is written.
TEST(TensorFactory, AFillValueOutOfRangeNamesTheOpCalled) {
  // torch.full((2,), 1e39), torch.full_like(x, 1e39), x.masked_fill(m, 1e39),
  // x.masked_fill_(m, 1e39), x.fill_(1e39)
  //   -> RuntimeError: value cannot be converted to type float without overflow
  const std::string overflow = "value 1e+39 cannot be converted to type float without overflow";
  Tensor x = zeros({2});
  const Tensor mask = tensor({1, 0}, DType::Bool);
  expect_error([] { (void)full({2}, 1e39); }, "full: " + overflow);
  expect_error([&] { (void)full_like(x, 1e39); }, "full_like: " + overflow);
  expect_error([&] { (void)masked_fill(x, mask, 1e39); }, "masked_fill: " + overflow);
  expect_error([&] { x.masked_fill_(mask, 1e39); }, "masked_fill_: " + overflow);
  expect_error([&] { x.fill_(1e39); }, "fill_: " + overflow);
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(2, 0.0f));
}

TEST(TensorFactory, LikeFactoriesKeepShapeAndDType) {
  Tensor src = tensor({{1, 2, 3}}, DType::Float64);
  Tensor z = zeros_like(src);
  EXPECT_EQ(z.shape(), (Shape{1, 3}));
  EXPECT_EQ(z.dtype(), DType::Float64);
  EXPECT_THAT(values(z), ElementsAre(0, 0, 0));
  Tensor o = ones_like(tensor({1, 2}, DType::Int64));
  EXPECT_EQ(o.dtype(), DType::Int64);
  EXPECT_THAT(o.to_vector<int64_t>(), ElementsAre(1, 1));
  Tensor f = full_like(src, 4);
  EXPECT_THAT(values(f), ElementsAre(4, 4, 4));
  EXPECT_EQ(empty_like(src).shape(), src.shape());
  // Fresh storage, not requiring grad even when the source does.
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor zx = zeros_like(x);
  EXPECT_FALSE(zx.requires_grad());
  EXPECT_NE(zx.storage(), x.storage());
}

TEST(TensorFactory, ArangeIsInt64UnlessAFloatDTypeIsGiven) {
  // torch.arange(5) -> tensor([0, 1, 2, 3, 4]), dtype torch.int64
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(a.shape(), (Shape{5}));
  EXPECT_THAT(a.to_vector<int64_t>(), ElementsAre(0, 1, 2, 3, 4));
  // torch.arange(5, 0, -2) -> tensor([5, 3, 1])
  EXPECT_THAT(arange(5, 0, -2).to_vector<int64_t>(), ElementsAre(5, 3, 1));
  // torch.arange(1, 2.5, 0.5) -> tensor([1.0000, 1.5000, 2.0000])
  Tensor f = arange(1, 2.5, 0.5, DType::Float32);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_THAT(values(f), ElementsAre(1.0, 1.5, 2.0));
  // torch.arange(0., 1., 0.1).shape -> torch.Size([10]); last element 0.8999999761581421
  Tensor tenths = arange(0, 1, 0.1, DType::Float32);
  EXPECT_EQ(tenths.shape(), (Shape{10}));
  EXPECT_EQ(tenths.at({9}), 0.8999999761581421);
  EXPECT_EQ(arange(4, DType::Float64).dtype(), DType::Float64);
  EXPECT_EQ(arange(0).numel(), 0);
  EXPECT_THAT(error_of([] { (void)arange(0, 5, 0); }), HasSubstr("arange"));
  EXPECT_THAT(error_of([] { (void)arange(0, 5, -1); }), HasSubstr("arange"));
}

TEST(TensorFactory, IntegerArangeIsExactBeyondTwoToThe53) {
  constexpr int64_t two53 = int64_t{1} << 53;
  // torch.arange(2**53 + 1, 2**53 + 5, 1)
  //   -> tensor([9007199254740993, 9007199254740994, 9007199254740995, 9007199254740996])
  EXPECT_THAT(arange(two53 + 1, two53 + 5, 1).to_vector<int64_t>(),
              ElementsAre(two53 + 1, two53 + 2, two53 + 3, two53 + 4));
  // torch.arange(2**62 + 7, 2**62 - 2, -3) -> tensor([2**62 + 7, 2**62 + 4, 2**62 + 1])
  constexpr int64_t two62 = int64_t{1} << 62;
  EXPECT_THAT(arange(two62 + 7, two62 - 2, -3).to_vector<int64_t>(),
              ElementsAre(two62 + 7, two62 + 4, two62 + 1));
  // The ends of int64: end - start and i * step exceed int64, the values do not.
  EXPECT_THAT(arange(kInt64Max - 2, kInt64Max, 1).to_vector<int64_t>(),
              ElementsAre(kInt64Max - 2, kInt64Max - 1));
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_THAT(arange(kMin, kInt64Max, two62).to_vector<int64_t>(),
              ElementsAre(kMin, kMin + two62, 0, two62));
  EXPECT_THAT(arange(kInt64Max, kMin, -two62 - 1).to_vector<int64_t>(),
              ElementsAre(kInt64Max, kInt64Max - two62 - 1, -3, -two62 - 4));
  EXPECT_EQ(arange(kMin, kMin + 1, kInt64Max).numel(), 1);
  EXPECT_EQ(arange(5, 5, -1).numel(), 0);
  // A count beyond int64 (or beyond memory) is an Error.
  EXPECT_THAT(error_of([] { (void)arange(kMin, kInt64Max, 1); }),
              HasSubstr("arange: invalid size, possible overflow? (start -9223372036854775808, "
                        "end 9223372036854775807, step 1)"));
  EXPECT_THAT(error_of([] { (void)arange(0, kInt64Max, 1); }),
              HasSubstr("arange: Storage size calculation overflowed"));
  // Integral bounds into a floating dtype still count in double, as PyTorch's.
  EXPECT_THAT(arange(0, 7, 3, DType::Float64).to_vector<double>(), ElementsAre(0.0, 3.0, 6.0));
}

// An int64 arange with floating bounds converts each bound to int64 first, as PyTorch's (the
// count and the values are then integers); a bool arange is an Error.
TEST(TensorFactory, Int64ArangeTruncatesFloatBoundsFirst) {
  // torch.arange(0.5, 6, 1.7, dtype=torch.int64) -> tensor([0, 1, 2, 3, 4, 5])
  EXPECT_THAT(arange(0.5, 6, 1.7, DType::Int64).to_vector<int64_t>(),
              ElementsAre(0, 1, 2, 3, 4, 5));
  // torch.arange(2.9, dtype=torch.int64) -> tensor([0, 1])
  EXPECT_THAT(arange(2.9, DType::Int64).to_vector<int64_t>(), ElementsAre(0, 1));
  // torch.arange(-2.5, 3, 2, dtype=torch.int64) -> tensor([-2, 0, 2])
  EXPECT_THAT(arange(-2.5, 3, 2, DType::Int64).to_vector<int64_t>(), ElementsAre(-2, 0, 2));
  // torch.arange(0, 5, 0.5, dtype=torch.int64) -> RuntimeError: step must be nonzero
  expect_error([] { (void)arange(0, 5, 0.5, DType::Int64); }, "arange: step must be nonzero");
  // torch.arange(nan, 3, 1, dtype=torch.int64), torch.arange(0, 1e19, 1, dtype=torch.int64)
  //   -> RuntimeError: value cannot be converted to type int64_t without overflow
  expect_error([] { (void)arange(NAN, 3, 1, DType::Int64); },
               "arange: value nan cannot be converted to type int64 without overflow");
  expect_error([] { (void)arange(0, 1e19, 1, DType::Int64); },
               "arange: value 1e+19 cannot be converted to type int64 without overflow");
  // torch.arange(0, 3, dtype=torch.bool) -> RuntimeError: "arange_cpu" not implemented for 'Bool'
  expect_error([] { (void)arange(0, 3, 1, DType::Bool); }, "arange: not implemented for bool");
  expect_error([] { (void)arange(0, 2.5, 1, DType::Bool); }, "arange: not implemented for bool");
}

TEST(TensorFactory, Eye) {
  // torch.eye(3)
  Tensor e = eye(3);
  EXPECT_EQ(e.shape(), (Shape{3, 3}));
  EXPECT_THAT(values(e), ElementsAre(1, 0, 0, 0, 1, 0, 0, 0, 1));
  EXPECT_EQ(eye(2, DType::Int64).dtype(), DType::Int64);
  // Size errors name eye (torch.eye(-1): "n must be greater or equal to 0, got -1").
  expect_error([] { (void)eye(-1); }, "eye: Trying to create tensor with negative dimension -1");
  expect_error([] { (void)eye(int64_t{1} << 32); }, "eye: Storage size calculation overflowed");
}

TEST(TensorFactory, TriuAndTrilWithAnyDiagonal) {
  // m = torch.arange(1., 13.).reshape(3, 4)
  Tensor m = arange(1, 13, 1, DType::Float32).reshape({3, 4});
  // torch.triu(m, 0) -> [[1, 2, 3, 4], [0, 6, 7, 8], [0, 0, 11, 12]]
  EXPECT_THAT(values(triu(m)), ElementsAre(1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12));
  // torch.tril(m, 0) -> [[1, 0, 0, 0], [5, 6, 0, 0], [9, 10, 11, 0]]
  EXPECT_THAT(values(tril(m)), ElementsAre(1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0));
  // torch.triu(m, 1) -> [[0, 2, 3, 4], [0, 0, 7, 8], [0, 0, 0, 12]]
  EXPECT_THAT(values(triu(m, 1)), ElementsAre(0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12));
  // torch.tril(m, 1) -> [[1, 2, 0, 0], [5, 6, 7, 0], [9, 10, 11, 12]]
  EXPECT_THAT(values(tril(m, 1)), ElementsAre(1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12));
  // torch.triu(m, -1) -> [[1, 2, 3, 4], [5, 6, 7, 8], [0, 10, 11, 12]]
  EXPECT_THAT(values(triu(m, -1)), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12));
  // torch.tril(m, -1) -> [[0, 0, 0, 0], [5, 0, 0, 0], [9, 10, 0, 0]]
  EXPECT_THAT(values(tril(m, -1)), ElementsAre(0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0));
  // torch.tril(m, -2) -> [[0, 0, 0, 0], [0, 0, 0, 0], [9, 0, 0, 0]]
  EXPECT_THAT(values(tril(m, -2)), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0));
  // torch.triu(m, 3) -> [[0, 0, 0, 4], [0, 0, 0, 0], [0, 0, 0, 0]]
  EXPECT_THAT(values(triu(m, 3)), ElementsAre(0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0));
  // torch.triu(m, -3) is m; torch.tril(m, -3) is all zeros
  EXPECT_TRUE(equal(triu(m, -3), m));
  EXPECT_TRUE(equal(tril(m, -3), zeros({3, 4})));
  // The input is not modified.
  EXPECT_EQ(m.at({1, 0}), 5);
}

TEST(TensorFactory, TriuAndTrilAreBatchedOverLeadingDims) {
  // b = torch.arange(1., 9.).reshape(2, 2, 2)
  Tensor b = arange(1, 9, 1, DType::Float32).reshape({2, 2, 2});
  // torch.triu(b) -> [[[1, 2], [0, 4]], [[5, 6], [0, 8]]]
  Tensor u = triu(b);
  EXPECT_EQ(u.shape(), (Shape{2, 2, 2}));
  EXPECT_THAT(values(u), ElementsAre(1, 2, 0, 4, 5, 6, 0, 8));
  // torch.tril(b, -1) -> [[[0, 0], [3, 0]], [[0, 0], [7, 0]]]
  EXPECT_THAT(values(tril(b, -1)), ElementsAre(0, 0, 3, 0, 0, 0, 7, 0));
  // On a non-contiguous input (a transpose) and other dtypes.
  Tensor bt = b.transpose(1, 2);  // [[[1, 3], [2, 4]], [[5, 7], [6, 8]]]
  EXPECT_THAT(values(triu(bt)), ElementsAre(1, 3, 0, 4, 5, 7, 0, 8));
  Tensor mask = triu(ones({3, 3}, DType::Bool), 1);
  EXPECT_EQ(mask.dtype(), DType::Bool);
  EXPECT_THAT(mask.to_vector<int64_t>(), ElementsAre(0, 1, 1, 0, 0, 1, 0, 0, 0));
  EXPECT_THAT(error_of([] { (void)triu(ones({3})); }), HasSubstr("triu"));
}

TEST(TensorFactory, FromVector) {
  Tensor t = from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, DType::Int64);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.at({2, 1}), 6);
  EXPECT_THAT(error_of([] { (void)from_vector({1, 2, 3}, {2, 2}); }), HasSubstr("[2, 2]"));
  // int64 values into float32 round once, as .to(float32): 2^54 + 2^30 + 1 is above the midpoint
  // of two floats, but through a double it is the midpoint and rounds to even.
  //   torch.tensor([2**54 + 2**30 + 1]).float() -> 18014400656965632. (2^54 + 2^31)
  const int64_t x = (int64_t{1} << 54) + (int64_t{1} << 30) + 1;
  const Tensor f = from_vector(std::vector<int64_t>{x}, {1}, kFloat32);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.to_vector<double>()[0], 18014400656965632.0);
  EXPECT_EQ(f.to_vector<double>()[0],
            from_vector(std::vector<int64_t>{x}, {1}).to(kFloat32).item());
}

// Every element count and byte size is checked for overflow, and a buffer that cannot be had is
// an ember::Error, never a crash or a short buffer.
TEST(TensorFactory, FactoriesRefuseByteCountsThatOverflow) {
  // 2^61 float64 elements: 2^64 bytes (the old code allocated 0 bytes and wrote past them).
  expect_error([] { zeros({int64_t{1} << 61}, DType::Float64); },
               "zeros: Storage size calculation overflowed with sizes=[2305843009213693952] and "
               "itemsize=8");
  expect_error(
      [] {
        zeros({int64_t{1} << 40, int64_t{1} << 40});
      },
      "Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]");
  expect_error([] { ones({kInt64Max, 2}); }, "Storage size calculation overflowed");
  expect_error([] { full({3, kHugeDim, 5}, 1.0); }, "full: Storage size calculation overflowed");
  expect_error(
      [] {
        empty({kHugeDim, kHugeDim, kHugeDim}, DType::Bool);
      },
      "Storage size calculation overflowed");
  expect_error([] { rand({kHugeDim, 4}); }, "Storage size calculation overflowed");
  expect_error([] { randn({4, kHugeDim}, DType::Float64); }, "Storage size calculation overflowed");
  expect_error([] { eye(int64_t{1} << 32); }, "Storage size calculation overflowed");
}

TEST(TensorFactory, NegativeSizesAreErrors) {
  expect_error([] { zeros({2, -1}); }, "zeros: Trying to create tensor with negative dimension -1");
  expect_error([] { full({-5}, 1.0); }, "negative dimension -5");
  expect_error([] { eye(-3); }, "negative dimension -3");
}

TEST(TensorFactory, AllocationFailureIsAnError) {
  // 2^60 bytes fit in int64 but no machine has them: an Error, not std::bad_alloc.
  expect_error([] { zeros({int64_t{1} << 57}, DType::Float64); },
               "not enough memory: you tried to allocate 1152921504606846976 bytes");
  // The message names the op the user called and the shape it could not allocate.
  expect_error([] { zeros({int64_t{1} << 57}, DType::Float64); },
               "zeros: cannot allocate a tensor of shape [144115188075855872] and dtype float64: "
               "DefaultCPUAllocator: not enough memory: you tried to allocate "
               "1152921504606846976 bytes.");
  const Tensor wide = ones({1}).expand({int64_t{1} << 40});  // 4 TiB as float32
  expect_error([&] { static_cast<void>(wide + 1.0); },
               "add: cannot allocate a tensor of shape [1099511627776] and dtype float32: "
               "DefaultCPUAllocator: not enough memory");
  expect_error([&] { static_cast<void>(wide.contiguous()); },
               "contiguous: cannot allocate a tensor of shape [1099511627776] and dtype float32");
}

TEST(TensorFactory, ArangeChecksItsLength) {
  // 2^61 int64 elements: 2^64 bytes.
  expect_error([] { arange(int64_t{1} << 61); }, "arange: Storage size calculation overflowed");
  expect_error([] { arange(0.0, 1e300, 1e-300, DType::Float32); },
               "arange: invalid size, possible overflow?");
  expect_error([] { arange(NAN); }, "arange: unsupported range: 0 -> nan");
  expect_error([] { arange(0.0, INFINITY, 1.0); }, "arange: unsupported range: 0 -> inf");
  expect_tensor(arange(0.0, 1.0, 0.25, DType::Float64), {4}, {0, 0.25, 0.5, 0.75});
}

// ---- element access ----

TEST(TensorAccess, ItemOnOneElementOnly) {
  EXPECT_EQ(tensor(3.5).item(), 3.5);
  EXPECT_EQ(tensor({{4}}).item(), 4);  // any shape with one element
  EXPECT_EQ(tensor({7}, DType::Int64).item<int64_t>(), 7);
  EXPECT_EQ(tensor({1}, DType::Bool).item<bool>(), true);
  // torch.tensor([1., 2.]).item() -> "only one element tensors can be converted to Python scalars"
  std::string msg = error_of([] { (void)tensor({1, 2}).item(); });
  EXPECT_THAT(msg, HasSubstr("item"));
  EXPECT_THAT(msg, HasSubstr("2 elements"));
  EXPECT_THAT(error_of([] { (void)zeros({0}).item(); }), HasSubstr("0 elements"));
}

// item<T>() for a narrower integer type T is exact or an Error, as libtorch's
// t.item<int32_t>() ("value cannot be converted to type int32_t without overflow").
TEST(TensorAccess, ItemIntoANarrowerIntegerTypeChecksItsRange) {
  const Tensor big = from_vector(std::vector<int64_t>{kInt64Max}, {1});
  EXPECT_EQ(big.item<int64_t>(), std::numeric_limits<int64_t>::max());
  expect_error(
      [&] { (void)big.item<int32_t>(); },
      "item: value 9223372036854775807 cannot be converted to type int32 without overflow");
  expect_error([] { (void)tensor({-1}, DType::Int64).item<uint8_t>(); },
               "item: value -1 cannot be converted to type uint8 without overflow");
  expect_error([] { (void)tensor({300.0}).item<uint8_t>(); },
               "item: value 300 cannot be converted to type uint8 without overflow");
  expect_error([] { (void)tensor({-1.5}).item<uint64_t>(); },
               "item: value -1 cannot be converted to type uint64 without overflow");
  // In range: the value itself (a float truncated toward zero, as int64 is).
  EXPECT_EQ(tensor({-2147483648.0}, DType::Int64).item<int32_t>(), -2147483648);
  EXPECT_EQ(tensor({255.9}).item<uint8_t>(), 255);
  EXPECT_EQ(tensor({-7.5}).item<int16_t>(), -7);
}

TEST(TensorAccess, AtAndSetWithNegativeIndices) {
  Tensor t = zeros({2, 3});
  t.set({1, 2}, 5);
  t.set({-2, -1}, 7);  // row 0, last column
  EXPECT_EQ(t.at({1, 2}), 5);
  EXPECT_EQ(t.at({-1, -1}), 5);
  EXPECT_EQ(t.at({0, 2}), 7);
  EXPECT_THAT(values(t), ElementsAre(0, 0, 7, 0, 0, 5));
  // at() reads through strides and offsets.
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(m.t().at({2, 0}), 3);
  EXPECT_EQ(m[1].at({0}), 4);
  // set() bumps the version (an in-place write).
  int64_t v = t.version();
  t.set({0, 0}, 1);
  EXPECT_GT(t.version(), v);
  // Int64 precision beyond double's 2^53 is not needed, but large values round-trip.
  Tensor big = zeros({1}, DType::Int64);
  big.set({0}, 1e15);
  EXPECT_EQ(big.item<int64_t>(), 1000000000000000);
}

// ---- copies ----

TEST(TensorCopy, CloneCopiesTheData) {
  Tensor a = tensor({{1, 2}, {3, 4}});
  Tensor c = a.clone();
  EXPECT_NE(c.storage(), a.storage());
  EXPECT_TRUE(equal(a, c));
  c.set({0, 0}, 100);
  EXPECT_EQ(a.at({0, 0}), 1);
  // A clone of a non-contiguous view is contiguous with the view's values.
  Tensor ct = a.t().clone();
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_THAT(values(ct), ElementsAre(1, 3, 2, 4));
  // Differentiable.
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = x.clone();
  EXPECT_EQ(y.grad_fn()->name(), "CloneBackward0");
  y.backward(tensor({3, 4}));
  EXPECT_THAT(values(x.grad()), ElementsAre(3, 4));
}

TEST(TensorCopy, DetachSharesStorageAndLeavesTheGraph) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.storage(), y.storage());
  EXPECT_EQ(d.shape(), y.shape());
  // Writes through the detached tensor are seen by the original (same storage).
  d.set({0}, 42);
  EXPECT_EQ(y.at({0}), 42);
  // A detached view keeps the view's geometry.
  Tensor dt = tensor({{1, 2}, {3, 4}}).t().detach();
  EXPECT_EQ(dt.strides(), (Shape{1, 2}));
  EXPECT_EQ(dt.at({0, 1}), 3);
  // Ops on it record nothing.
  Tensor z = d * 3.0;
  EXPECT_FALSE(z.requires_grad());
}

TEST(TensorCopy, CopyBroadcastsAndConvertsDType) {
  // x = torch.zeros(2, 3); x.copy_(torch.tensor([1, 2, 3]))
  Tensor x = zeros({2, 3});
  const void* data = x.storage()->data();
  x.copy_(tensor({1, 2, 3}, DType::Int64));
  EXPECT_EQ(x.dtype(), DType::Float32);
  EXPECT_EQ(x.storage()->data(), data);
  EXPECT_THAT(values(x), ElementsAre(1, 2, 3, 1, 2, 3));
  // x = torch.zeros(2, 3, dtype=torch.int64); x.copy_(torch.tensor([1.9, 2.2, -3.7]))
  // -> [[1, 2, -3], [1, 2, -3]]
  Tensor i = zeros({2, 3}, DType::Int64);
  i.copy_(tensor({1.9, 2.2, -3.7}));
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(1, 2, -3, 1, 2, -3));
  // Into a view: only the viewed elements change.
  Tensor base = zeros({3, 3});
  base.slice(1, 1, 3).copy_(ones({3, 2}));
  EXPECT_THAT(values(base), ElementsAre(0, 1, 1, 0, 1, 1, 0, 1, 1));
  // From a non-contiguous source.
  Tensor dst = zeros({2, 2});
  dst.copy_(tensor({{1, 2}, {3, 4}}).t());
  EXPECT_THAT(values(dst), ElementsAre(1, 3, 2, 4));
  // The source must broadcast to the destination, not the other way.
  std::string msg = error_of([] {
    Tensor small = zeros({3});
    small.copy_(ones({2, 3}));
  });
  EXPECT_THAT(msg, HasSubstr("copy_"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
}

TEST(TensorCopy, CopyFromATensorThatRequiresGradIsDifferentiable) {
  Tensor src = tensor({1, 2}).requires_grad_();
  Tensor dst = zeros({2, 2});
  dst.copy_(src);
  EXPECT_TRUE(dst.requires_grad());
  EXPECT_FALSE(dst.is_leaf());
  EXPECT_THAT(values(dst), ElementsAre(1, 2, 1, 2));
  dst.backward(tensor({{1, 2}, {3, 4}}));
  EXPECT_THAT(values(src.grad()), ElementsAre(4, 6));
}

TEST(TensorCopy, CopyIntoAnIntegerTensorFromOneThatRequiresGrad) {
  // torch.zeros(2, dtype=torch.int64).copy_(torch.tensor([1.5, 2.5], requires_grad=True))
  // -> tensor([1, 2]), no grad
  Tensor src = tensor({1.5, 2.5}).requires_grad_();
  Tensor dst = zeros({2}, DType::Int64);
  dst.copy_(src);
  EXPECT_THAT(dst.to_vector<int64_t>(), ElementsAre(1, 2));
  EXPECT_FALSE(dst.requires_grad());
}

TEST(TensorCopy, FillAndZero) {
  Tensor t = zeros({2, 2});
  t.fill_(2.5);
  EXPECT_THAT(values(t), ElementsAre(2.5, 2.5, 2.5, 2.5));
  // Through a strided view: only the column changes.
  t.select(1, 0).fill_(-1);
  EXPECT_THAT(values(t), ElementsAre(-1, 2.5, -1, 2.5));
  t.zero_();
  EXPECT_THAT(values(t), ElementsAre(0, 0, 0, 0));
  Tensor i = zeros({2}, DType::Int64);
  i.fill_(3.9);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(3, 3));
}

TEST(TensorCopy, ContiguousCopiesOnlyWhenNeeded) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor same = a.contiguous();
  EXPECT_TRUE(same.is_same(a));
  EXPECT_EQ(same.storage(), a.storage());
  Tensor t = a.t();
  EXPECT_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), a.storage());
  EXPECT_EQ(c.strides(), (Shape{2, 1}));
  EXPECT_THAT(values(c), ElementsAre(1, 4, 2, 5, 3, 6));
  // A row slice is contiguous (offset, no gaps); a column slice is not.
  EXPECT_TRUE(a[1].is_contiguous());
  EXPECT_TRUE(a[1].contiguous().storage() == a.storage());
  EXPECT_FALSE(a.select(1, 0).is_contiguous());
  // Size-1 dims do not break contiguity (as in PyTorch).
  EXPECT_TRUE(a.slice(0, 0, 1).is_contiguous());
  EXPECT_TRUE(a.unsqueeze(1).is_contiguous());
}

// ---- comparisons ----

TEST(TensorCompare, EqualNeedsSameShapeAndValues) {
  Tensor a = tensor({{1, 2}, {3, 4}});
  EXPECT_TRUE(equal(a, tensor({{1, 2}, {3, 4}})));
  EXPECT_FALSE(equal(a, tensor({{1, 2}, {3, 5}})));
  EXPECT_FALSE(equal(a, tensor({1, 2, 3, 4})));  // same values, other shape
  EXPECT_TRUE(equal(a.t(), tensor({{1, 3}, {2, 4}})));
  const double nan = std::nan("");
  EXPECT_FALSE(equal(tensor({nan}), tensor({nan})));
}

TEST(TensorCompare, AllcloseUsesPyTorchTolerances) {
  // torch.allclose(torch.tensor([1., 2.]), torch.tensor([1. + 1e-6, 2.])) -> True
  EXPECT_TRUE(allclose(tensor({1.0, 2.0}), tensor({1.0 + 1e-6, 2.0})));
  // torch.allclose(torch.tensor([1.]), torch.tensor([1.001])) -> False
  EXPECT_FALSE(allclose(tensor({1.0}), tensor({1.001})));
  EXPECT_TRUE(allclose(tensor({1.0}), tensor({1.001}), 1e-2));
  EXPECT_TRUE(allclose(tensor({0.0}), tensor({1e-3}), 0, 1e-2));
  // torch.allclose(nan, nan, equal_nan=True) -> True; False without it.
  const double nan = std::nan("");
  EXPECT_TRUE(allclose(tensor({nan}), tensor({nan}), 1e-5, 1e-8, true));
  EXPECT_FALSE(allclose(tensor({nan}), tensor({nan})));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(allclose(tensor({inf, -inf}), tensor({inf, -inf})));
  // torch.allclose(inf, -inf) -> False; torch.allclose(inf, 1e38) -> False
  EXPECT_FALSE(allclose(tensor({inf}), tensor({-inf})));
  EXPECT_FALSE(allclose(tensor({inf}), tensor({1e38})));
  // Broadcasts; incompatible shapes are an Error.
  EXPECT_TRUE(allclose(ones({2, 3}), tensor({1.0})));
  EXPECT_THAT(error_of([] { (void)allclose(ones({2}), ones({3})); }), HasSubstr("allclose"));
}

// ---- printing and metadata helpers ----

TEST(TensorPrint, ReprShowsGradFnAndRequiresGrad) {
  Tensor x = tensor({1, 2}).requires_grad_();
  EXPECT_EQ(repr(x), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ(repr(x * 2.0), "tensor([2., 4.], grad_fn=<MulBackward0>)");
  EXPECT_EQ(repr(Tensor()), "None");
  EXPECT_EQ(size_str({2, 6, 3}), "torch.Size([2, 6, 3])");
  EXPECT_EQ(repr(arange(3)), "tensor([0, 1, 2])");
}

// A tensor of more than 1000 elements prints its first and last 3 entries of each long dim, read
// through its strides: an expanded view of 2^40 or 2^51 elements prints as PyTorch's does.
TEST(TensorPrint, SummarizedTensorsReadOnlyTheShownEntries) {
  // repr(torch.ones(1).expand(2**40))
  EXPECT_EQ(repr(ones({1}).expand({int64_t{1} << 40})), "tensor([1., 1., 1.,  ..., 1., 1., 1.])");
  // repr(torch.arange(2.).reshape(2, 1).expand(2, 2**50))
  EXPECT_EQ(repr(arange(2.0).reshape({2, 1}).expand({2, int64_t{1} << 50})),
            "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
            "        [1., 1., 1.,  ..., 1., 1., 1.]])");
  // repr(torch.arange(1050).reshape(150, 7).t()): a transposed view, a dim of 7 cut to 6
  EXPECT_EQ(repr(arange(1050).reshape({150, 7}).t()),
            "tensor([[   0,    7,   14,  ..., 1029, 1036, 1043],\n"
            "        [   1,    8,   15,  ..., 1030, 1037, 1044],\n"
            "        [   2,    9,   16,  ..., 1031, 1038, 1045],\n"
            "        ...,\n"
            "        [   4,   11,   18,  ..., 1033, 1040, 1047],\n"
            "        [   5,   12,   19,  ..., 1034, 1041, 1048],\n"
            "        [   6,   13,   20,  ..., 1035, 1042, 1049]])");
}

TEST(TensorMeta, SizeAndStrideAcceptNegativeDims) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.stride(-1), 1);
  EXPECT_EQ(t.stride(-3), 12);
  EXPECT_THAT(error_of([&] { (void)t.size(3); }), HasSubstr("[-3, 2]"));
  EXPECT_THAT(error_of([&] { (void)t.stride(-4); }), HasSubstr("but got -4"));
}

TEST(TensorMeta, HandlesShareState) {
  Tensor a = zeros({2});
  Tensor b = a;  // a copy of the handle, like Python's b = a
  EXPECT_TRUE(a.is_same(b));
  b.set({0}, 3);
  EXPECT_EQ(a.at({0}), 3);
  b.requires_grad_();
  EXPECT_TRUE(a.requires_grad());
  EXPECT_FALSE(Tensor().defined());
}

TEST(TensorMeta, DimensionQueriesOnA0dTensor) {
  Tensor s = scalar_tensor(3.0);
  expect_error([&] { s.size(0); }, "size: dimension specified as 0 but tensor has no dimensions");
  expect_error([&] { s.size(-1); }, "size: dimension specified as -1 but tensor has no dimensions");
  expect_error([&] { s.stride(0); },
               "stride: dimension specified as 0 but tensor has no dimensions");
  expect_error([&] { s.stride(5); }, "dimension specified as 5 but tensor has no dimensions");
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 3.0);
}

}  // namespace
}  // namespace ember
