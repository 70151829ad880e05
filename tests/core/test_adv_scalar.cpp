// Adversarial 0-d tensors: dims are wrapped as PyTorch does; ops that need a
// dimension raise PyTorch's messages instead of reading past an empty shape.
#include <gtest/gtest.h>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::expect_tensor;

TEST(AdvScalar, DimensionQueriesOnA0dTensor) {
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

TEST(AdvScalar, ViewsThatNeedADimension) {
  Tensor s = scalar_tensor(3.0);
  expect_error([&] { s.narrow(0, 0, 1); }, "narrow() cannot be applied to a 0-dim tensor.");
  expect_error([&] { s.select(0, 0); }, "select: cannot be applied to a 0-dim tensor");
  expect_error([&] { s[0]; }, "cannot be applied to a 0-dim tensor");
  expect_error([&] { s.slice(0, 0, 1); }, "slice: cannot be applied to a 0-dim tensor");
  expect_error([&] { s.index({0}); }, "too many indices for tensor of dimension 0");
  expect_error([&] { s.index({Slice(None, 1)}); }, "too many indices for tensor of dimension 0");
  expect_error([&] { s.split(1); }, "split: expected a tensor with at least 1 dimension");
  expect_error([&] { s.chunk(1); }, "chunk: expected a tensor with at least 1 dimension");
  expect_error([&] { s.transpose(0, 1); },
               "transpose: dimension out of range (expected to be in "
               "range of [-1, 0], but got 1)");
  expect_error([&] { s.unsqueeze(2); }, "unsqueeze: dimension out of range");
  expect_error([&] { s.permute({0}); }, "permute: number of dims don't match");
}

// PyTorch wraps dim 0 and -1 on a 0-d tensor for these ops (wrap_scalar=True).
TEST(AdvScalar, OpsThatAcceptDim0OnA0dTensor) {
  Tensor s = scalar_tensor(3.0, DType::Float64);
  expect_tensor(s.transpose(0, -1), {}, {3});
  expect_tensor(s.unsqueeze(0), {1}, {3});
  expect_tensor(s.unsqueeze(-1), {1}, {3});
  expect_tensor(s.squeeze(0), {}, {3});
  expect_tensor(s.flatten(), {1}, {3});
  expect_tensor(s.sum(0), {}, {3});
  expect_tensor(s.sum(-1, true), {}, {3});
  expect_tensor(s.mean(0), {}, {3});
  expect_tensor(softmax(s, 0), {}, {1});
  expect_tensor(log_softmax(s, -1), {}, {0});
  expect_tensor(s.argmax(0), {}, {0});
  expect_tensor(s.t(), {}, {3});
  expect_tensor(s.permute({}), {}, {3});
  expect_tensor(s.reshape({1, 1}), {1, 1}, {3});
  expect_tensor(s.expand({2, 2}), {2, 2}, {3, 3, 3, 3});
  expect_tensor(s.view({-1}), {1}, {3});
  expect_tensor(matmul(ones({2}, DType::Float64), ones({2}, DType::Float64)), {}, {2});
  expect_error([&] { matmul(s, s); }, "matmul: both arguments need at least 1 dimension");
  expect_error([&] { s.sum(1); },
               "sum: dimension out of range (expected to be in range of [-1, 0], "
               "but got 1)");
}

TEST(AdvScalar, GradientsOf0dOps) {
  Tensor s = scalar_tensor(3.0, DType::Float64).requires_grad_();
  Tensor y = (s.unsqueeze(0).expand({4}) * s).sum();  // 4 s^2
  y.backward();
  expect_tensor(s.grad(), {}, {24});
}

}  // namespace
}  // namespace ember
