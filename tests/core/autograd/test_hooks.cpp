// Gradient hooks: handles (register_hook returns one, remove_hook takes it, as libtorch's), and
// the cycle a hook capturing its own tensor makes (y -> grad_fn -> hook -> y), which a backward
// without retain_graph breaks and remove_hook breaks when no backward runs. Each lifetime is
// asserted with a weak_ptr (the tensor is freed) and, in the asan preset, by LeakSanitizer. A hook
// may not change a gradient's dtype.
#include <gtest/gtest.h>

#include <memory>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::expect_tensor;
using test::expect_values;
using test::values;

TEST(Hooks, RegisterHookReturnsHandlesAndRemoveHookRemoves) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  int calls = 0;
  const unsigned doubler = x.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 2;
  });
  const unsigned counter = x.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  EXPECT_EQ(doubler, 0u);
  EXPECT_EQ(counter, 1u);
  (x * 3).sum().backward();
  expect_values(x.grad(), {6, 6});
  EXPECT_EQ(calls, 2);
  x.remove_hook(doubler);
  x.set_grad(Tensor());
  (x * 3).sum().backward();
  expect_values(x.grad(), {3, 3});  // the doubler is gone, the counter still runs
  EXPECT_EQ(calls, 3);
  x.remove_hook(doubler);  // twice: nothing (as libtorch)
  expect_error([&] { x.remove_hook(7); }, "remove_hook: invalid handle 7: no hook was registered");
  expect_error([&] { x.register_hook(nullptr); }, "the hook is an empty function");

  // On a non-leaf the handle refers to the hooks of its grad_fn.
  Tensor y = x * 1;
  const unsigned h = y.register_hook([](const Tensor& g) { return g * 10; });
  y.remove_hook(h);
  x.set_grad(Tensor());
  y.sum().backward();
  expect_values(x.grad(), {1, 1});
}

TEST(Hooks, BackwardReleasesTheHooksOfTheNodesItFrees) {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  std::weak_ptr<TensorImpl> weak;
  {
    Tensor y = x * x;  // MulBackward0 saves x twice
    weak = y.impl_ptr();
    // The hook captures y: y -> grad_fn -> hook -> y.
    y.register_hook([y](const Tensor& g) { return g * y.detach(); });
    y.sum().backward();
  }
  EXPECT_TRUE(weak.expired()) << "the hook cycle was not broken by backward";
  expect_values(x.grad(), {2, 16, 54});  // 2x * x^2: the hook ran
}

TEST(Hooks, BackwardReleasesHooksOfNodesWithoutSavedTensors) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  std::weak_ptr<TensorImpl> weak;
  Tensor keep;
  {
    Tensor y = x + 1;  // AddBackward0 saves nothing: a second backward would run it again
    weak = y.impl_ptr();
    y.register_hook([y](const Tensor& g) { return g * 3; });
    keep = y.sum();
    keep.backward(Tensor(), /*retain_graph=*/true);  // retained: the hook stays
    expect_values(x.grad(), {3, 3});
    keep.backward();
    expect_values(x.grad(), {6, 6});
  }
  keep = Tensor();
  EXPECT_TRUE(weak.expired());

  // After the hooks were released, a backward through their node is an error rather than a
  // gradient computed without them.
  Tensor y = x + 1;
  y.register_hook([](const Tensor& g) { return g * 3; });
  Tensor loss = y.sum();
  loss.backward();
  expect_error([&] { loss.backward(); },
               "the hooks registered on the output of AddBackward0 were released by the first "
               "backward");
  // A node whose hooks were all removed has none to release.
  Tensor z = x + 1;
  z.remove_hook(z.register_hook([](const Tensor& g) { return g; }));
  Tensor zs = z.sum();
  zs.backward();
  zs.backward();
}

TEST(Hooks, RemoveHookBreaksTheCycleOfAGraphNeverRunBackward) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  std::weak_ptr<TensorImpl> weak;
  {
    Tensor y = x * x;
    weak = y.impl_ptr();
    const unsigned h = y.register_hook([y](const Tensor& g) { return g + y.detach(); });
    y.remove_hook(h);  // the documented case: no backward will run
  }
  EXPECT_TRUE(weak.expired());
}

