// The libtorch-style module API and two fixes to the registry (reference cycles, replacing a
// registered tensor): ordered dicts from named_parameters()/state_dict(), module handles
// (ModuleHolder, EMBER_MODULE), Sequential built in order (weights checked against PyTorch's for
// the same seed), cycles refused, and member tensors that stay the registered ones when replaced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/testing_gtest.h"
#include "nn/nn.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

// PyTorch's sampling results (scripts/fixtures/gen_sampling.py).
const test::Fixture& sampling() { return test::fixture_file("sampling.txt"); }

using test::error_of;
using ::testing::HasSubstr;

// ---- ordered dicts ----

TEST(ModuleApi, NamedParametersIsAnOrderedDictByName) {
  manual_seed(123);
  MultiHeadAttention mha(3, 2, 6, 0.0, 2);
  NamedTensors params = mha.named_parameters();
  EXPECT_EQ(params.keys(),
            (std::vector<std::string>{"W_query.weight", "W_key.weight", "W_value.weight",
                                      "out_proj.weight", "out_proj.bias"}));
  EXPECT_TRUE(params["W_query.weight"].is_same(mha.W_query->weight));
  EXPECT_TRUE(params.contains("out_proj.bias"));
  EXPECT_EQ(params.find("W_query.bias"), nullptr);
  EXPECT_THAT(error_of([&] { (void)params["nope"]; }), HasSubstr("'nope' is not defined"));
  EXPECT_EQ(params.values().size(), 5u);

  StateDict state = mha.state_dict();
  EXPECT_TRUE(state.contains("mask"));
  EXPECT_EQ(state["mask"].shape(), (Shape{6, 6}));
  EXPECT_TRUE(mha.named_buffers()["mask"].is_same(mha.mask));
  EXPECT_EQ(mha.named_modules()["out_proj"].get(), mha.out_proj.get());
}

// ---- handles ----

TEST(ModuleApi, HoldersAreCalledLikeFunctions) {
  manual_seed(1);
  ModuleHolder<Linear> lin(3, 2);
  Tensor x = rand({4, 3});
  EXPECT_TRUE(equal(lin(x), lin->forward(x)));
  EXPECT_EQ(lin->in_features, 3);
  EXPECT_EQ((*lin).out_features, 2);
  std::shared_ptr<Module> as_module = lin;  // converts to a module pointer
  EXPECT_EQ(as_module.get(), lin.get());

  // Every module, the attention ones included.
  ModuleHolder<MultiHeadAttention> mha(3, 2, 6, 0.0, 2);
  EXPECT_EQ(mha(rand({2, 6, 3})).shape(), (Shape{2, 6, 2}));
  ModuleHolder<MultiHeadAttentionWrapper> wrapper(3, 2, 6, 0.0, 2);
  EXPECT_EQ(wrapper(rand({1, 6, 3})).shape(), (Shape{1, 6, 4}));
  ModuleHolder<CausalAttention> causal(3, 2, 6, 0.0);
  EXPECT_EQ(causal(rand({1, 4, 3})).shape(), (Shape{1, 4, 2}));
  ModuleHolder<SelfAttentionV1> v1(3, 2);
  ModuleHolder<SelfAttentionV2> v2(3, 2);
  EXPECT_EQ(v1(rand({6, 3})).shape(), (Shape{6, 2}));
  EXPECT_EQ(v2(rand({6, 3})).shape(), (Shape{6, 2}));
  ModuleHolder<Embedding> emb(10, 4);
  EXPECT_EQ(emb(arange(3)).shape(), (Shape{3, 4}));
  ModuleHolder<LayerNorm> norm(4);
  ModuleHolder<GELU> gelu;
  ModuleHolder<ReLU> relu;
  ModuleHolder<Dropout> drop(0.0);
  EXPECT_EQ(relu(gelu(norm(drop(rand({2, 4}))))).shape(), (Shape{2, 4}));

  ModuleHolder<Linear> empty_holder(nullptr);
  EXPECT_TRUE(empty_holder.is_empty());
  EXPECT_THAT(error_of([&] { (void)empty_holder(x); }), HasSubstr("empty holder"));
}

// A user module in libtorch's TORCH_MODULE style.
class TwoLayerImpl : public Module {
 public:
  TwoLayerImpl(int64_t in, int64_t hidden, int64_t out)
      : fc1(register_module("fc1", ModuleHolder<Linear>(in, hidden))),
        fc2(register_module("fc2", ModuleHolder<Linear>(hidden, out))) {}
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
  ModuleHolder<Linear> fc1, fc2;
};
EMBER_MODULE(TwoLayer);

