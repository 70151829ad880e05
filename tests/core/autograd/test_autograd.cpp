// The autograd engine: leaves and grad_fns, backward with implicit and explicit gradients,
// accumulation, retain_graph, retain_grad, hooks, NoGradGuard, autograd::grad, shared and
// diamond-shaped graphs, broadcasting undone, in-place ops and the version check, deep chains and
// wide or shared graphs (teardown and backward of any graph use bounded stack), ownership (nothing
// leaks, a graph may outlive its leaves), DOT export and the debug trace.
//
// Expected values come from PyTorch 1.13 (/usr/bin/python3 -c 'import torch; ...'); the Python
// lines are in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/log.h"
#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/base/grad_mode.h"
#include "core/graph/function.h"
#include "core/graph/node.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;

constexpr double kInf = std::numeric_limits<double>::infinity();

using test::error_of;
using test::expect_error;
using test::expect_tensor;
using test::values;

// The deep graphs' sizes: 10^6 nodes in release; ASan's bigger frames and slower allocator get a
// tenth of that, which is still far deeper than the default 8 MB stack allows for one frame per
// node. The other shapes run at a tenth of that (100,000 nodes overflow a recursive teardown).
// (The test's own code is compiled the same way in every build: it asks the library, whose
// allocator caches nothing under ASan.)
#if defined(__SANITIZE_THREAD__)
const int kNodes = 100'000;
#else
const int kNodes = detail::allocator_caches() ? 1'000'000 : 100'000;
#endif
const int kShapeNodes = kNodes / 10;

// ---- leaves, requires_grad, grad_fn ----

TEST(AutogradLeaves, RequiresGradAndIsLeaf) {
  Tensor plain = tensor({1, 2});
  EXPECT_FALSE(plain.requires_grad());
  EXPECT_TRUE(plain.is_leaf());
  EXPECT_EQ(plain.grad_fn(), nullptr);
  EXPECT_FALSE(plain.grad().defined());

  Tensor x = tensor({1, 2}).requires_grad_();
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);

  Tensor y = x * 2.0;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  // The node's edges: the leaf's AccumulateGrad, and nothing for the scalar.
  ASSERT_EQ(y.grad_fn()->next_functions.size(), 2u);
  ASSERT_NE(y.grad_fn()->next_functions[0], nullptr);
  EXPECT_EQ(y.grad_fn()->next_functions[0]->name(), "AccumulateGrad");
  EXPECT_EQ(y.grad_fn()->next_functions[1], nullptr);

  // An op on tensors that do not require grad records nothing.
  Tensor z = plain * plain;
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
  // One input that requires grad is enough.
  EXPECT_TRUE((plain + x).requires_grad());
  // requires_grad_(false) on a leaf works.
  Tensor w = tensor({1.0}).requires_grad_();
  w.requires_grad_(false);
  EXPECT_FALSE(w.requires_grad());
}

TEST(AutogradLeaves, OnlyFloatLeavesCanRequireGrad) {
  EXPECT_THAT(error_of([] {
                tensor({1, 2}, DType::Int64).requires_grad_();
              }),
              HasSubstr("floating point"));
  EXPECT_THAT(error_of([] { tensor({1, 0}, DType::Bool).requires_grad_(); }), HasSubstr("bool"));
  Tensor x = tensor({1.0}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_THAT(error_of([&] { y.requires_grad_(false); }), HasSubstr("leaf"));
}

// ---- backward ----

TEST(AutogradBackward, ImplicitOneForScalars) {
  // x = torch.tensor([1., 2., 3.], requires_grad=True); (x * x).sum().backward(); x.grad
  // -> [2, 4, 6]
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor loss = (x * x).sum();
  EXPECT_EQ(loss.dim(), 0);
  loss.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().shape(), (Shape{3}));
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 4, 6));
  // A one-element tensor of any shape also gets the implicit 1.
  Tensor w = tensor({2.0}).requires_grad_();
  Tensor one = (w * w).reshape({1, 1});
  one.backward();
  EXPECT_THAT(values(w.grad()), ElementsAre(4));
}

TEST(AutogradBackward, ExplicitGradientForNonScalars) {
  Tensor x = tensor({{1, 2}, {3, 4}}).requires_grad_();
  Tensor y = x * 3.0;
  y.backward(tensor({{1, 0}, {0.5, 2}}));
  EXPECT_THAT(values(x.grad()), ElementsAre(3, 0, 1.5, 6));
}

// torch.autograd.backward([a, b], [g]) -> RuntimeError: got 2 tensors and 1 gradients (libtorch
// refuses more gradients than tensors too). The second scalar output gets no implicit 1.
TEST(AutogradBackward, OneGradientPerOutputOrNone) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor a = (x * 2.0).sum();
  Tensor b = (x * 3.0).sum();
  EXPECT_EQ(error_of([&] {
              autograd::backward({a, b}, {ones({})}, true);
            }),
            "backward: got 2 tensors and 1 gradients");
  EXPECT_EQ(error_of([&] {
              autograd::grad({a, b}, {x}, {ones({})}, true);
            }),
            "backward: got 2 tensors and 1 gradients");
  EXPECT_EQ(error_of([&] {
              autograd::backward({a}, {ones({}), ones({})}, true);
            }),
            "backward: got 1 tensors and 2 gradients");
  EXPECT_FALSE(x.grad().defined());
  autograd::backward({a, b}, {ones({}), full({}, 2.0)});
  EXPECT_THAT(values(x.grad()), ElementsAre(8, 8));
}

TEST(AutogradBackward, NonScalarWithoutGradientThrows) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("backward"));
  EXPECT_THAT(msg, HasSubstr("implicitly created only for scalar outputs"));
  EXPECT_THAT(msg, HasSubstr("[3]"));
  EXPECT_FALSE(x.grad().defined());
  // A gradient of the wrong shape is an error too.
  std::string shape_msg = error_of([&] { y.backward(ones({2})); });
  EXPECT_THAT(shape_msg, HasSubstr("[2]"));
  EXPECT_THAT(shape_msg, HasSubstr("[3]"));
  // And so is a backward from a tensor outside any graph.
  EXPECT_THAT(error_of([] { tensor({1.0}).sum().backward(); }), HasSubstr("does not require grad"));
}

TEST(AutogradBackward, LeavesAccumulateAcrossBackwardCalls) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  (x * x).sum().backward();
  Tensor first = x.grad();
  (x * 3.0).sum().backward();
  // 2x + 3
  EXPECT_THAT(values(x.grad()), ElementsAre(5, 7, 9));
  // The sum goes into the same tensor, as in PyTorch (x.grad is first).
  EXPECT_TRUE(first.is_same(x.grad()));
  // Resetting: set_grad(undefined), or zero_ on the gradient itself.
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
  (x * 2.0).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 2, 2));
  x.grad().zero_();
  (x * 2.0).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 2, 2));
}

