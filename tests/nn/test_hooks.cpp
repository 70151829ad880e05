// Module hooks (nn/hooks.h) against PyTorch 1.13's: every forward pre-hook, forward hook and full
// backward hook call, in order, with what it was given, for Linear, the book's
// MultiHeadAttention, a TransformerBlock, a module called twice and modules of two inputs
// (tests/fixtures/hooks.txt, from scripts/fixtures/gen_hooks.py, whose docstring lists the
// entries); hooks that replace values; removal; the backward pre-hooks of PyTorch 2.0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "nn/nn.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

const test::Fixture& hooks_fixture() { return test::fixture_file("hooks.txt"); }

using test::error_of;
using ::testing::HasSubstr;

// What the recording hooks saw: "pre:att.W_key"-style events and, per event, its tuples.
struct Recorder {
  std::vector<std::string> events;
  std::vector<std::map<std::string, TensorList>> tuples;
  void add(const std::string& event, std::map<std::string, TensorList> seen) {
    events.push_back(event);
    tuples.push_back(std::move(seen));
  }
};

// The generator's watch(): the three recording hooks on every module of named_modules().
void watch(Module& model, Recorder& rec) {
  for (const auto& [name, m] : model.named_modules()) {
    const std::string label = name.empty() ? "-" : name;
    m->register_forward_pre_hook([&rec, label](Module&, const TensorList& input) {
      rec.add("pre:" + label, {{"input", input}});
    });
    m->register_forward_hook([&rec, label](Module&, const TensorList& input, const Tensor& out) {
      rec.add("fwd:" + label, {{"input", input}, {"output", {out}}});
    });
    m->register_full_backward_hook(
        [&rec, label](Module&, const TensorList& grad_input, const TensorList& grad_output) {
          rec.add("bwd:" + label, {{"grad_input", grad_input}, {"grad_output", grad_output}});
        });
  }
}

// The recorded calls against the case's: the forward hooks in the same order, each module's
// backward hooks in the same order, and each call's tuples with None in the same places and the
// same values (to float rounding: Ember's kernels may sum in another order than PyTorch's).
// Backward hooks of branches that do not depend on each other (attention's W_query, W_key and
// W_value) may interleave differently: each engine picks its own order among ready nodes.
void expect_same_calls(const Recorder& rec, const std::string& name) {
  const test::Fixture& f = hooks_fixture();
  const std::vector<std::string>& expected = f.keys(name + "/events");
  // Each event as (event, its occurrence among equal events), and where PyTorch had it.
  auto occurrences = [](const std::vector<std::string>& events) {
    std::map<std::string, int> seen;
    std::vector<std::pair<std::string, int>> out;
    for (const std::string& e : events) out.emplace_back(e, seen[e]++);
    return out;
  };
  const auto ours = occurrences(rec.events), theirs = occurrences(expected);
  std::map<std::pair<std::string, int>, std::size_t> pytorch_index;
  for (std::size_t j = 0; j < theirs.size(); ++j) pytorch_index[theirs[j]] = j;
  ASSERT_EQ(rec.events.size(), expected.size()) << ::testing::PrintToString(rec.events);
  auto is_backward = [](const std::string& e) { return e.rfind("bwd:", 0) == 0; };
  for (std::size_t i = 0; i < ours.size(); ++i) {
    SCOPED_TRACE(rec.events[i]);
    ASSERT_TRUE(pytorch_index.count(ours[i])) << "PyTorch made no such call";
    const std::size_t j = pytorch_index.at(ours[i]);
    // Forward hooks: the same position. Backward: after every forward hook, in the module's own
    // order (checked by the occurrence matched).
    if (!is_backward(rec.events[i])) {
      EXPECT_EQ(i, j) << ::testing::PrintToString(rec.events);
    }
    for (const auto& [key, values] : rec.tuples[i]) {
      const std::string prefix = name + "/" + std::to_string(j) + "/" + key;
      std::vector<int64_t> defined;
      for (const Tensor& t : values) defined.push_back(t.defined() ? 1 : 0);
      EXPECT_EQ(defined, f.ints(prefix + ".defined")) << prefix;
      for (std::size_t k = 0; k < values.size(); ++k) {
        if (values[k].defined()) {
          f.expect_near(values[k], prefix + "." + std::to_string(k), 1e-5, 1e-6);
        }
      }
    }
  }
  // The outermost module's backward hook is the last call, as in PyTorch.
  EXPECT_EQ(rec.events.back(), expected.back());
}