TEST(ModuleApi, EmberModuleMakesAHandleForUserModules) {
  manual_seed(5);
  TwoLayer net(3, 4, 2);
  Tensor y = net(rand({5, 3}));
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  EXPECT_EQ(net->named_parameters().keys(),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  auto outer = std::make_shared<Sequential>();
  outer->push_back(net);  // a handle goes where a module pointer goes
  EXPECT_EQ((*outer)[0].get(), net.get());
}

// ---- Sequential builds in order ----

void expect_pytorch_sequential_weights(const Module& seq) {
  StateDict state = seq.state_dict();
  EXPECT_EQ(state.keys(), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  for (const auto& [name, tensor] : state) {
    SCOPED_TRACE(name);
    EXPECT_TENSOR_CLOSE_TOL(tensor, sampling().tensor("seq_" + name), 0.0, 0.0);
  }
}

TEST(ModuleApi, SequentialBuildsItsLayersInTheOrderWritten) {
  // torch.manual_seed(123); nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
  manual_seed(123);
  auto seq = make_sequential(
      {std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(), std::make_shared<Linear>(4, 2)});
  expect_pytorch_sequential_weights(*seq);

  manual_seed(123);
  auto chained = std::make_shared<Sequential>();
  chained->add<Linear>(3, 4).add<ReLU>().add<Linear>(4, 2);
  expect_pytorch_sequential_weights(*chained);

  manual_seed(123);
  Sequential braces{std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(),
                    std::make_shared<Linear>(4, 2)};
  expect_pytorch_sequential_weights(braces);

  // Named modules built beforehand may still be passed as arguments.
  manual_seed(123);
  auto first = std::make_shared<Linear>(3, 4);
  auto act = std::make_shared<ReLU>();
  auto last = std::make_shared<Linear>(4, 2);
  expect_pytorch_sequential_weights(Sequential(first, act, last));
}

// ---- cycles ----

TEST(ModuleApi, RegisteringACycleThrows) {
  auto a = std::make_shared<Sequential>();
  EXPECT_THAT(error_of([&] { a->push_back(a); }),
              HasSubstr("a module cannot be its own submodule"));
  auto b = std::make_shared<Sequential>();
  auto c = std::make_shared<ModuleList>();
  a->push_back(b);
  b->push_back(c);
  // c -> a would close a -> b -> c -> a.
  EXPECT_THAT(error_of([&] { c->push_back(a); }), HasSubstr("would make a cycle"));
  EXPECT_THAT(error_of([&] { b->push_back(a); }), HasSubstr("would make a cycle"));
  // Nothing was registered: printing and state_dict still end.
  EXPECT_EQ(a->to_string(), "Sequential(\n  (0): Sequential(\n    (0): ModuleList()\n  )\n)");
  EXPECT_TRUE(a->state_dict().empty());
  // Sharing one module in two places (a DAG) is fine.
  auto shared = std::make_shared<Linear>(2, 2);
  a->push_back(shared);
  b->push_back(shared);
  EXPECT_EQ(a->state_dict().size(), 4u);
}

// ---- replacing a registered tensor ----

TEST(ModuleApi, ReplacingAParameterMemberReplacesItEverywhere) {
  // lin = nn.Linear(3, 2); lin.weight = nn.Parameter(torch.zeros(2, 3))
  // lin.load_state_dict({'weight': torch.ones(2, 3), 'bias': torch.zeros(2)})
  // lin(torch.ones(1, 3)) -> tensor([[3., 3.]])
  auto lin = std::make_shared<Linear>(3, 2);
  lin->weight = Parameter(zeros({2, 3}));
  EXPECT_TRUE(lin->parameters()[0].is_same(lin->weight));  // what an optimizer is given
  EXPECT_TRUE(lin->named_parameters()["weight"].is_same(lin->weight));
  EXPECT_TENSOR_CLOSE(lin->state_dict()["weight"], zeros({2, 3}));
  lin->load_state_dict({{"weight", ones({2, 3})}, {"bias", zeros({2})}});
  EXPECT_TENSOR_CLOSE(lin->weight, ones({2, 3}));
  EXPECT_TENSOR_CLOSE(lin->forward(ones({1, 3})), tensor({{3.0, 3.0}}));

  // Gradients land on the new tensor, where parameters() finds them.
  lin->forward(ones({1, 3})).sum().backward();
  ASSERT_TRUE(lin->parameters()[0].grad().defined());
  EXPECT_TENSOR_CLOSE(lin->parameters()[0].grad(), ones({2, 3}));

  // to(dtype) converts the replaced tensor.
  lin->double_();
  EXPECT_EQ(lin->weight.dtype(), DType::Float64);
  EXPECT_EQ(lin->parameters()[0].dtype(), DType::Float64);
  lin->float_();
  EXPECT_EQ(lin->weight.dtype(), DType::Float32);
}

TEST(ModuleApi, ReplacingABufferMemberReplacesItEverywhere) {
  manual_seed(123);
  MultiHeadAttention mha(3, 2, 6, 0.0, 2);
  mha.mask = triu(ones({6, 6}), 2);  // a looser mask: each token also sees the next one
  EXPECT_TRUE(mha.named_buffers()["mask"].is_same(mha.mask));
  EXPECT_TENSOR_CLOSE(mha.state_dict()["mask"], triu(ones({6, 6}), 2));
  mha.load_state_dict([&] {
    StateDict state = mha.state_dict();
    state.insert_or_assign("mask", triu(ones({6, 6}), 1));
    return state;
  }());
  EXPECT_TENSOR_CLOSE(mha.mask, triu(ones({6, 6}), 1));
}

TEST(ModuleApi, ByValueRegistrationsAreReplacedWithSetParameter) {
  struct Scaled : Module {
    Scaled() { register_parameter("scale", ones({1})); }
  } m;
  m.set_parameter("scale", full({1}, 2.0));
  EXPECT_TENSOR_CLOSE(m.named_parameters()["scale"], full({1}, 2.0));
  EXPECT_TRUE(m.named_parameters()["scale"].requires_grad());
  EXPECT_THAT(error_of([&] { m.set_parameter("nope", ones({1})); }),
              HasSubstr("has no parameter named 'nope'"));
  EXPECT_THAT(error_of([&] { m.set_parameter("scale", ones({1}).requires_grad_() * 2.0); }),
              HasSubstr("cannot register a non-leaf tensor"));
}

}  // namespace
}  // namespace ember::nn