// A leaf's .grad accumulates in place, as PyTorch's AccumulateGrad (`variable_grad += new_grad`
// outside create_graph): a handle taken earlier and a .grad that is a view of a larger buffer see
// the sum. Under create_graph the sum is a new tensor with a graph.
//   x = torch.tensor([1., 2., 3.], requires_grad=True); b = torch.zeros(2, 3); x.grad = b[1]
//   (x * x).sum().backward(); (x * 3.0).sum().backward()   # b[1] == [5, 7, 9], x.grad._base is b
TEST(AutogradBackward, LeafGradientsAccumulateInPlaceLikePyTorch) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor buffer = zeros({2, 3});
  x.set_grad(buffer.select(0, 1));
  (x * x).sum().backward();
  Tensor held = x.grad();
  (x * 3.0).sum().backward();
  EXPECT_TRUE(held.is_same(x.grad()));
  EXPECT_THAT(values(held), ElementsAre(5, 7, 9));
  EXPECT_THAT(values(buffer), ElementsAre(0, 0, 0, 5, 7, 9));

  //   (x * x).sum().backward(create_graph=True)   # x.grad: [7, 11, 15], a new tensor, AddBackward0
  (x * x).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  EXPECT_FALSE(held.is_same(x.grad()));
  EXPECT_THAT(values(held), ElementsAre(5, 7, 9));
  EXPECT_THAT(values(x.grad()), ElementsAre(7, 11, 15));
  ASSERT_NE(x.grad().grad_fn(), nullptr);
  EXPECT_EQ(x.grad().grad_fn()->name(), "AddBackward0");
  x.set_grad(Tensor());  // the graph of x.grad holds x's AccumulateGrad: drop it
}

// A tensor owns its .grad, so a chain of .grads leading back to the tensor would own itself and
// never be freed (PyTorch refuses only the tensor itself, "can't assign Variable as its own
// grad", and leaks the rest). set_grad refuses any such chain; the .grad is left as it was.
TEST(AutogradBackward, SetGradRefusesAChainOfGradsBackToTheTensor) {
  Tensor a = zeros({3}), b = ones({3}), c = full({3}, 2.0);
  expect_error([&] { a.set_grad(a); }, "set_grad: can't assign Variable as its own grad");
  b.set_grad(a);
  expect_error([&] { a.set_grad(b); },
               "set_grad: the assigned grad (shape [3]) leads back to this tensor through 1 .grad "
               "link(s): the tensors would own each other and never be freed");
  EXPECT_FALSE(a.grad().defined());
  c.set_grad(b);  // c -> b -> a
  expect_error([&] { a.set_grad(c); }, "leads back to this tensor through 2 .grad link(s)");
  EXPECT_FALSE(a.grad().defined());
  // A chain that does not come back is fine, and so is replacing a link that closed none.
  Tensor d = zeros({3});
  a.set_grad(d);
  EXPECT_TRUE(a.grad().is_same(d));
  b.set_grad(Tensor());
  a.set_grad(b);  // a -> b, b's .grad dropped
  EXPECT_TRUE(a.grad().is_same(b));
}

// A leaf frozen after the graph was built gets no .grad, as PyTorch's AccumulateGrad skips a
// variable that no longer requires grad (before its hooks, which do not run); other leaves get
// theirs.
//   x = torch.tensor([1., 2.], requires_grad=True); w = torch.tensor([3., 4.], requires_grad=True)
//   x.register_hook(hook); y = (x * w).sum(); x.requires_grad_(False); y.backward()
//   # x.grad None, w.grad [1, 2], the hook not called
TEST(AutogradBackward, ALeafFrozenAfterTheForwardGetsNoGradient) {
  Tensor x = tensor({1, 2}).requires_grad_(), w = tensor({3, 4}).requires_grad_();
  int hook_calls = 0;
  x.register_hook([&](const Tensor&) {
    ++hook_calls;
    return Tensor();
  });
  Tensor y = (x * w).sum();
  x.requires_grad_(false);
  y.backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(hook_calls, 0);
  EXPECT_THAT(values(w.grad()), ElementsAre(1, 2));
}

TEST(AutogradBackward, TheGradientDoesNotAliasTheUpstreamTensor) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor upstream = tensor({1, 1});
  x.backward(upstream);  // backward on a leaf itself
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 1));
  upstream.set({0}, 100);
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 1));
}

TEST(AutogradBackward, Float64LeavesGetFloat64Gradients) {
  Tensor x = tensor({0.5, 1.5}, DType::Float64).requires_grad_();
  Tensor y = (x * x * x).sum();
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::Float64);
  EXPECT_THAT(values(x.grad()), ElementsAre(0.75, 6.75));
}

TEST(AutogradBackward, SeveralOutputsAtOnce) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor a = x * 2.0;
  Tensor b = x * x;
  autograd::backward({a, b}, {ones({2}), tensor({1, 10})});
  // 2 + 2x * [1, 10] -> [4, 42]
  EXPECT_THAT(values(x.grad()), ElementsAre(4, 42));
}

TEST(AutogradBackward, TheSameOutputTwiceWithASharedNode) {
  // x = torch.tensor([0., 1.], dtype=torch.float64, requires_grad=True)
  // c = x.exp(); s = c * 2; y = c * 3
  // torch.autograd.backward([s, y, y], [torch.ones(2)] * 3); x.grad -> [8, 21.74625462767236]
  Tensor x = tensor({0, 1}, DType::Float64).requires_grad_();
  Tensor c = x.exp();
  Tensor s = c * 2.0;
  Tensor y = c * 3.0;
  Tensor g = ones({2}, DType::Float64);
  autograd::backward({s, y, y}, {g, g, g});
  EXPECT_THAT(values(x.grad()),
              Pointwise(DoubleNear(1e-12), std::vector<double>{8.0, 21.74625462767236}));
}

TEST(AutogradBackward, GradientsOf0dOps) {
  Tensor s = scalar_tensor(3.0, DType::Float64).requires_grad_();
  Tensor y = (s.unsqueeze(0).expand({4}) * s).sum();  // 4 s^2
  y.backward();
  expect_tensor(s.grad(), {}, {24});
}

// ---- retain_graph ----

TEST(AutogradRetainGraph, SecondBackwardThroughAFreedGraphThrows) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor loss = x.exp().sum();
  loss.backward();
  std::string msg = error_of([&] { loss.backward(); });
  EXPECT_THAT(msg, HasSubstr("second time"));
  EXPECT_THAT(msg, HasSubstr("retain_graph"));
  EXPECT_THAT(msg, HasSubstr("ExpBackward0"));
}

