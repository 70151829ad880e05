// Gradients reach leaves without copies where nobody else can see them (AccumulateGrad takes
// them over, core/autograd/engine.cpp), in the leaf's layout (mm and addmm compute the gradient of
// a transposed operand, a linear layer's weight.t(), as a transposed product: core/ops/linalg.cpp),
// and never shared between two leaves.
#include <gtest/gtest.h>

#include <vector>

#include "core/ember.h"
#include "core/ops/nn_ops.h"

namespace ember {
namespace {

// A linear layer's weight gets a contiguous gradient equal to x^T dY (transposed), with and
// without bias, for 2-d and 3-d inputs, in float32 and float64.
TEST(GradLayout, LinearWeightGradientsAreContiguousAndRight) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (bool with_bias : {false, true}) {
      for (int dims : {2, 3}) {
        manual_seed(3);
        Tensor w = randn({5, 7}).to(dtype).requires_grad_(true);
        Tensor b = with_bias ? randn({5}).to(dtype).requires_grad_(true) : Tensor();
        Tensor x = dims == 2 ? randn({6, 7}).to(dtype) : randn({2, 3, 7}).to(dtype);
        x.requires_grad_(true);
        Tensor y = linear(x, w, b);
        Tensor g = randn(y.shape()).to(dtype);
        y.backward(g);
        ASSERT_TRUE(w.grad().defined());
        EXPECT_TRUE(w.grad().is_contiguous()) << with_bias << " " << dims;
        const Tensor x2 = x.detach().reshape({-1, 7}), g2 = g.reshape({-1, 5});
        const double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
        EXPECT_TRUE(allclose(w.grad(), matmul(g2.t(), x2), tol, tol));
        EXPECT_TRUE(allclose(x.grad().reshape({-1, 7}), matmul(g2, w.detach()), tol, tol));
      }
    }
  }
}

// mm with a column-major first operand: its gradient is column-major too, with the right values.
TEST(GradLayout, TransposedFirstOperandOfMm) {
  manual_seed(4);
  Tensor a = randn({4, 6}, DType::Float64).requires_grad_(true);
  Tensor b = randn({4, 5}, DType::Float64).requires_grad_(true);
  Tensor c = mm(a.t(), b);
  Tensor g = randn({6, 5}, DType::Float64);
  c.backward(g);
  EXPECT_TRUE(a.grad().is_contiguous());
  EXPECT_TRUE(allclose(a.grad(), matmul(b.detach(), g.t()), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(b.grad(), matmul(a.detach(), g), 1e-12, 1e-12));
}

// One gradient handed to two leaves (AddBackward passes it on to both) is not shared: scaling
// one leaf's gradient in place leaves the other's alone. A gradient the caller still holds is
// not taken over either.
TEST(GradLayout, LeavesNeverShareAGradient) {
  Tensor w1 = full({300, 300}, 1.0).requires_grad_(true);
  Tensor w2 = full({300, 300}, 2.0).requires_grad_(true);
  (w1 + w2).sum().backward();
  {
    NoGradGuard no_grad;
    w1.grad().mul_(3.0);
  }
  EXPECT_EQ(w1.grad().sum().item(), 3.0 * 300 * 300);
  EXPECT_EQ(w2.grad().sum().item(), 1.0 * 300 * 300);

  Tensor v = zeros({1000}).requires_grad_(true);
  Tensor seed = full({1000}, 5.0);
  (v * 1.0).backward(seed);
  {
    NoGradGuard no_grad;
    v.grad().mul_(2.0);
  }
  EXPECT_EQ(seed.sum().item(), 5000.0);  // the caller's tensor is untouched
  EXPECT_EQ(v.grad().sum().item(), 10000.0);
  Tensor u = zeros({1000}).requires_grad_(true);
  u.backward(seed);  // the root's own gradient is the caller's tensor
  {
    NoGradGuard no_grad;
    u.grad().mul_(2.0);
  }
  EXPECT_EQ(seed.sum().item(), 5000.0);
}

}  // namespace
}  // namespace ember
