// Adversarial graph shapes (deep chains, wide fan-outs, shared and reused nodes): teardown and
// backward of any graph use bounded stack; a hook that captures its own tensor; autograd::grad with
// repeated inputs.
#include <gtest/gtest.h>

#include <memory>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_tensor;

// 10^6 nodes in release; ASan's bigger frames and slower allocator get a tenth of that, which
// is still far deeper than the default 8 MB stack allows for one frame per node.
// The other shapes run at a tenth of that (100,000 nodes already overflowed the old teardown).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kNodes = 100'000;
#else
constexpr int kNodes = 1'000'000;
#endif
constexpr int kShapeNodes = kNodes / 10;

TEST(AdvGraph, LongChainTearsDownAndBackpropagates) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kNodes; ++i) y = y * 1.0;
  y.backward();
  expect_tensor(x.grad(), {}, {1});
  y = Tensor();  // the graph is freed here
}

TEST(AdvGraph, ChainDroppedWithoutBackward) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y + 1.0;
  EXPECT_EQ(y.item(), 1.0 + kShapeNodes);
  y = Tensor();
}

// y = y + y: every node is used twice by the next one (the old teardown recursed here).
TEST(AdvGraph, EachNodeUsedTwice) {
  Tensor x = scalar_tensor(1.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kNodes; ++i) y = y + y;
  EXPECT_TRUE(std::isinf(y.item()));
  y = Tensor();
}

// y = 0.5 y + 0.5 y: a DAG with shared nodes whose gradient stays exactly 1.
TEST(AdvGraph, SharedNodesBackward) {
  Tensor x = scalar_tensor(3.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y * 0.5 + y * 0.5;
  EXPECT_EQ(y.item(), 3.0);
  y.backward();
  expect_tensor(x.grad(), {}, {1});
}

// The residual form of the issue: y = y + y * 0.5, and a residual stack of small matrices.
TEST(AdvGraph, ResidualStacks) {
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

TEST(AdvGraph, RetainedGraphFreedAfterTwoBackwards) {
  Tensor x = scalar_tensor(2.0, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < kShapeNodes; ++i) y = y * 1.0 + 0.0;
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  expect_tensor(x.grad(), {}, {2});
}

// torch.autograd.grad(y, [x, x]) returns the gradient twice.
TEST(AdvGraph, GradWithTheSameInputTwice) {
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

// A hook that captures its own tensor makes a reference cycle (tensor -> hook -> tensor), as in
// PyTorch's C++ API. The documented way (README, "Threads and reference cycles") is to capture a
// detached handle, which sees the same values and owns no autograd state: no leak (the asan run
// checks this with LeakSanitizer).
TEST(AdvGraph, HookCapturingADetachedHandleDoesNotLeak) {
  std::weak_ptr<TensorImpl> watch;
  double seen = 0;
  {
    Tensor w = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
    watch = w.impl_ptr();
    Tensor w_values = w.detach();
    w.register_hook([w_values, &seen](const Tensor& g) {
      seen = (g * w_values).sum().item();
      return Tensor();
    });
    Tensor h = w * 3.0;
    Tensor h_values = h.detach();
    h.register_hook([h_values](const Tensor& g) { return g * 0.0 + h_values; });
    h.sum().backward();
    expect_tensor(w.grad(), {2}, {9, 18});  // h's hook replaced its gradient by h = [3, 6]
  }
  EXPECT_EQ(seen, 1.0 * 9 + 2.0 * 18);
  EXPECT_TRUE(watch.expired());  // the leaf and its hook were freed
}

// A gradient whose history reaches its own leaf: x.grad.copy_(triu(x)) makes x -> x.grad ->
// CopyBackwards -> TriuBackward0 -> AccumulateGrad(x). PyTorch 1.13 holds the leaf strongly in
// AccumulateGrad and leaks x here; Ember's AccumulateGrad holds it weakly, so x is freed.
TEST(AdvGraph, AGradientWhoseHistoryReachesItsLeafDoesNotLeak) {
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
TEST(AdvGraph, BackwardAfterALeafIsGone) {
  Tensor kept = tensor({2.0}, DType::Float64).requires_grad_();
  Tensor loss;
  {
    Tensor gone = tensor({3.0}, DType::Float64).requires_grad_();
    loss = (kept * gone).sum();
  }
  loss.backward();
  expect_tensor(kept.grad(), {1}, {3});
}

}  // namespace
}  // namespace ember