TEST(AutogradRetainGraph, RetainGraphAllowsASecondBackwardThatAccumulates) {
  // x = torch.tensor([0., 1.], requires_grad=True); l = x.exp().sum()
  // l.backward(retain_graph=True); l.backward(); x.grad -> 2 * exp(x)
  Tensor x = tensor({0, 1}).requires_grad_();
  Tensor loss = x.exp().sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_THAT(values(x.grad()),
              Pointwise(DoubleNear(1e-6), std::vector<double>{1.0, std::exp(1.0)}));
  loss.backward();
  EXPECT_THAT(values(x.grad()),
              Pointwise(DoubleNear(1e-6), std::vector<double>{2.0, 2 * std::exp(1.0)}));
  // Now it is freed.
  EXPECT_THAT(error_of([&] { loss.backward(); }), HasSubstr("second time"));
}

TEST(AutogradRetainGraph, GraphsWithoutSavedTensorsCanBeRerun) {
  // As in PyTorch: only nodes that saved tensors refuse a second pass.
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = (x + 1.0).sum();
  y.backward();
  y.backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 2));
}

TEST(AutogradRetainGraph, RetainedGraphFreedAfterTwoBackwards) {
  Tensor x = scalar_tensor(2.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y * 1.0 + 0.0;
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  expect_tensor(x.grad(), {}, {2});
}

// ---- retain_grad ----

TEST(AutogradRetainGrad, KeepsTheGradientOfANonLeaf) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor other = x * 5.0;  // no retain_grad: stays undefined
  EXPECT_FALSE(y.retains_grad());
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  (y * y + other).sum().backward();
  ASSERT_TRUE(y.grad().defined());
  EXPECT_THAT(values(y.grad()), ElementsAre(4, 8));  // 2y
  EXPECT_FALSE(other.grad().defined());
  EXPECT_THAT(values(x.grad()), ElementsAre(13, 21));  // 2y * 2 + 5
  // retain_grad on a leaf is a no-op (leaves keep their grad anyway).
  x.retain_grad();
  EXPECT_FALSE(x.retains_grad());
  // On a tensor that does not require grad: an Error, as in PyTorch.
  EXPECT_THAT(error_of([] { tensor({1.0}).retain_grad(); }), HasSubstr("retain_grad"));
}

TEST(AutogradRetainGrad, FollowsTheTensorThroughAnInPlaceOp) {
  // a = torch.tensor([1., 2., 3.], requires_grad=True); y = a * 2; y.retain_grad()
  // y.masked_fill_(torch.tensor([True, False, False]), 0.); y.sum().backward()
  // y.grad -> [1, 1, 1]; a.grad -> [0, 2, 2]
  Tensor a = tensor({1, 2, 3}).requires_grad_();
  Tensor y = a * 2.0;
  y.retain_grad();
  y.masked_fill_(tensor({1, 0, 0}, DType::Bool), 0);
  y.sum().backward();
  EXPECT_THAT(values(y.grad()), ElementsAre(1, 1, 1));
  EXPECT_THAT(values(a.grad()), ElementsAre(0, 2, 2));
}

// ---- hooks ----

TEST(AutogradHooks, InspectingHooksOnALeafAndANonLeaf) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  int leaf_calls = 0, nonleaf_calls = 0;
  std::vector<double> seen_leaf, seen_nonleaf;
  x.register_hook([&](const Tensor& g) {
    ++leaf_calls;
    seen_leaf = g.to_vector<double>();
    return Tensor();  // keep the gradient
  });
  Tensor y = x * x;  // x used twice: the hook sees the summed gradient, once
  y.register_hook([&](const Tensor& g) {
    ++nonleaf_calls;
    seen_nonleaf = g.to_vector<double>();
    return Tensor();
  });
  (y * 3.0).sum().backward();
  EXPECT_EQ(leaf_calls, 1);
  EXPECT_EQ(nonleaf_calls, 1);
  EXPECT_THAT(seen_nonleaf, ElementsAre(3, 3, 3));
  EXPECT_THAT(seen_leaf, ElementsAre(6, 12, 18));
  EXPECT_THAT(values(x.grad()), ElementsAre(6, 12, 18));
}

TEST(AutogradHooks, ReplacingHooksOnALeafAndANonLeaf) {
  // Leaf: the replaced gradient is what accumulates.
  Tensor x = tensor({1, 2}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 2.0; });
  (x * 5.0).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(10, 10));

  // Non-leaf: the replaced gradient is what flows further back.
  // x = torch.tensor([1., 2.], requires_grad=True); y = x * x
  // y.register_hook(lambda g: g * 2); y.sum().backward(); x.grad -> [4, 8]
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor y = a * a;
  y.register_hook([](const Tensor& g) { return g * 2.0; });
  y.sum().backward();
  EXPECT_THAT(values(a.grad()), ElementsAre(4, 8));

  // Hooks chain in registration order.
  Tensor b = tensor({1.0}).requires_grad_();
  b.register_hook([](const Tensor& g) { return g + 1.0; });
  b.register_hook([](const Tensor& g) { return g * 10.0; });
  (b * 1.0).sum().backward();
  EXPECT_THAT(values(b.grad()), ElementsAre(20));  // (1 + 1) * 10
}

TEST(AutogradHooks, OnATensorWithoutGradIsAnError) {
  EXPECT_THAT(error_of([] { tensor({1.0}).register_hook([](const Tensor& g) { return g; }); }),
              HasSubstr("register_hook"));
}

// ---- grad mode ----

TEST(AutogradNoGrad, NothingIsRecordedAndNestedGuardsRestore) {
  Tensor x = tensor({1, 2}).requires_grad_();
  EXPECT_TRUE(GradMode::is_enabled());
  {
    NoGradGuard outer;
    EXPECT_FALSE(GradMode::is_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_THAT(values(y), ElementsAre(2, 4));
    {
      NoGradGuard inner;
      EXPECT_FALSE(GradMode::is_enabled());
    }
    EXPECT_FALSE(GradMode::is_enabled());  // the inner guard restores "off", not "on"
    // In-place updates of a leaf are allowed here (what an optimizer step does).
    x.add_(tensor({10, 10}));
    x.mul_(0.5);
    EXPECT_TRUE(x.is_leaf());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_THAT(values(x), ElementsAre(5.5, 6));
  EXPECT_NE((x * 2.0).grad_fn(), nullptr);
  // GradMode::set_enabled directly, restored by hand.
  GradMode::set_enabled(false);
  EXPECT_EQ((x * 2.0).grad_fn(), nullptr);
  GradMode::set_enabled(true);
}

TEST(AutogradDetach, CutsTheGraph) {
  // x = torch.tensor([1., 2.], requires_grad=True); y = x * x
  // (y.detach() * x).sum().backward(); x.grad -> [1, 4] (y treated as a constant)
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = x * x;
  (y.detach() * x).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 4));
}

