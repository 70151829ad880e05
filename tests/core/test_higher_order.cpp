// Higher-order gradients (issue 21): backward and autograd::grad with create_graph record the
// graph of the gradient, so it can be differentiated again; saved inputs and outputs keep their
// place in the graph; leaves' .grad get a grad_fn; what must stay an error stays one.
//
// Expected values from PyTorch 1.13 (/usr/bin/python3), its lines in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"
#include "core/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_values;
using test::values;

// x = torch.tensor([1., 2., -3.], dtype=torch.float64, requires_grad=True)
Tensor x123() { return tensor({1.0, 2.0, -3.0}, DType::Float64).requires_grad_(); }

TEST(HigherOrder, SecondDerivativeOfCube) {
  // y = (x**3).sum(); g, = grad(y, x, create_graph=True); g2, = grad(g.sum(), x) -> 6x
  Tensor x = x123();
  Tensor y = pow(x, 3.0).sum();
  Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  expect_values(g, {3, 12, 27}, 1e-12);
  EXPECT_TRUE(g.requires_grad());
  Tensor g2 = autograd::grad({g.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  expect_values(g2, {6, 12, -18}, 1e-12);
  // Third: d(sum 6x)/dx = 6.
  Tensor g3 = autograd::grad({g2.sum()}, {x})[0];
  expect_values(g3, {6, 6, 6}, 1e-12);
  EXPECT_FALSE(g3.requires_grad());
}

TEST(HigherOrder, ExpSavesItsOutput) {
  // exp saves its output: the second derivative flows through the saved output's own node.
  Tensor x = x123();
  Tensor g = autograd::grad({exp(x).sum()}, {x}, {}, std::nullopt, true)[0];
  Tensor g2 = autograd::grad({g.sum()}, {x})[0];
  expect_values(g2, {std::exp(1.0), std::exp(2.0), std::exp(-3.0)}, 1e-12);
}

TEST(HigherOrder, MatmulHessianVectorProduct) {
  // a (2x3), b (3x2); L = (a @ b).pow(2).sum(); ga = grad(L, a, create_graph); grad(ga.sum(), b)
  Tensor a = tensor({{1.0, 2.0, 3.0}, {-1.0, 0.5, 2.0}}, DType::Float64).requires_grad_();
  Tensor b = tensor({{0.5, -1.0}, {2.0, 1.0}, {-0.5, 3.0}}, DType::Float64).requires_grad_();
  Tensor loss = pow(mm(a, b), 2.0).sum();
  Tensor ga = autograd::grad({loss}, {a}, {}, std::nullopt, true)[0];
  Tensor gb = autograd::grad({ga.sum()}, {b})[0];
  // torch: [[5., 35.], [15., 50.], [25., 65.]]
  expect_values(gb, {5, 35, 15, 50, 25, 65}, 1e-12);
}

TEST(HigherOrder, BackwardCreateGraphGivesLeafGradAGraph) {
  // x.grad after backward(create_graph=True) has a grad_fn; its backward gives d2y/dx2.
  Tensor x = x123();
  Tensor y = (pow(x, 3.0)).sum();
  y.backward({}, std::nullopt, /*create_graph=*/true);
  Tensor gx = x.grad();
  ASSERT_TRUE(gx.defined());
  EXPECT_TRUE(gx.requires_grad());
  EXPECT_TRUE(gx.grad_fn() != nullptr);
  expect_values(gx, {3, 12, 27}, 1e-12);
  Tensor h = autograd::grad({gx.sum()}, {x})[0];
  expect_values(h, {6, 12, -18}, 1e-12);
}

TEST(HigherOrder, WithoutCreateGraphNothingHasAGraph) {
  Tensor x = x123();
  Tensor g = autograd::grad({pow(x, 3.0).sum()}, {x})[0];
  EXPECT_FALSE(g.requires_grad());
  Tensor y = pow(x, 3.0).sum();
  y.backward();
  EXPECT_FALSE(x.grad().requires_grad());
  EXPECT_TRUE(GradMode::is_enabled());
}

}  // namespace
}  // namespace ember