// The rest of a case: output, gradients of the inputs and the parameters.
void expect_same_results(Module& model, const Tensor& out, const TensorList& xs,
                         const std::string& name) {
  const test::Fixture& f = hooks_fixture();
  f.expect_near(out, name + "/out", 1e-5, 1e-6);
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const std::string key = name + "/x" + std::to_string(k) + ".grad";
    EXPECT_EQ(xs[k].grad().defined(), f.has(key)) << key;
    if (f.has(key)) f.expect_near(xs[k].grad(), key, 1e-5, 1e-6);
  }
  for (const auto& [param, p] : model.named_parameters()) {
    f.expect_near(p.grad(), name + "/grad/" + param, 1e-5, 1e-6);
  }
}

// The generator's run_case for a model of one input: inputs drawn after the model.
template <typename Model>
void run_case(const std::string& name, std::shared_ptr<Model> model, const Shape& shape,
              bool requires_grad = true) {
  SCOPED_TRACE(name);
  Tensor x = rand(shape).requires_grad_(requires_grad);
  Recorder rec;
  watch(*model, rec);
  Tensor out = (*model)(x);
  Tensor w = rand(out.shape());
  hooks_fixture().expect_exact(w, name + "/w");  // the same draws
  (out * w).sum().backward();
  expect_same_calls(rec, name);
  expect_same_results(*model, out, {x}, name);
}

TEST(ModuleHooks, LinearOnDataCallsItsBackwardHookWithNoneForTheInput) {
  manual_seed(123);
  run_case("linear", std::make_shared<Linear>(3, 2), {4, 3}, /*requires_grad=*/false);
}

TEST(ModuleHooks, LinearOnAnInputThatRequiresGrad) {
  manual_seed(123);
  run_case("linear_x", std::make_shared<Linear>(3, 2), {4, 3});
}

TEST(ModuleHooks, MultiHeadAttentionAndItsProjections) {
  manual_seed(123);
  run_case("mha", std::make_shared<MultiHeadAttention>(3, 4, 6, 0.0, 2), {2, 5, 3});
}

TEST(ModuleHooks, TransformerBlockEveryModuleInOrderDropShortcutTwice) {
  manual_seed(123);
  run_case("block", std::make_shared<TransformerBlock>(GPTConfig{10, 6, 4, 2, 1, 0.0, false}),
           {1, 3, 4});
}

class Twice : public Module {
 public:
  Twice() { lin = register_module("lin", std::make_shared<Linear>(3, 3)); }
  Tensor forward(const Tensor& x) override { return (*lin)(relu((*lin)(x))); }
  std::shared_ptr<Linear> lin;
};

TEST(ModuleHooks, AModuleCalledTwiceSeesEachCallsOwnGradients) {
  manual_seed(123);
  run_case("twice", std::make_shared<Twice>(), {4, 3});
}

class TwoInputsImpl : public Module {
 public:
  using Module::forward;
  Tensor forward(const Tensor& a, const Tensor& b) { return a * 2 + b.sum(); }
};
EMBER_MODULE(TwoInputs);

class UnusedInputImpl : public Module {
 public:
  using Module::forward;
  Tensor forward(const Tensor& a, const Tensor& /*b*/) { return a * 3; }
};
EMBER_MODULE(UnusedInput);

// The generator's run_case for a ModuleHolder of two inputs.
template <typename Holder>
void run_two_input_case(const std::string& name) {
  SCOPED_TRACE(name);
  manual_seed(123);
  Holder model;
  Tensor a = rand({2, 3}).requires_grad_(true);
  Tensor b = rand({2, 3}).requires_grad_(true);
  Recorder rec;
  watch(*model, rec);
  Tensor out = model(a, b);
  Tensor w = rand(out.shape());
  (out * w).sum().backward();
  expect_same_calls(rec, name);
  expect_same_results(*model, out, {a, b}, name);
}