// ---- autograd::grad ----

TEST(AutogradGradFunction, ReturnsGradientsWithoutTouchingDotGrad) {
  // x = torch.tensor([1., 2.], requires_grad=True); w = torch.tensor([3., 4.], requires_grad=True)
  // torch.autograd.grad((x * w * x).sum(), [x, w]) -> ([6, 16], [1, 4])
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor w = tensor({3, 4}).requires_grad_();
  Tensor out = (x * w * x).sum();
  std::vector<Tensor> grads = autograd::grad({out}, {x, w});
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_THAT(values(grads[0]), ElementsAre(6, 16));
  EXPECT_THAT(values(grads[1]), ElementsAre(1, 4));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

TEST(AutogradGradFunction, NonLeafInputsAndBroadcastInputs) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor h = x * 3.0;
  Tensor out = (h * h).sum();
  std::vector<Tensor> g = autograd::grad({out}, {h}, {}, /*retain_graph=*/true);
  EXPECT_THAT(values(g[0]), ElementsAre(6, 12));  // 2h
  std::vector<Tensor> gx = autograd::grad({out}, {x});
  EXPECT_THAT(values(gx[0]), ElementsAre(18, 36));  // 18x
  EXPECT_FALSE(x.grad().defined());
  // b [3] broadcast against [2, 3]
  Tensor b = tensor({1, 2, 3}).requires_grad_();
  Tensor y = ones({2, 3}) * b;
  std::vector<Tensor> gb = autograd::grad({y}, {b}, {ones({2, 3})});
  EXPECT_EQ(gb[0].shape(), (Shape{3}));
  EXPECT_THAT(values(gb[0]), ElementsAre(2, 2, 2));
}

TEST(AutogradGradFunction, InputHooksDoNotRunButRetainGradFills) {
  // As torch 1.13: x.register_hook(lambda g: g * 2); torch.autograd.grad((x * 3).sum(), [x])
  // -> (tensor([3., 3.]),); with h = x * 1; h.retain_grad(): torch.autograd.grad(..., [x])
  // fills h.grad with [3, 3].
  Tensor x = tensor({1, 2}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 2.0; });
  EXPECT_THAT(values(autograd::grad({(x * 3.0).sum()}, {x})[0]), ElementsAre(3, 3));
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor h = a * 1.0;
  h.retain_grad();
  EXPECT_THAT(values(autograd::grad({(h * 3.0).sum()}, {a})[0]), ElementsAre(3, 3));
  EXPECT_THAT(values(h.grad()), ElementsAre(3, 3));
  EXPECT_FALSE(a.grad().defined());
}

// autograd::grad runs only the nodes that lead to one of its inputs, as PyTorch 1.13's engine
// (exec_info): with h = x * 2 (h.retain_grad(), a hook on h), k = w * 3 (a hook on k),
// y = (h * k).sum():
//   torch.autograd.grad(y, x) -> [6, 6]; h's hook runs with [3, 3], h.grad [3, 3]; k's does not
//   torch.autograd.grad(y, w) -> [6, 6]; k's hook runs with [2, 2]; h's does not
// and with a = x2 * 5, h2 = a * 2 (hooks on both, h2's returning g * 100), y2 = (h2 * 3).sum():
//   torch.autograd.grad(y2, h2) -> [3, 3]; neither hook runs (nothing below h2 is needed).
TEST(AutogradGradFunction, OnlyTheNodesLeadingToAnInputRun) {
  std::vector<std::string> calls;
  Tensor x = ones({2}).requires_grad_(), w = ones({2}).requires_grad_();
  Tensor h = x * 2.0;
  h.retain_grad();
  h.register_hook([&](const Tensor&) {
    calls.push_back("h");
    return Tensor();
  });
  Tensor k = w * 3.0;
  k.register_hook([&](const Tensor&) {
    calls.push_back("k");
    return Tensor();
  });
  Tensor y = (h * k).sum();
  EXPECT_THAT(values(autograd::grad({y}, {x}, {}, /*retain_graph=*/true)[0]), ElementsAre(6, 6));
  EXPECT_EQ(calls, std::vector<std::string>{"h"});
  EXPECT_THAT(values(h.grad()), ElementsAre(3, 3));
  calls.clear();
  EXPECT_THAT(values(autograd::grad({y}, {w}, {}, /*retain_graph=*/true)[0]), ElementsAre(6, 6));
  EXPECT_EQ(calls, std::vector<std::string>{"k"});
  calls.clear();
  Tensor x2 = ones({2}).requires_grad_();
  Tensor a = x2 * 5.0;
  a.register_hook([&](const Tensor&) {
    calls.push_back("a");
    return Tensor();
  });
  Tensor h2 = a * 2.0;
  h2.register_hook([&](const Tensor& g) {
    calls.push_back("h2");
    return g * 100.0;
  });
  EXPECT_THAT(values(autograd::grad({(h2 * 3.0).sum()}, {h2})[0]), ElementsAre(3, 3));
  EXPECT_TRUE(calls.empty());
  // The nodes that did not run keep their saved tensors: a backward through them still works
  // ((h2 * 3).sum().backward() -> x2.grad [3000, 3000], h2's hook multiplying by 100).
  (h2 * 3.0).sum().backward();
  EXPECT_THAT(values(x2.grad()), ElementsAre(3000, 3000));
}

TEST(AutogradGradFunction, AllowUnused) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor unused = tensor({5.0}).requires_grad_();
  Tensor out = (x * 2.0).sum();
  std::string msg = error_of([&] {
    (void)autograd::grad({out}, {x, unused}, {}, /*retain_graph=*/true);
  });
  EXPECT_THAT(msg, HasSubstr("allow_unused"));
  std::vector<Tensor> g =
      autograd::grad({out}, {x, unused}, {}, false, false, /*allow_unused=*/true);
  EXPECT_THAT(values(g[0]), ElementsAre(2, 2));
  EXPECT_FALSE(g[1].defined());
  EXPECT_THAT(error_of([&] { (void)autograd::grad({out}, {tensor({1.0})}); }),
              HasSubstr("does not require grad"));
}

