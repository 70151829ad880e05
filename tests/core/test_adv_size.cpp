// Adversarial sizes: every element count and byte size is checked for
// overflow, and a buffer that cannot be had is an ember::Error, never a crash or a short buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::expect_tensor;

constexpr int64_t kBig = int64_t{1} << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(AdvSize, FactoriesRefuseByteCountsThatOverflow) {
  // 2^61 float64 elements: 2^64 bytes (the old code allocated 0 bytes and wrote past them).
  expect_error([] { zeros({int64_t{1} << 61}, DType::Float64); },
               "zeros: Storage size calculation overflowed with sizes=[2305843009213693952] and "
               "itemsize=8");
  expect_error(
      [] {
        zeros({int64_t{1} << 40, int64_t{1} << 40});
      },
      "Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]");
  expect_error([] { ones({kMax, 2}); }, "Storage size calculation overflowed");
  expect_error([] { full({3, kBig, 5}, 1.0); }, "full: Storage size calculation overflowed");
  expect_error(
      [] {
        empty({kBig, kBig, kBig}, DType::Bool);
      },
      "Storage size calculation overflowed");
  expect_error([] { rand({kBig, 4}); }, "Storage size calculation overflowed");
  expect_error([] { randn({4, kBig}, DType::Float64); }, "Storage size calculation overflowed");
  expect_error([] { eye(int64_t{1} << 32); }, "Storage size calculation overflowed");
}

TEST(AdvSize, AZeroDimensionMakesAnyShapeEmpty) {
  // PyTorch: torch.zeros(0, 2**62, 2**62) is an empty tensor.
  Tensor t = zeros({0, kBig, kBig});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.shape(), (Shape{0, kBig, kBig}));
}

TEST(AdvSize, NegativeSizesAreErrors) {
  expect_error([] { zeros({2, -1}); }, "zeros: Trying to create tensor with negative dimension -1");
  expect_error([] { full({-5}, 1.0); }, "negative dimension -5");
  expect_error([] { eye(-3); }, "negative dimension -3");
}

TEST(AdvSize, AllocationFailureIsAnError) {
  // 2^60 bytes fit in int64 but no machine has them: an Error, not std::bad_alloc.
  expect_error([] { zeros({int64_t{1} << 57}, DType::Float64); },
               "not enough memory: you tried to allocate 1152921504606846976 bytes");
}

TEST(AdvSize, ArangeChecksItsLength) {
  // 2^61 int64 elements: 2^64 bytes.
  expect_error([] { arange(2305843009213693952.); }, "arange: Storage size calculation overflowed");
  expect_error([] { arange(0.0, 1e300, 1e-300, DType::Float32); },
               "arange: invalid size, possible overflow?");
  expect_error([] { arange(NAN); }, "arange: unsupported range: 0 -> nan");
  expect_error([] { arange(0.0, INFINITY, 1.0); }, "arange: unsupported range: 0 -> inf");
  expect_tensor(arange(0.0, 1.0, 0.25, DType::Float64), {4}, {0, 0.25, 0.5, 0.75});
}

TEST(AdvSize, ExpandToAnOverflowingShapeCannotBeMaterialised) {
  Tensor e = ones({1, 1}).expand({int64_t{1} << 32, int64_t{1} << 32});
  EXPECT_EQ(e.stride(0), 0);
  expect_error([&] { e.contiguous(); }, "Storage size calculation overflowed");
  expect_error([&] { e.numel(); }, "overflows int64");
  expect_error([&] { e.clone(); }, "Storage size calculation overflowed");
  expect_error([&] { (e + 1.0).numel(); }, "overflow");
}

TEST(AdvSize, ViewAndReshapeDoNotOverflowBeforeTheirError) {
  Tensor x = arange(4.0, DType::Float32);
  expect_error(
      [&] {
        x.view({kBig, kBig});
      },
      "view: shape '[4611686018427387904, "
      "4611686018427387904]' is invalid for input of size 4");
  expect_error([&] { x.view({-1, kBig, 4}); }, "is invalid for input of size 4");
  expect_error([&] { x.reshape({kBig, -1, kBig}); }, "reshape: shape");
  expect_error([&] { x.reshape({kMax, kMax}); }, "is invalid for input of size 4");
  // An empty tensor: 0 elements, still no signed overflow while inferring.
  Tensor empty_t = zeros({0});
  expect_error([&] { empty_t.view({-1, kBig, kBig}); }, "is invalid for input of size 0");
}