TEST(ModuleHooks, SeveralInputsEachGetTheirGradInput) {
  run_two_input_case<TwoInputs>("two_inputs");
}

TEST(ModuleHooks, AnUnusedInputGetsZerosAsInPyTorch) {
  run_two_input_case<UnusedInput>("unused_input");
}

TEST(ModuleHooks, HooksReplaceInputOutputAndGradInput) {
  manual_seed(123);
  auto lin = std::make_shared<Linear>(3, 2);
  Tensor x = rand({4, 3}).requires_grad_(true);
  lin->register_forward_pre_hook(
      [](Module&, const TensorList& input) { return std::optional<TensorList>({input[0] * 2}); });
  lin->register_forward_hook(
      [](Module&, const TensorList&, const Tensor& out) { return std::optional<Tensor>(out + 1); });
  lin->register_full_backward_hook([](Module&, const TensorList& grad_input, const TensorList&) {
    return std::optional<TensorList>({grad_input[0] * 0.5});
  });
  Tensor out = (*lin)(x);
  Tensor w = rand(out.shape());
  (out * w).sum().backward();
  expect_same_results(*lin, out, {x}, "replace");
}

TEST(ModuleHooks, RemovedHooksNoLongerRun) {
  auto lin = std::make_shared<Linear>(3, 2);
  int calls = 0;
  RemovableHandle pre =
      lin->register_forward_pre_hook([&](Module&, const TensorList&) { ++calls; });
  RemovableHandle fwd =
      lin->register_forward_hook([&](Module&, const TensorList&, const Tensor&) { ++calls; });
  RemovableHandle bwd = lin->register_full_backward_hook(
      [&](Module&, const TensorList&, const TensorList&) { ++calls; });
  (*lin)(rand({2, 3})).sum().backward();
  EXPECT_EQ(calls, 3);
  pre.remove();
  fwd.remove();
  bwd.remove();
  bwd.remove();  // twice: nothing more to do
  EXPECT_FALSE(lin->has_hooks());
  (*lin)(rand({2, 3})).sum().backward();
  EXPECT_EQ(calls, 3);
}

TEST(ModuleHooks, HooksLeaveTheGradientsBitForBit) {
  // The backward hooks' identity nodes pass gradients on untouched.
  auto run = [](bool hooked) {
    manual_seed(123);
    auto block = std::make_shared<TransformerBlock>(GPTConfig{10, 6, 8, 2, 1, 0.0, false});
    Tensor x = rand({2, 4, 8}).requires_grad_(true);
    if (hooked) {
      for (const auto& [name, m] : block->named_modules()) {
        m->register_full_backward_hook([](Module&, const TensorList&, const TensorList&) {});
      }
    }
    (*block)(x).pow(2).sum().backward();
    TensorList grads{x.grad()};
    for (const Tensor& p : block->parameters()) grads.push_back(p.grad());
    return grads;
  };
  const TensorList plain = run(false), hooked = run(true);
  ASSERT_EQ(plain.size(), hooked.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(equal(plain[i], hooked[i])) << i;
}

TEST(ModuleHooks, BackwardPreHookSeesAndReplacesGradOutputAsPyTorch2) {
  // PyTorch 2.0's register_full_backward_pre_hook (not in 1.13, so not in the fixture): it runs
  // when grad_output is known, before the module's backward, and what it returns is what the
  // module's backward (and its full backward hooks) get.
  auto lin = std::make_shared<Linear>(3, 2);
  Tensor x = rand({4, 3}).requires_grad_(true);
  std::vector<std::string> order;
  TensorList seen_grad_output;
  lin->register_full_backward_pre_hook([&](Module&, const TensorList& grad_output) {
    order.push_back("pre");
    return std::optional<TensorList>({grad_output[0] * 3});
  });
  lin->register_full_backward_hook([&](Module&, const TensorList&, const TensorList& grad_output) {
    order.push_back("bwd");
    seen_grad_output = grad_output;
  });
  (*lin)(x).sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"pre", "bwd"}));
  EXPECT_TRUE(allclose(seen_grad_output[0], full({4, 2}, 3.0)));
  // dL/dx = 3 * ones @ W
  EXPECT_TRUE(allclose(x.grad(), matmul(full({4, 2}, 3.0), lin->weight.detach())));
  EXPECT_TRUE(allclose(lin->bias.grad(), full({2}, 12.0)));
}