// torch.autograd.grad(y, [x, x]) returns the gradient twice.
TEST(AutogradGradFunction, GradWithTheSameInputTwice) {
  Tensor x = tensor({1.0, 2.0, 3.0}, DType::Float64).requires_grad_();
  Tensor w = tensor({4.0, 5.0, 6.0}, DType::Float64).requires_grad_();
  Tensor y = (x * x * w).sum();
  auto g = autograd::grad({y}, {x, w, x}, {}, /*retain_graph=*/true);
  ASSERT_EQ(g.size(), 3u);
  expect_tensor(g[0], {3}, {8, 20, 36});
  expect_tensor(g[1], {3}, {1, 4, 9});
  expect_tensor(g[2], {3}, {8, 20, 36});
  // A non-leaf input twice as well.
  Tensor h = x * 2.0;
  Tensor z = (h * h).sum();
  auto gh = autograd::grad({z}, {h, h});
  expect_tensor(gh[0], {3}, {4, 8, 12});
  expect_tensor(gh[1], {3}, {4, 8, 12});
  EXPECT_FALSE(x.grad().defined());
}

// ---- graph shapes ----

TEST(AutogradGraph, ATensorUsedTwiceGetsTheSummedGradient) {
  Tensor x = tensor({-1, 3}).requires_grad_();
  (x * x).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(-2, 6));
  Tensor y = tensor({2.0}).requires_grad_();
  (y + y + y).sum().backward();
  EXPECT_THAT(values(y.grad()), ElementsAre(3));
}

TEST(AutogradGraph, Diamonds) {
  // x = torch.tensor([1., 2.], requires_grad=True); a = x * 2; b = x * 3
  // (a * b).sum().backward(); x.grad -> [12, 24]
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor a = x * 2.0;
  Tensor b = x * 3.0;
  (a * b).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(12, 24));
  // x = torch.tensor([0.5, -1.], dtype=torch.float64, requires_grad=True); y = x.exp()
  // (y * y + y).sum().backward(); x.grad -> [7.085284927618219, 0.6385500076446677]
  Tensor xd = tensor({0.5, -1.0}, DType::Float64).requires_grad_();
  Tensor y = xd.exp();
  (y * y + y).sum().backward();
  EXPECT_THAT(values(xd.grad()), Pointwise(DoubleNear(1e-12), std::vector<double>{
                                                                  7.085284927618219,
                                                                  0.6385500076446677,
                                                              }));
}

TEST(AutogradGraph, BroadcastingIsUndone) {
  Tensor b = tensor({1, 2, 3}).requires_grad_();               // [3]
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();  // [2, 3]
  Tensor c = tensor({{10}, {20}}).requires_grad_();            // [2, 1]
  Tensor s = tensor(2.0).requires_grad_();                     // 0-d
  Tensor out = (m + b) * c * s;
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  out.backward(ones({2, 3}));
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
  EXPECT_THAT(values(b.grad()), ElementsAre(60, 60, 60));  // sum over rows of c * s
  EXPECT_EQ(m.grad().shape(), (Shape{2, 3}));
  EXPECT_THAT(values(m.grad()), ElementsAre(20, 20, 20, 40, 40, 40));
  EXPECT_EQ(c.grad().shape(), (Shape{2, 1}));
  EXPECT_THAT(values(c.grad()), ElementsAre(24, 42));  // 2 * (2+4+6), 2 * (5+7+9)
  EXPECT_EQ(s.grad().shape(), Shape{});
  EXPECT_EQ(s.grad().item(), 10 * 12 + 20 * 21);  // sum of (m + b) * c
}

TEST(AutogradGraph, IntegerInputsGetNoEdge) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor i = tensor({3, 4}, DType::Int64);
  Tensor y = x * i;
  EXPECT_EQ(y.dtype(), DType::Float32);
  y.sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(3, 4));
}

// ---- in-place ops ----

TEST(AutogradInPlace, MaskedFillOnANonLeafRebasesItsHistoryLikeTheBook) {
  // a = torch.tensor([[0.43, 0.15], [0.55, 0.87], [0.57, 0.85]], requires_grad=True)
  // b = torch.tensor([[0.22, 0.58, 0.33], [0.77, 0.25, 0.10]], requires_grad=True)
  // scores = a.mm(b); scores.masked_fill_(torch.triu(torch.ones(3, 3), diagonal=1).bool(),
  //                                      -torch.inf)
  // scores.exp().sum().backward()
  Tensor a = tensor({{0.43, 0.15}, {0.55, 0.87}, {0.57, 0.85}}).requires_grad_();
  Tensor b = tensor({{0.22, 0.58, 0.33}, {0.77, 0.25, 0.10}}).requires_grad_();
  Tensor scores = mm(a, b);
  const void* data = scores.storage()->data();
  ASSERT_EQ(scores.grad_fn()->name(), "MmBackward0");
  Tensor mask = triu(ones({3, 3}), 1).to_bool();
  Tensor& same = scores.masked_fill_(mask, -kInf);
  EXPECT_TRUE(same.is_same(scores));  // returns *this
  EXPECT_EQ(scores.storage()->data(), data);
  // scores.grad_fn -> <MaskedFillBackward0>, next_functions ((<MmBackward0>, 0),)
  ASSERT_NE(scores.grad_fn(), nullptr);
  EXPECT_EQ(scores.grad_fn()->name(), "MaskedFillBackward0");
  ASSERT_NE(scores.grad_fn()->next_functions[0], nullptr);
  EXPECT_EQ(scores.grad_fn()->next_functions[0]->name(), "MmBackward0");
  EXPECT_EQ(repr(scores),
            "tensor([[0.2101,   -inf,   -inf],\n"
            "        [0.7909, 0.5365,   -inf],\n"
            "        [0.7799, 0.5431, 0.2731]], grad_fn=<MaskedFillBackward0>)");
  scores.exp().sum().backward();
  // a.grad.tolist()
  EXPECT_THAT(values(a.grad()), Pointwise(DoubleNear(1e-5), std::vector<double>{
                                                                0.27143630385398865,
                                                                0.9500270485877991,
                                                                1.4769902229309082,
                                                                2.125645637512207,
                                                                1.9118804931640625,
                                                                2.241302490234375,
                                                            }));
  // b.grad.tolist()
  EXPECT_THAT(values(b.grad()), Pointwise(DoubleNear(1e-5), std::vector<double>{
                                                                2.9868087768554688,
                                                                1.9216669797897339,
                                                                0.7489979863166809,
                                                                3.957817316055298,
                                                                2.9508442878723145,
                                                                1.116926908493042,
                                                            }));
}

TEST(AutogradInPlace, MaskedPositionsGetZeroGradient) {
  // x = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True); y = x * 3
  // y.masked_fill_(torch.tensor([[True, False], [False, True]]), 0.)
  // (y * torch.tensor([[1., 2.], [3., 4.]])).sum().backward(); x.grad -> [[0, 6], [9, 0]]
  Tensor x = tensor({{1, 2}, {3, 4}}).requires_grad_();
  Tensor y = x * 3.0;
  y.masked_fill_(tensor({{1, 0}, {0, 1}}, DType::Bool), 0);
  EXPECT_THAT(values(y), ElementsAre(0, 6, 9, 0));
  (y * tensor({{1, 2}, {3, 4}})).sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(0, 6, 9, 0));
}

