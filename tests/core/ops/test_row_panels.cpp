// RowPanelScope (core/ops/nn_ops.h): within it, linear() of one float32 row without a gradient
// to record reads its weight packed in row panels, with the bits of the product in place.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/ember.h"
#include "core/ops/nn_ops.h"

namespace ember {
namespace {

std::vector<float> values_of(const Tensor& t) { return t.contiguous().to_vector<float>(); }

void expect_same_bits(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  const std::vector<float> x = values_of(a), y = values_of(b);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

// The shapes a GPT's layers see at each generated token ([1, 1, in] and [1, in]), with and without
// a bias, and widths that leave a narrow last panel: the packed product's bits are linear's.
TEST(RowPanelScope, OneRowHasTheBitsOfTheProductInPlace) {
  manual_seed(3);
  for (const int64_t out : {1, 50, 64, 200}) {
    const Tensor w = randn({out, 96}), b = randn({out});
    for (const Shape& shape : {Shape{1, 1, 96}, Shape{1, 96}, Shape{96}}) {
      const Tensor x = randn(shape);
      const Tensor plain = linear(x, w, b), plain_no_bias = linear(x, w);
      RowPanelScope scope;
      expect_same_bits(linear(x, w, b), plain);
      expect_same_bits(linear(x, w), plain_no_bias);
      EXPECT_EQ(RowPanelScope::packed_bytes(), out * 96 * 4);  // one copy, reused
    }
  }
}

// Only one row of float32 with no gradient to record takes the packed weight; the packed copy
// follows the weight's changes (its version) and is freed with the outermost scope.
TEST(RowPanelScope, PacksOnlyWhatItServesAndFollowsTheWeight) {
  manual_seed(4);
  Tensor w = randn({70, 32});
  const Tensor x1 = randn({1, 32}), x2 = randn({2, 32});
  {
    RowPanelScope outer;
    {
      RowPanelScope inner;                                 // nested: the outer one holds the copies
      expect_same_bits(linear(x2, w), matmul(x2, w.t()));  // two rows: in place
      EXPECT_EQ(RowPanelScope::packed_bytes(), 0);
      const Tensor wd = w.to(DType::Float64);
      EXPECT_TRUE(
          allclose(linear(x1.to(DType::Float64), wd), matmul(x1.to(DType::Float64), wd.t())));
      EXPECT_EQ(RowPanelScope::packed_bytes(), 0);  // float64: in place
      const Tensor wg = w.detach().requires_grad_(true);
      const Tensor y = linear(x1, wg);  // a gradient to record: in place, and it has a graph
      EXPECT_TRUE(y.requires_grad());
      EXPECT_EQ(RowPanelScope::packed_bytes(), 0);
      expect_same_bits(linear(x1, w), matmul(x1, w.t()));
      EXPECT_EQ(RowPanelScope::packed_bytes(), 70 * 32 * 4);
    }
    EXPECT_EQ(RowPanelScope::packed_bytes(), 70 * 32 * 4);
    w.mul_(2.0);  // in place: a new version, so the copy is packed again
    expect_same_bits(linear(x1, w), matmul(x1, w.t()));
    const Tensor slice = w.narrow(0, 5, 60);  // another view of the same storage: its own copy
    expect_same_bits(linear(x1, slice), matmul(x1, slice.t()));
    EXPECT_EQ(RowPanelScope::packed_bytes(), (70 + 60) * 32 * 4);
    const Tensor wt = randn({32, 70}).t();  // a transposed weight reads through its strides
    expect_same_bits(linear(x1, wt), matmul(x1, wt.t()));
  }
  EXPECT_EQ(RowPanelScope::packed_bytes(), 0);
  expect_same_bits(linear(x1, w), matmul(x1, w.t()));  // no scope: in place
}

}  // namespace
}  // namespace ember