TEST(ModuleHooks, ReplacementsOfTheWrongLengthAreRefused) {
  auto lin = std::make_shared<Linear>(3, 2);
  lin->register_full_backward_hook([](Module&, const TensorList& gi, const TensorList&) {
    return std::optional<TensorList>({gi[0], gi[0]});
  });
  Tensor x = rand({4, 3}).requires_grad_(true);
  Tensor y = (*lin)(x);
  EXPECT_EQ(error_of([&] { y.sum().backward(); }),
            "Backward hook returned an invalid number of grad_input, got 2, but expected 1");
  auto other = std::make_shared<Linear>(3, 2);
  other->register_forward_pre_hook([](Module&, const TensorList& in) {
    return std::optional<TensorList>({in[0], in[0]});
  });
  EXPECT_THAT(error_of([&] { (*other)(x); }),
              HasSubstr("a forward pre-hook returned 2 inputs, but forward takes 1"));
}

// A module hook of any kind that throws what is not an ember::Error raises an Error naming the
// module and the kind of hook.
TEST(ModuleHooks, AnyExceptionOfAHookIsAnErrorNamingTheModuleAndTheHook) {
  Tensor x = rand({4, 3}).requires_grad_(true);
  auto pre = std::make_shared<Linear>(3, 2);
  pre->register_forward_pre_hook([](Module&, const TensorList&) { throw 1; });
  EXPECT_EQ(error_of([&] { (*pre)(x); }),
            "Linear: a forward pre-hook threw an exception of type int (not a std::exception)");
  auto fwd = std::make_shared<Linear>(3, 2);
  fwd->register_forward_hook(
      [](Module&, const TensorList&, const Tensor&) { throw std::runtime_error("no"); });
  EXPECT_EQ(error_of([&] { (*fwd)(x); }), "Linear: a forward hook threw: no");
  auto bwd_pre = std::make_shared<Linear>(3, 2);
  bwd_pre->register_full_backward_pre_hook(
      [](Module&, const TensorList&) { throw std::logic_error("pre"); });
  EXPECT_EQ(error_of([&] { (*bwd_pre)(x).sum().backward(); }),
            "Linear: a full backward pre-hook threw: pre");
  auto bwd = std::make_shared<Linear>(3, 2);
  bwd->register_full_backward_hook(
      [](Module&, const TensorList&, const TensorList&) { throw std::logic_error("post"); });
  EXPECT_EQ(error_of([&] { (*bwd)(x).sum().backward(); }),
            "Linear: a full backward hook threw: post");
  EXPECT_EQ(error_of([&] { (*bwd)(x.detach()).sum().backward(); }),
            "Linear: a full backward hook threw: post");
}

// The graph through a hooked module does not own the module: destroyed before backward (on the
// stack, or its last std::shared_ptr reset), its backward hooks raise instead of running on a dead
// module.
TEST(ModuleHooks, BackwardHooksOfADestroyedModuleRaiseInsteadOfRunning) {
  Tensor x = rand({2, 3}).requires_grad_(true);
  Tensor y;
  int calls = 0;
  {
    Linear lin(3, 2);  // on the stack
    lin.register_full_backward_hook(
        [&](Module&, const TensorList&, const TensorList&) { ++calls; });
    y = lin(x);
  }
  const std::string destroyed =
      "Linear: the module was destroyed before the backward pass reached its backward hooks; "
      "keep it alive until backward";
  EXPECT_EQ(error_of([&] { y.sum().backward(); }), destroyed);
  auto held = std::make_shared<Linear>(3, 2);
  held->register_full_backward_pre_hook([&](Module&, const TensorList&) { ++calls; });
  Tensor z = (*held)(x);
  held.reset();
  EXPECT_EQ(error_of([&] { z.sum().backward(); }), destroyed);
  EXPECT_EQ(calls, 0);
}