TEST(AutogradInPlace, AddAndMulOnANonLeaf) {
  // x = torch.tensor([1., 2.], requires_grad=True); w = torch.tensor([3., 4.], requires_grad=True)
  // y = x * 1; y.add_(w * w); y.mul_(2); y.sum().backward(); x.grad -> [2, 2]; w.grad -> [12, 16]
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor w = tensor({3, 4}).requires_grad_();
  Tensor y = x * 1.0;
  y.add_(w * w);
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward0");
  y.mul_(2.0);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  EXPECT_THAT(values(y), ElementsAre(20, 36));
  y.sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 2));
  EXPECT_THAT(values(w.grad()), ElementsAre(12, 16));
  // In place onto a plain tensor from one that requires grad: the plain tensor joins the graph.
  Tensor acc = zeros({2});
  acc += x * 3.0;
  EXPECT_TRUE(acc.requires_grad());
  EXPECT_FALSE(acc.is_leaf());
  x.set_grad(Tensor());
  acc.sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(3, 3));
}

TEST(AutogradInPlace, OnALeafThatRequiresGradThrows) {
  Tensor x = tensor({1, 2}).requires_grad_();
  for (auto op : std::vector<std::pair<const char*, std::function<void()>>>{
           {"masked_fill_",
            [&] {
              x.masked_fill_(tensor({1, 0}, DType::Bool), 0);
            }},
           {"add_", [&] { x.add_(ones({2})); }},
           {"mul_", [&] { x.mul_(2.0); }},
           {"fill_", [&] { x.fill_(1.0); }},
           {"copy_", [&] { x.copy_(ones({2})); }},
       }) {
    std::string msg = error_of(op.second);
    EXPECT_THAT(msg, HasSubstr(op.first));
    EXPECT_THAT(msg, HasSubstr("leaf Variable that requires grad"));
  }
  EXPECT_THAT(values(x), ElementsAre(1, 2));
}

TEST(AutogradInPlace, ModifyingASavedTensorIsCaughtAtBackward) {
  // x = torch.tensor([1., 2., 3.], requires_grad=True); e = x.exp()
  // e.masked_fill_(torch.tensor([True, False, False]), 0.); e.sum().backward()
  // -> RuntimeError: one of the variables needed for gradient computation has been modified by
  //    an inplace operation: [torch.FloatTensor [3]], which is output 0 of ExpBackward0, is at
  //    version 1; expected version 0 instead.
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor e = x.exp();  // ExpBackward0 saves its output
  e.masked_fill_(tensor({1, 0, 0}, DType::Bool), 0);
  std::string msg = error_of([&] { e.sum().backward(); });
  EXPECT_THAT(msg, HasSubstr("modified by an inplace operation"));
  EXPECT_THAT(msg, HasSubstr("ExpBackward0"));
  EXPECT_THAT(msg, HasSubstr("[3]"));

  // A saved input: z = y * y saves y; then y changes.
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor y = a * 1.0;
  Tensor z = y * y;
  y.add_(ones({2}));
  std::string mul_msg = error_of([&] { z.sum().backward(); });
  EXPECT_THAT(mul_msg, HasSubstr("modified by an inplace operation"));
  EXPECT_THAT(mul_msg, HasSubstr("MulBackward0"));

  // Through a detached alias or a raw write: same storage, same version counter.
  Tensor b = tensor({1, 2}).requires_grad_();
  Tensor eb = b.exp();
  Tensor loss = eb.sum();
  eb.detach().set({0}, 0);
  EXPECT_THAT(error_of([&] { loss.backward(); }), HasSubstr("ExpBackward0"));
}

TEST(AutogradInPlace, TheErrorNamesTheNodeThatSavedTheTensor) {
  // minimum's node is written as maximum's (struct Minimum : MaxMin) with a name of its own; the
  // error names the node whose saved tensor changed by that name, not by MaxMin's.
  Tensor a = tensor({1, 5}).requires_grad_() * 1.0;
  Tensor m = minimum(a, tensor({2, 3}));
  a.add_(ones({2}));
  std::string msg = error_of([&] { m.sum().backward(); });
  EXPECT_THAT(msg, HasSubstr("modified by an inplace operation"));
  EXPECT_THAT(msg, HasSubstr("MinimumBackward0"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr("Maximum")));
}

TEST(AutogradInPlace, ModifyingATensorNobodySavedIsFine) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = x * 2.0;  // Mul saves x and the scalar, not y
  y.add_(ones({2}));
  y.sum().backward();
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 2));
}

// ---- deep graphs, ownership ----

TEST(AutogradDeep, A100000NodeChainBackpropagatesAndIsFreed) {
  // v = torch.tensor([1.], dtype=torch.float64, requires_grad=True); y = v
  // for i in range(100000): y = y * 1.0001
  // y.backward(); v.grad.item() -> 22015.45604852786
  constexpr int kDepth = 100000;
  Tensor v = tensor({1.0}, DType::Float64).requires_grad_();
  std::weak_ptr<autograd::Node> first_node;
  {
    Tensor y = v;
    for (int i = 0; i < kDepth; ++i) {
      y = y * 1.0001;
      if (i == 0) first_node = y.grad_fn();
    }
    EXPECT_NEAR(y.item(), 22015.45604852786, 1e-6);
    y.backward();
    EXPECT_FALSE(first_node.expired());  // the graph lives as long as y
  }  // y's graph is torn down here: 100,000 nodes, without recursion overflowing the stack
  EXPECT_TRUE(first_node.expired());
  EXPECT_NEAR(v.grad().item(), 22015.45604852786, 1e-6);
}

TEST(AutogradDeep, A100000NodeChainThatNeverRanBackwardIsFreed) {
  Tensor x = tensor({0.0}).requires_grad_();
  std::weak_ptr<autograd::Node> first_node;
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) {
      y = y + 1.0;
      if (i == 0) first_node = y.grad_fn();
    }
    EXPECT_EQ(y.item(), 100000);
  }
  EXPECT_TRUE(first_node.expired());
}

TEST(AutogradDeep, LongChainTearsDownAndBackpropagates) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kNodes; ++i) y = y * 1.0;
  y.backward();
  expect_tensor(x.grad(), {}, {1});
  y = Tensor();  // the graph is freed here
}

TEST(AutogradDeep, ChainDroppedWithoutBackward) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y + 1.0;
  EXPECT_EQ(y.item(), 1.0 + kShapeNodes);
  y = Tensor();
}

// y = y + y: every node is used twice by the next one.
TEST(AutogradDeep, EachNodeUsedTwice) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kNodes; ++i) y = y + y;
  EXPECT_TRUE(std::isinf(y.item()));
  y = Tensor();
}