TEST(AdvSize, HugeStepsAndLengthsDoNotOverflow) {
  Tensor x = arange(5.0, DType::Float64);
  // x[0::2**63-1] is [0.].
  expect_tensor(x.slice(0, 0, std::nullopt, kMax), {1}, {0});
  expect_tensor(x.slice(0, 1, kMax, kBig), {1}, {1});
  expect_tensor(x.slice(0, -kMax, kMax, 2), {3}, {0, 2, 4});
  expect_error([&] { x.narrow(0, 2, kMax); }, "narrow: start (2) + length (9223372036854775807)");
  expect_error([&] { x.narrow(0, -kMax, 1); }, "narrow: start out of range");
  // x.split(2**63-1) is one piece; x.chunk(2**63-1) five pieces of one.
  auto pieces = x.split(kMax);
  ASSERT_EQ(pieces.size(), 1u);
  expect_tensor(pieces[0], {5}, {0, 1, 2, 3, 4});
  EXPECT_EQ(x.chunk(kMax).size(), 5u);
  expect_error([&] { x.select(0, kMax); }, "select: index 9223372036854775807 is out of range");
  expect_error([&] { x.select(0, -kMax); }, "is out of range");
}

TEST(AdvSize, FlattenOfAnOverflowingExpandIsAnError) {
  Tensor e = ones({1, 1, 1}).expand({kBig, 4, 4});
  expect_error([&] { e.flatten(); }, "flatten: size calculation overflowed");
}

// An empty tensor may have huge other dims ([0, 2^62, 25]); products of its sizes wrap and its
// strides are garbage that no kernel may compute with (fuzz_ops found signed overflows in
// is_row_major, floating_sum, var's n - correction and the overlap check of cat's copy_).
// Every op either gives PyTorch's empty result or an Error; UBSan (asan preset) checks the rest.
TEST(AdvSize, EmptyTensorsWithHugeOtherDimsNeverOverflow) {
  const Tensor e = zeros({0, kBig, 25});
  EXPECT_TRUE(e.is_contiguous());  // PyTorch: any empty tensor is contiguous
  EXPECT_EQ(sum(e, {1}).shape(), (Shape{0, 25}));
  EXPECT_EQ(mean(e, {2}, true).shape(), (Shape{0, kBig, 1}));
  EXPECT_EQ(softmax(e, 2).shape(), e.shape());
  EXPECT_EQ(log_softmax(e, 1).shape(), e.shape());
  EXPECT_EQ(var(e, {1}, Correction(std::numeric_limits<int64_t>::min())).shape(), (Shape{0, 25}));
  EXPECT_EQ(e.transpose(0, 2).contiguous().shape(), (Shape{25, kBig, 0}));
  EXPECT_EQ(e.view({kBig, 0, 25}).shape(), (Shape{kBig, 0, 25}));
  EXPECT_EQ(e.reshape({-1, 25}).shape(), (Shape{0, 25}));
  EXPECT_EQ(index_select(e, 2, arange(3.0).to(DType::Int64)).shape(), (Shape{0, kBig, 3}));
  EXPECT_EQ(cat({e, e}, 0).shape(), e.shape());
  // 2^62 + 2^62 does not fit (PyTorch: "negative dimension -9223372036854775808").
  expect_error(
      [&] {
        cat({e, e}, 1);
      },
      "cat: the concatenated size in dimension 1 overflows int64");
  Tensor dst = zeros({0, kBig, 25});
  dst.copy_(e);
  dst.add_(e);
  dst.masked_fill_(zeros({0, kBig, 25}, DType::Bool), 1.0);
  EXPECT_EQ(dst.numel(), 0);
  EXPECT_EQ(repr(e), "tensor([], size=(0, 4611686018427387904, 25))");
  // A reduction that would produce the huge dims is refused before allocating.
  expect_error([&] { sum(e, {0}); }, "Storage size calculation overflowed");
}

}  // namespace
}  // namespace ember
