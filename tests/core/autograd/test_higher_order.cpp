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
#include "core/autograd/gradcheck.h"
#include "core/base/grad_mode.h"
#include "core/graph/function.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;
using test::expect_values;
using test::values;
using ::testing::HasSubstr;

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

// ---- bad input ----

// An op whose backward is a raw kernel with no double backward (every op of Ember has one now,
// the fused kernels included: tests/core/autograd/test_higher_order_fused.cpp).
struct RawSquare : autograd::OpFunction<RawSquare> {
  static constexpr const char* name = "RawSquareBackward0";
  static constexpr bool twice_differentiable = false;
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return x * x;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    NoGradGuard no_grad;  // as a kernel: no graph
    return {grad * saved(0) * 2.0};
  }
};

TEST(HigherOrder, KernelWithoutDoubleBackwardRaisesNamingIt) {
  // Its gradient, recorded under create_graph, raises when differentiated again, naming the op
  // (never a silent zero).
  Tensor q = randn({3}, DType::Float64).requires_grad_();
  Tensor out = autograd::apply<RawSquare>(q);
  Tensor g = autograd::grad({(out * out).sum()}, {q}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(g.requires_grad());
  EXPECT_THAT(error_of([&] { (void)autograd::grad({g.sum()}, {q}); }),
              HasSubstr("the derivative for 'raw_square' is not implemented: "
                        "RawSquareBackward0"));
}

TEST(HigherOrder, BackwardTwiceThroughAFreedGraphStaysAnError) {
  Tensor x = x123();
  Tensor y = exp(x).sum();
  y.backward({}, /*retain_graph=*/false, /*create_graph=*/true);
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("Trying to backward through the graph a second time"));
  // create_graph alone retains it (retain_graph defaults to create_graph).
  Tensor z = exp(x).sum();
  z.backward({}, std::nullopt, true);
  EXPECT_EQ(error_of([&] { z.backward(); }), "");
}

TEST(HigherOrder, HooksRunInsideACreateGraphBackward) {
  // A hook on a non-leaf doubles its gradient, in the first backward and again in the second
  // (which runs through h's node too). torch: h = x * x; h.register_hook(lambda g: 2 * g);
  // g = grad((h * h).sum(), x, create_graph=True) = 8 x^3 = [8, 64, -216];
  // grad(g.sum(), x) = [40, 160, 360]
  Tensor x = x123();
  Tensor h = x * x;
  h.register_hook([](const Tensor& g) { return 2.0 * g; });
  Tensor g = autograd::grad({(h * h).sum()}, {x}, {}, std::nullopt, true)[0];
  expect_values(g, {8, 64, -216}, 1e-12);
  expect_values(autograd::grad({g.sum()}, {x})[0], {40, 160, 360}, 1e-12);
  // A hook on a leaf sees the gradient with its graph, and may replace it.
  Tensor w = x123();
  bool saw_graph = false;
  w.register_hook([&](const Tensor& gw) {
    saw_graph = gw.requires_grad();
    return 3.0 * gw;
  });
  pow(w, 3.0).sum().backward({}, std::nullopt, true);
  EXPECT_TRUE(saw_graph);
  expect_values(w.grad(), {9, 36, 81}, 1e-12);
  expect_values(autograd::grad({w.grad().sum()}, {w})[0], {18, 36, -54}, 1e-12);
}

TEST(HigherOrder, RetainGradKeepsAGradientWithItsGraph) {
  // h = x * x; h.retain_grad(); (h * h).sum().backward(create_graph=True): h.grad = 2h, with a
  // graph (torch: grad_fn=<CloneBackward0>), whose derivative w.r.t. x is 2 * 2x.
  Tensor x = x123();
  Tensor h = x * x;
  h.retain_grad();
  (h * h).sum().backward({}, std::nullopt, true);
  ASSERT_TRUE(h.grad().defined());
  expect_values(h.grad(), {2, 8, 18}, 1e-12);
  EXPECT_TRUE(h.grad().requires_grad());
  expect_values(autograd::grad({h.grad().sum()}, {x})[0], {4, 8, -12}, 1e-12);
}

TEST(HigherOrder, VersionCounterGuardsTheRecordedGraph) {
  // The gradient's graph reads h (saved by the products); changing h in place before
  // differentiating it again is the in-place error, as in PyTorch:
  // h = x * 2.0; g, = grad((h * h * h).sum(), x, create_graph=True)  -> [24, 96, 216]
  // h.add_(1); grad(g.sum(), x) -> "one of the variables needed for gradient computation has
  // been modified by an inplace operation"; untouched, grad(g.sum(), x) = [48, 96, -144].
  Tensor x = x123();
  Tensor h = x * 2.0;
  Tensor g = autograd::grad({(h * h * h).sum()}, {x}, {}, std::nullopt, true)[0];
  expect_values(g, {24, 96, 216}, 1e-12);
  Tensor h2 = x * 2.0;
  Tensor g2 = autograd::grad({(h2 * h2 * h2).sum()}, {x}, {}, std::nullopt, true)[0];
  expect_values(autograd::grad({g2.sum()}, {x})[0], {48, 96, -144}, 1e-12);
  h.add_(1.0);
  EXPECT_THAT(error_of([&] { (void)autograd::grad({g.sum()}, {x}); }),
              HasSubstr("modified by an inplace operation"));
}

// ---- gradgradcheck's report ----

// x^3 whose backward is right to first order but treats one factor as a constant, so its
// second derivative is 3x^2 -> 3x, not 6x.
struct WrongCube : autograd::OpFunction<WrongCube> {
  static constexpr const char* name = "WrongCubeBackward";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return x * x * x;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0);
    return {grad * 3.0 * x * x.detach()};
  }
};

TEST(HigherOrder, GradgradcheckReportNamesTheOpTheInputAndTheWorstElement) {
  Tensor x = x123();
  auto fn = [](const std::vector<Tensor>& in) { return autograd::apply<WrongCube>(in[0]); };
  autograd::GradcheckResult first = autograd::gradcheck(fn, {x});
  EXPECT_TRUE(first.ok) << first.report;  // first order is right
  autograd::GradcheckResult second = autograd::gradgradcheck(fn, {x});
  EXPECT_FALSE(second.ok);
  EXPECT_THAT(second.report, HasSubstr("gradgradcheck of WrongCubeBackward failed"));
  EXPECT_THAT(second.report, HasSubstr("Jacobian mismatch for input 0 (shape [3])"));
  // (The worst element depends on the random grad_output: the Jacobian is diagonal.)
  EXPECT_THAT(second.report,
              ::testing::ContainsRegex("worst: d output element [0-2] \\(index \\[[0-2]\\]\\) / d "
                                       "input 0 element [0-2] \\(index"));
  EXPECT_THAT(second.report, HasSubstr("numerical "));
  // And a right one passes: x^3 through pow.
  EXPECT_TRUE(
      autograd::gradgradcheck([](const std::vector<Tensor>& in) { return pow(in[0], 3.0); }, {x})
          .ok);
}

}  // namespace
}  // namespace ember