// y = 0.5 y + 0.5 y: a DAG with shared nodes whose gradient stays exactly 1.
TEST(AutogradDeep, SharedNodesBackward) {
  Tensor x = scalar_tensor(3.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y * 0.5 + y * 0.5;
  EXPECT_EQ(y.item(), 3.0);
  y.backward();
  expect_tensor(x.grad(), {}, {1});
}

// The residual form: y = y + y * 0.5, and a residual stack of small matrices.
TEST(AutogradDeep, ResidualStacks) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y + y * 0.5;
  y = Tensor();

  Tensor w = full({2, 2}, 0.0, DType::Float64).requires_grad_();
  Tensor h = ones({1, 2}, DType::Float64).requires_grad_();
  Tensor out = h;
  for (int i = 0; i < kShapeNodes / 10; ++i) out = out + matmul(out, w);  // w = 0: out stays h
  out.sum().backward();
  expect_tensor(h.grad(), {1, 2}, {1, 1});
  // d/dw of sum(out): each of the n layers adds out^T 1 = [[1, 1], [1, 1]].
  expect_tensor(w.grad(), {2, 2}, std::vector<double>(4, kShapeNodes / 10));
}

TEST(AutogradOwnership, NothingOutlivesItsHandles) {
  std::weak_ptr<autograd::Node> mul_node, acc_node, exp_node;
  std::weak_ptr<TensorImpl> leaf, intermediate;
  {
    Tensor x = tensor({1, 2}).requires_grad_();
    leaf = x.impl_ptr();
    Tensor e = x.exp();  // saves its own output
    exp_node = e.grad_fn();
    Tensor y = e * x;
    intermediate = y.impl_ptr();
    mul_node = y.grad_fn();
    acc_node = mul_node.lock()->next_functions[1];
    y.retain_grad();
    y.register_hook([](const Tensor& g) { return g; });
    y.sum().backward(Tensor(), /*retain_graph=*/true);
    EXPECT_FALSE(mul_node.expired());
    EXPECT_FALSE(acc_node.expired());
  }
  EXPECT_TRUE(mul_node.expired());
  EXPECT_TRUE(exp_node.expired());
  EXPECT_TRUE(acc_node.expired());
  EXPECT_TRUE(leaf.expired());
  EXPECT_TRUE(intermediate.expired());
}

TEST(AutogradOwnership, LeafGradientOutlivesTheGraph) {
  Tensor x = tensor({1, 2}).requires_grad_();
  std::weak_ptr<autograd::Node> node;
  {
    Tensor y = x * x;
    node = y.grad_fn();
    y.sum().backward();
  }
  EXPECT_TRUE(node.expired());
  EXPECT_THAT(values(x.grad()), ElementsAre(2, 4));
  // The AccumulateGrad node is shared while a graph is alive and rebuilt afterwards.
  Tensor a = x * 1.0;
  Tensor b = x * 2.0;
  EXPECT_EQ(a.grad_fn()->next_functions[0], b.grad_fn()->next_functions[0]);
}

TEST(AutogradOwnership, InPlaceRebaseKeepsNoCycle) {
  std::weak_ptr<autograd::Node> old_node, new_node;
  {
    Tensor x = tensor({1, 2}).requires_grad_();
    Tensor y = x * 2.0;
    old_node = y.grad_fn();
    y.masked_fill_(tensor({1, 0}, DType::Bool), 0);
    new_node = y.grad_fn();
    y.sum().backward();
  }
  EXPECT_TRUE(old_node.expired());
  EXPECT_TRUE(new_node.expired());
}

// A gradient whose history reaches its own leaf: x.grad.copy_(triu(x)) makes x -> x.grad ->
// CopyBackwards -> TriuBackward0 -> AccumulateGrad(x). PyTorch 1.13 holds the leaf strongly in
// AccumulateGrad and leaks x here; Ember's AccumulateGrad holds it weakly, so x is freed.
TEST(AutogradOwnership, AGradientWhoseHistoryReachesItsLeafDoesNotLeak) {
  std::weak_ptr<TensorImpl> watch;
  {
    Tensor x = full({2, 2}, 1.0).requires_grad_();
    watch = x.impl_ptr();
    x.sum().backward();
    x.grad().copy_(triu(x));
    EXPECT_EQ(x.grad().grad_fn()->name(), "CopyBackwards");
    expect_tensor(x.grad().detach(), {2, 2}, {1, 1, 0, 1});
  }
  EXPECT_TRUE(watch.expired());
}

// A graph may outlive its leaves: backward then drops their gradients (no one can read them)
// and still reaches the leaves that are alive.
TEST(AutogradOwnership, BackwardAfterALeafIsGone) {
  Tensor kept = tensor({2.0}, DType::Float64).requires_grad_();
  Tensor loss;
  {
    Tensor gone = tensor({3.0}, DType::Float64).requires_grad_();
    loss = (kept * gone).sum();
  }
  loss.backward();
  expect_tensor(kept.grad(), {1}, {3});
}

// ---- graph export and tracing ----

TEST(AutogradDot, ContainsNodeNamesAndShapes) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor w = tensor({1, 2, 3}).requires_grad_();
  Tensor y = (x * w).exp().sum();
  std::string dot = autograd::to_dot(y);
  EXPECT_THAT(dot, HasSubstr("digraph"));
  EXPECT_THAT(dot, HasSubstr("SumBackward0"));
  EXPECT_THAT(dot, HasSubstr("ExpBackward0"));
  EXPECT_THAT(dot, HasSubstr("MulBackward0"));
  EXPECT_THAT(dot, HasSubstr("AccumulateGrad"));
  EXPECT_THAT(dot, HasSubstr("[2, 3]"));
  EXPECT_THAT(dot, HasSubstr("leaf [3]"));
  EXPECT_THAT(dot, HasSubstr("output []"));
  // A tensor outside any graph: just the output box.
  std::string lone = autograd::to_dot(tensor({1.0}));
  EXPECT_THAT(lone, HasSubstr("output [1]"));
  EXPECT_THAT(lone, ::testing::Not(HasSubstr("n0")));
}

// EMBER_LOG in any case, with spdlog's names and their long forms; anything else is no level
// (spdlog's own from_str reads it as off, which would silence every warning).
TEST(AutogradTrace, EmberLogLevelsAreParsedInAnyCase) {
  EXPECT_EQ(logging::parse_level("debug"), spdlog::level::debug);
  EXPECT_EQ(logging::parse_level("DEBUG"), spdlog::level::debug);
  EXPECT_EQ(logging::parse_level("Trace"), spdlog::level::trace);
  EXPECT_EQ(logging::parse_level("warning"), spdlog::level::warn);
  EXPECT_EQ(logging::parse_level("warn"), spdlog::level::warn);
  EXPECT_EQ(logging::parse_level("error"), spdlog::level::err);
  EXPECT_EQ(logging::parse_level("err"), spdlog::level::err);
  EXPECT_EQ(logging::parse_level("critical"), spdlog::level::critical);
  EXPECT_EQ(logging::parse_level("off"), spdlog::level::off);
  EXPECT_EQ(logging::parse_level("verbose"), std::nullopt);
  EXPECT_EQ(logging::parse_level(""), std::nullopt);
}