TEST(Hooks, RemoveHookBreaksTheCycleOfALeafHook) {
  std::weak_ptr<TensorImpl> weak;
  {
    Tensor x = tensor({1.0, 2.0}).requires_grad_();
    weak = x.impl_ptr();
    const unsigned h = x.register_hook([x](const Tensor& g) { return g * x.detach(); });
    (x * 1).sum().backward();
    expect_values(x.grad(), {1, 2});
    x.remove_hook(h);
  }
  EXPECT_TRUE(weak.expired());
}

// A hook that throws what is not an ember::Error (a std::exception, an int) raises an Error naming
// where the hook sits; an ember::Error it raises comes out as it is.
TEST(Hooks, AnyExceptionOfAHookIsAnErrorNamingWhereItRan) {
  Tensor p = ones({2}).requires_grad_();
  Tensor y = p * 2.0;
  y.register_hook([](const Tensor&) -> Tensor { throw std::runtime_error("my hook failed"); });
  expect_error([&] { y.sum().backward(); },
               "MulBackward0: a hook registered on its output threw: my hook failed");
  Tensor q = ones({2}).requires_grad_();
  q.register_hook([](const Tensor&) -> Tensor { throw 7; });
  expect_error([&] { (q * 2.0).sum().backward(); },
               "AccumulateGrad: a hook registered on a leaf threw an exception of type int (not a "
               "std::exception)");
  EXPECT_FALSE(q.grad().defined());
  Tensor r = ones({2}).requires_grad_();
  r.register_hook([](const Tensor&) -> Tensor { fail("stop here"); });
  try {
    (r * 2.0).sum().backward();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "stop here");
  }
}

// A chain of 100,000 ops whose hooks each capture the tensor before (the hooks own the chain as
// much as the edges do): dropping the last tensor frees it all, with no level of recursion per op
// (a stack overflow).
TEST(Hooks, AChainOfHooksCapturingEarlierTensorsIsFreedWithoutDeepRecursion) {
  std::weak_ptr<TensorImpl> first;
  {
    Tensor x = ones({1}).requires_grad_();
    Tensor v = x * 1.0;
    first = v.impl_ptr();
    for (int i = 0; i < 100000; ++i) {
      const Tensor previous = v;
      v = v * 1.0;
      v.register_hook([previous](const Tensor& g) { return g * previous.numel(); });
    }
  }
  EXPECT_TRUE(first.expired());
  // A backward through such a chain runs every hook, then frees them as it goes.
  Tensor x = ones({1}).requires_grad_();
  Tensor v = x;
  for (int i = 0; i < 100000; ++i) {
    const Tensor previous = v;
    v = v * 1.0;
    v.register_hook([previous](const Tensor& g) { return g * previous.numel(); });
  }
  v.sum().backward();
  expect_values(x.grad(), {1.0});
}

TEST(Hooks, HookChangingTheDtypeIsAnError) {
  // p.register_hook(lambda g: g.double())
  //   -> hook '<lambda>' has changed the type of value (was torch.FloatTensor got ...Double...)
  Tensor p = ones({2}).requires_grad_();
  p.register_hook([](const Tensor& g) { return g.to(DType::Float64); });
  expect_error([&] { p.sum().backward(); },
               "hook has changed the type of value (was float32 got float64)");
  EXPECT_FALSE(p.grad().defined());
  // The same on a non-leaf (a hook run by its grad_fn).
  Tensor q = ones({2}).requires_grad_();
  Tensor y = q * 2.0;
  y.register_hook([](const Tensor& g) { return g.to(DType::Float64); });
  expect_error([&] { y.sum().backward(); }, "hook has changed the type of value");
  // A hook keeping the dtype still works.
  Tensor r = ones({2}).requires_grad_();
  r.register_hook([](const Tensor& g) { return g * 3.0; });
  r.sum().backward();
  EXPECT_EQ(values(r.grad()), (std::vector<double>{3, 3}));
  EXPECT_EQ(r.grad().dtype(), DType::Float32);
}