// A module that keeps tensors of its own forward (attention's keep_trace) with a backward hook:
// the graph they hold does not own the module, which is freed with its last std::shared_ptr.
TEST(ModuleHooks, AModuleKeepingItsOwnTensorsIsFreed) {
  manual_seed(5);
  auto mha = std::make_shared<MultiHeadAttention>(4, 4, 6, 0.0, 2);
  mha->keep_trace = true;
  int calls = 0;
  mha->register_full_backward_hook([&](Module&, const TensorList&, const TensorList&) { ++calls; });
  Tensor x = rand({1, 5, 4}).requires_grad_(true);
  (*mha)(x).sum().backward();
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(mha->trace.attn_weights.defined());
  EXPECT_EQ(mha.use_count(), 1);
  std::weak_ptr<MultiHeadAttention> watch = mha;
  mha.reset();
  EXPECT_TRUE(watch.expired());
}

class InPlaceImpl : public Module {
 public:
  Tensor forward(const Tensor& a) override {
    Tensor inout = a;
    return inout.mul_(2);
  }
};
EMBER_MODULE(InPlace);

TEST(ModuleHooks, AForwardModifyingItsInputInPlaceIsRefusedAsInPyTorch) {
  InPlace m;
  m->register_full_backward_hook([](Module&, const TensorList&, const TensorList&) {});
  Tensor x = rand({3}).requires_grad_(true) * 1;
  EXPECT_EQ(error_of([&] { m(x); }), hooks_fixture().text("inplace_error"));
}

TEST(ModuleHooks, HooksRunOnlyThroughTheCallNotForward) {
  auto lin = std::make_shared<Linear>(3, 2);
  int calls = 0;
  lin->register_forward_hook([&](Module&, const TensorList&, const Tensor&) { ++calls; });
  lin->forward(rand({2, 3}));  // as PyTorch's module.forward(x): no hooks
  EXPECT_EQ(calls, 0);
  (*lin)(rand({2, 3}));
  ModuleHolder<Linear> held(lin);
  held(rand({2, 3}));
  EXPECT_EQ(calls, 2);
}

// Every way of calling a module runs its hooks, as PyTorch's module(...) does whatever the
// arguments: MultiHeadAttention with its KV cache (the book's self.att(x, use_cache=True)).
TEST(ModuleHooks, MultiHeadAttentionWithTheKVCacheRunsItsHooksAndGivesTheSameBits) {
  manual_seed(123);
  auto mha = std::make_shared<MultiHeadAttention>(4, 4, 6, 0.0, 2);
  const Tensor x = rand({1, 5, 4});
  NoGradGuard no_grad;
  const Tensor first = x.narrow(1, 0, 3), second = x.narrow(1, 3, 2);
  // Without hooks: the three first tokens, then two more attending to the cached keys.
  const Tensor plain1 = mha->forward(first, true), plain2 = mha->forward(second, true);
  mha->reset_cache();

  TensorList pre_inputs, fwd_inputs, fwd_outputs;
  mha->register_forward_pre_hook(
      [&](Module&, const TensorList& input) { pre_inputs.push_back(input.at(0)); });
  mha->register_forward_hook([&](Module&, const TensorList& input, const Tensor& output) {
    fwd_inputs.push_back(input.at(0));
    fwd_outputs.push_back(output);
  });
  const Tensor hooked1 = (*mha)(first, true);
  ModuleHolder<MultiHeadAttention> held(mha);
  const Tensor hooked2 = held(second, true);
  EXPECT_EQ(mha->ptr_current_pos, 5);
  // The cached outputs are those without hooks, bit for bit.
  EXPECT_TRUE(equal(hooked1, plain1));
  EXPECT_TRUE(equal(hooked2, plain2));
  // Each call's hooks saw its input (the new tokens only) and its output.
  ASSERT_EQ(pre_inputs.size(), 2u);
  ASSERT_EQ(fwd_inputs.size(), 2u);
  EXPECT_TRUE(equal(pre_inputs[0], first));
  EXPECT_TRUE(equal(pre_inputs[1], second));
  EXPECT_TRUE(equal(fwd_inputs[1], second));
  EXPECT_TRUE(equal(fwd_outputs[0], plain1));
  EXPECT_TRUE(equal(fwd_outputs[1], plain2));
  EXPECT_EQ(fwd_outputs[1].shape(), (Shape{1, 2, 4}));

  // A forward hook's replacement is what the cached call returns.
  mha->reset_cache();
  mha->register_forward_hook(
      [](Module&, const TensorList&, const Tensor& out) { return std::optional<Tensor>(out * 2); });
  EXPECT_TRUE(equal((*mha)(first, true), plain1 * 2));
}