// The first backward reads EMBER_LOG: set, it gives spdlog's level; unset or not a level, the
// level the program chose stays. In a child process each (a death test re-runs the program), as
// EMBER_LOG is read once per process.
TEST(AutogradTrace, EmberLogLeavesTheProgramsLevelUnlessItIsSet) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto level_after_backward = [](const char* ember_log, spdlog::level::level_enum program) {
    if (ember_log == nullptr) {
      unsetenv("EMBER_LOG");
    } else {
      setenv("EMBER_LOG", ember_log, 1);
    }
    spdlog::set_level(program);
    Tensor x = tensor({1.0, 2.0}).requires_grad_();
    (x * x).sum().backward();
    std::_Exit(static_cast<int>(spdlog::get_level()));
  };
  EXPECT_EXIT(level_after_backward(nullptr, spdlog::level::info),
              ::testing::ExitedWithCode(spdlog::level::info), "");
  EXPECT_EXIT(level_after_backward(nullptr, spdlog::level::err),
              ::testing::ExitedWithCode(spdlog::level::err), "");
  EXPECT_EXIT(level_after_backward("TRACE", spdlog::level::info),
              ::testing::ExitedWithCode(spdlog::level::trace), "");
  EXPECT_EXIT(level_after_backward("loud", spdlog::level::info),
              ::testing::ExitedWithCode(spdlog::level::info), "");
}

// Ember's messages go to stderr, never into a program's output on stdout (a pipeline reading
// train_gpt --generate's text): spdlog's default logger, untouched by the program, writes to
// stderr at spdlog's default level. In a child process, whose stdout is a file that must stay
// empty.
TEST(AutogradTrace, LogsGoToStderrNotStdout) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto warn_and_exit = [] {
    std::fflush(stdout);  // what GoogleTest printed stays out of the file
    std::FILE* out = std::tmpfile();
    if (out == nullptr || dup2(fileno(out), STDOUT_FILENO) < 0) std::_Exit(2);
    spdlog::warn("ember-log-probe");
    spdlog::default_logger()->flush();
    std::fflush(stdout);
    struct stat st {};
    if (fstat(STDOUT_FILENO, &st) != 0) std::_Exit(3);
    std::_Exit(st.st_size == 0 && spdlog::get_level() == spdlog::level::info ? 0 : 1);
  };
  EXPECT_EXIT(warn_and_exit(), ::testing::ExitedWithCode(0), "ember-log-probe");
}

// log_to_stderr replaces spdlog's own stdout logger, keeping its level; a logger the program
// installed stays.
TEST(AutogradTrace, LogToStderrKeepsTheProgramsLogger) {
  const auto previous = spdlog::default_logger();
  auto stdout_logger =
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stdout_color_sink_mt>());
  stdout_logger->set_level(spdlog::level::err);
  spdlog::set_default_logger(stdout_logger);
  EXPECT_TRUE(logging::log_to_stderr());
  const auto replaced = spdlog::default_logger();
  ASSERT_EQ(replaced->sinks().size(), 1u);
  EXPECT_NE(std::dynamic_pointer_cast<spdlog::sinks::stderr_color_sink_mt>(replaced->sinks()[0]),
            nullptr);
  EXPECT_EQ(replaced->level(), spdlog::level::err);
  EXPECT_FALSE(logging::log_to_stderr());  // already on stderr

  std::ostringstream out;
  auto own =
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::set_default_logger(own);
  EXPECT_FALSE(logging::log_to_stderr());
  EXPECT_EQ(spdlog::default_logger(), own);
  spdlog::set_default_logger(previous);
}

TEST(AutogradTrace, DebugLevelLogsEveryBackwardStep) {
  logging::init_from_env();  // reads EMBER_LOG once; our level below then sticks
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("ember_autograd_test", sink);
  logger->set_level(spdlog::level::debug);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);

  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  (x.exp() * 2.0).sum().backward();
  // A direct call, as the engine makes it.
  logging::backward_step("CustomBackward0", ones({4}), {ones({4}), Tensor()});

  spdlog::set_default_logger(previous);
  std::string log = out.str();
  EXPECT_THAT(log, HasSubstr("SumBackward0"));
  EXPECT_THAT(log, HasSubstr("MulBackward0"));
  EXPECT_THAT(log, HasSubstr("ExpBackward0"));
  EXPECT_THAT(log, HasSubstr("[2, 3]"));
  EXPECT_THAT(log, HasSubstr("CustomBackward0"));
  EXPECT_THAT(log, HasSubstr("None"));

  // At the default level nothing is logged.
  std::ostringstream quiet;
  auto quiet_logger = std::make_shared<spdlog::logger>(
      "ember_autograd_quiet", std::make_shared<spdlog::sinks::ostream_sink_mt>(quiet));
  quiet_logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(quiet_logger);
  (x * 2.0).sum().backward();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(quiet.str(), "");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Hooks on a non-leaf live on its grad_fn, as in PyTorch: they run even when no handle to the
// tensor is left, and a hook registered before an in-place op sees the old version's gradient.
TEST(AutogradHooks, NonLeafHooksLiveOnTheNode) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  int calls = 0;
  Tensor loss;
  {
    Tensor y = x * 3.0;
    y.register_hook([&](const Tensor& g) {
      ++calls;
      return g * 2.0;
    });
    loss = y.sum();
  }  // y's handle is gone
  loss.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(x.grad().at({0}), 6.0);  // d(sum(3x))/dx doubled by the hook

  // torch: y = x * 1; seen = []; y.register_hook(lambda g: seen.append(g));
  //        y.masked_fill_(tensor([True, False]), 0); (y * 5).sum().backward()
  //        seen[0] == [0., 5.]  (the gradient of the old y, after masked_fill's backward)
  Tensor z = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = z * 1.0;
  Tensor seen;
  y.register_hook([&](const Tensor& g) {
    seen = g;
    return Tensor();
  });
  y.masked_fill_(tensor({1, 0}).to_bool(), 0.0);
  (y * 5.0).sum().backward();
  ASSERT_TRUE(seen.defined());
  EXPECT_EQ(seen.at({0}), 0.0);
  EXPECT_EQ(seen.at({1}), 5.0);
}

}  // namespace
}  // namespace ember