// A hook that captures its own tensor makes a reference cycle (tensor -> hook -> tensor), as in
// PyTorch's C++ API. The documented way (README, "Threads and reference cycles") is to capture a
// detached handle, which sees the same values and owns no autograd state: no leak (the asan run
// checks this with LeakSanitizer).
TEST(Hooks, HookCapturingADetachedHandleDoesNotLeak) {
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

// A hook may register hooks and remove hooks, itself included, while it runs: the pass runs the
// hooks it found on the tensor (a snapshot), each function kept alive until it returns.
TEST(Hooks, AHookMayRegisterOrRemoveHooksWhileItRuns) {
  Tensor x = ones({2}).requires_grad_();
  {
    Tensor y = x * 1;
    int added_calls = 0;
    y.register_hook([&](const Tensor& g) {
      for (int i = 0; i < 20; ++i) {  // enough to move the list's storage
        y.register_hook([&added_calls](const Tensor& h) {
          ++added_calls;
          return h;
        });
      }
      return g * 2;
    });
    (y * 1).sum().backward({}, /*retain_graph=*/true);
    expect_values(x.grad(), {2, 2});
    EXPECT_EQ(added_calls, 0);  // registered during the pass: from the next one on
    x.set_grad(Tensor());
    (y * 1).sum().backward();
    expect_values(x.grad(), {2, 2});
    EXPECT_EQ(added_calls, 20);
  }
  {
    // On a leaf.
    Tensor leaf = ones({2}).requires_grad_();
    leaf.register_hook([&](const Tensor& g) {
      for (int i = 0; i < 20; ++i) leaf.register_hook([](const Tensor& h) { return h; });
      return g;
    });
    (leaf * 3).sum().backward();
    expect_values(leaf.grad(), {3, 3});
  }
  {
    // A hook that removes itself: its captures live until it returns.
    x.set_grad(Tensor());
    Tensor y = x * 1;
    auto big = std::make_shared<std::vector<double>>(1000, 3.0);
    unsigned h = 0;
    h = y.register_hook([&y, &h, big](const Tensor& g) {
      y.remove_hook(h);
      return g * (*big)[999];
    });
    big.reset();
    (y * 1).sum().backward({}, /*retain_graph=*/true);
    expect_values(x.grad(), {3, 3});
    x.set_grad(Tensor());
    (y * 1).sum().backward();
    expect_values(x.grad(), {1, 1});  // removed
  }
  {
    // A hook that removes a later one: that one still runs in this pass (PyTorch's order).
    x.set_grad(Tensor());
    Tensor y = x * 2;
    unsigned later = 0;
    y.register_hook([&](const Tensor& g) {
      y.remove_hook(later);
      return g;
    });
    later = y.register_hook([](const Tensor& g) { return g * 3; });
    y.sum().backward({}, /*retain_graph=*/true);
    expect_values(x.grad(), {6, 6});
    x.set_grad(Tensor());
    y.sum().backward();
    expect_values(x.grad(), {2, 2});
  }
}

// Handles stay with their hooks when an in-place op rebases the tensor: the hook registered
// before stays on the old node (it sees the old version's gradient), and its handle still
// removes it, not the hook registered after.
TEST(Hooks, HandlesSurviveAnInPlaceRebase) {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = x * 2;
  const unsigned before = y.register_hook([](const Tensor& g) { return g * 10; });
  y.mul_(3);
  const unsigned after = y.register_hook([](const Tensor& g) { return g * 100; });
  EXPECT_NE(before, after);
  y.remove_hook(before);
  y.sum().backward();
  expect_values(x.grad(), {600, 600});  // PyTorch 1.13's: the x100 hook runs, the x10 one not
  y.remove_hook(before);                // twice: nothing
  y.remove_hook(after);                 // after a backward released it: nothing
}

}  // namespace
}  // namespace ember