TEST(ModuleHooks, GenerationWithTheKVCacheRunsEveryModulesHooks) {
  // generate_text_simple with use_cache calls the model, each block and each attention once per
  // step (the book's model(idx, use_cache=True), blk(x, use_cache=...), self.att(x, use_cache=...)).
  const GPTConfig cfg{10, 8, 8, 2, 2, 0.0, false};
  manual_seed(123);
  auto model = std::make_shared<GPTModel>(cfg);
  const Tensor idx = from_vector({1, 2, 3}, {1, 3}, DType::Int64);
  const Tensor plain = generate_text_simple(*model, idx, 3, 8, /*use_cache=*/true);
  std::map<std::string, int> calls;
  std::map<std::string, TensorList> outputs;
  for (const auto& [name, m] : model->named_modules()) {
    const std::string label = name.empty() ? "-" : name;
    m->register_forward_hook([&, label](Module&, const TensorList&, const Tensor& output) {
      ++calls[label];
      outputs[label].push_back(output);
    });
  }
  const Tensor hooked = generate_text_simple(*model, idx, 3, 8, /*use_cache=*/true);
  EXPECT_TRUE(equal(hooked, plain));
  // Three steps: the prompt's three tokens, then one new token each.
  EXPECT_EQ(calls["-"], 3);
  EXPECT_EQ(calls["trf_blocks.0"], 3);
  EXPECT_EQ(calls["trf_blocks.1.att"], 3);
  EXPECT_EQ(calls["trf_blocks.1.att.out_proj"], 3);
  EXPECT_EQ(outputs["trf_blocks.0.att"][0].shape(), (Shape{1, 3, 8}));
  EXPECT_EQ(outputs["trf_blocks.0.att"][2].shape(), (Shape{1, 1, 8}));
  // The model's hook saw the last position's logits; their argmax is the token appended.
  EXPECT_EQ(outputs["-"][2].shape(), (Shape{1, 1, 10}));
  EXPECT_EQ(outputs["-"][2].select(1, 0).argmax(-1).item<int64_t>(),
            hooked.select(1, 5).item<int64_t>());
}

TEST(ModuleHooks, ALossOfTwoArgumentsRunsItsHooks) {
  // criterion(logits, targets): the hooks see both tensors; grad_input is the gradient of the
  // loss with respect to the logits, and undefined for the targets (they need none).
  CrossEntropyLoss criterion;
  Tensor logits = rand({4, 3}).requires_grad_(true);
  const Tensor targets = from_vector({0, 2, 1, 2}, {4}, DType::Int64);
  TensorList seen_input, grad_input;
  criterion.register_forward_hook(
      [&](Module&, const TensorList& input, const Tensor&) { seen_input = input; });
  criterion.register_full_backward_hook(
      [&](Module&, const TensorList& gi, const TensorList&) { grad_input = gi; });
  criterion(logits, targets).backward();
  ASSERT_EQ(seen_input.size(), 2u);
  EXPECT_TRUE(equal(seen_input[0], logits));
  EXPECT_TRUE(equal(seen_input[1], targets));
  ASSERT_EQ(grad_input.size(), 2u);
  EXPECT_TRUE(equal(grad_input[0], logits.grad()));
  EXPECT_FALSE(grad_input[1].defined());
}

// Backward hooks of branches that do not depend on each other run in the engine's order, which
// is not PyTorch's (nn/hooks.h): Ember runs the ready node found last (depth first, a node's
// later inputs first), PyTorch the ready node created last (scripts/fixtures/hook_order.py
// prints PyTorch's: c, b, a in every case below, the reverse of the order the modules ran).
TEST(ModuleHooks, IndependentBranchesRunTheirBackwardHooksInTheEnginesOrder) {
  manual_seed(0);
  auto a = std::make_shared<Linear>(3, 3), b = std::make_shared<Linear>(3, 3),
       c = std::make_shared<Linear>(3, 3);
  std::vector<std::string> order;
  for (const auto& [name, m] : {std::pair{"a", a}, std::pair{"b", b}, std::pair{"c", c}}) {
    m->register_full_backward_hook(
        [&order, name = std::string(name)](Module&, const TensorList&, const TensorList&) {
          order.push_back(name);
        });
  }
  Tensor x = rand({2, 3}).requires_grad_(true);
  using Order = std::vector<std::string>;
  auto run = [&](const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& join) {
    order.clear();
    const Tensor ua = (*a)(x), ub = (*b)(x), uc = (*c)(x);
    join(ua, ub, uc).sum().backward();
    return order;
  };
  // (ua + ub) + uc: the same order as PyTorch's.
  EXPECT_EQ(run([](auto ua, auto ub, auto uc) { return ua + ub + uc; }), (Order{"c", "b", "a"}));
  // (uc + ua) + ub: ub's branch first, then ua's (the later input of uc + ua); PyTorch: c, b, a.
  EXPECT_EQ(run([](auto ua, auto ub, auto uc) { return uc + ua + ub; }), (Order{"b", "a", "c"}));
  // uc + b(a(x)): the chain through b and a first; PyTorch: c, b, a.
  order.clear();
  const Tensor chain = (*b)((*a)(x)), side = (*c)(x);
  (side + chain).sum().backward();
  EXPECT_EQ(order, (Order{"b", "a", "c"}));
}

}  // namespace
}  // namespace ember::nn

namespace ember::nn {
namespace {

// A module's full backward hook runs in autograd::grad as in backward(), where the pass reaches
// the module's inputs: PyTorch 1.13 (torch.autograd.grad with lin = torch.nn.Linear(2, 2) and
// a hook recording its grad_input shapes):
//   x requires grad:        grad(y, x) -> called with [[1, 2]]; grad(y, lin.weight) -> not called
//   x does not require grad: grad(y, lin.weight) -> called with [None]
//   y.backward() -> called once either way
// and a hook's replacement grad_input is what grad returns (x2 = 10 * the unhooked gradient).
TEST(ModuleHooks, FullBackwardHooksInAutogradGradAsPyTorch) {
  manual_seed(123);
  auto lin = std::make_shared<Linear>(2, 2);
  std::vector<std::vector<bool>> calls;  // per call, which grad_input entries are defined
  auto handle = lin->register_full_backward_hook(
      [&](Module&, const TensorList& grad_input, const TensorList&) {
        std::vector<bool> defined;
        for (const Tensor& g : grad_input) defined.push_back(g.defined());
        calls.push_back(defined);
      });
  Tensor x = ones({1, 2}).requires_grad_();
  (void)autograd::grad({(*lin)(x).sum()}, {x});
  EXPECT_EQ(calls, (std::vector<std::vector<bool>>{{true}}));
  calls.clear();
  (void)autograd::grad({(*lin)(x).sum()}, {lin->weight});
  EXPECT_EQ(calls, (std::vector<std::vector<bool>>{}));
  calls.clear();
  (*lin)(x).sum().backward();
  EXPECT_EQ(calls, (std::vector<std::vector<bool>>{{true}}));
  calls.clear();
  const Tensor data = ones({1, 2});
  (void)autograd::grad({(*lin)(data).sum()}, {lin->weight});
  EXPECT_EQ(calls, (std::vector<std::vector<bool>>{{false}}));
  calls.clear();
  handle.remove();
  const Tensor plain = autograd::grad({(*lin)(x).sum()}, {x})[0];
  lin->register_full_backward_hook(
      [](Module&, const TensorList& grad_input, const TensorList&) -> std::optional<TensorList> {
        return TensorList{grad_input[0] * 10.0};
      });
  EXPECT_TRUE(allclose(autograd::grad({(*lin)(x).sum()}, {x})[0], plain * 10.0));
}

}  // namespace
}  // namespace ember::nn
