// Tests of nn::Module's registry against what PyTorch 1.13 answers for the same modules: the
// expected names, orders, reprs and messages below were printed by PyTorch (see each test).
#include "nn/module.h"

#include <gtest/gtest.h>

#include <pthread.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/tensor/random.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

using test::error_of;
using test::expect_error;
using test::keys;

// ---------------------------------------------------------------------------------------------
// Two custom modules shaped like the book's attention classes:
//
//   class Head(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.W_query = nn.Linear(3, 2, bias=False)
//           self.W_key = nn.Linear(3, 2, bias=False)
//           self.dropout = nn.Dropout(0.0)
//           self.register_buffer('mask', torch.triu(torch.ones(4, 4), diagonal=1))
//
//   class Wrapper(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.heads = nn.ModuleList([Head() for _ in range(2)])
//           self.scale = nn.Parameter(torch.ones(2))
//           self.out_proj = nn.Linear(4, 4)
//           self.norm = nn.LayerNorm(4)

class Head : public Module {
 public:
  Head() {
    W_query = register_module("W_query", std::make_shared<Linear>(3, 2, false));
    W_key = register_module("W_key", std::make_shared<Linear>(3, 2, false));
    dropout = register_module("dropout", std::make_shared<Dropout>(0.0));
    mask = register_buffer("mask", triu(ones({4, 4}), 1));
  }
  std::shared_ptr<Linear> W_query, W_key;
  std::shared_ptr<Dropout> dropout;
  Tensor mask;
};

class Wrapper : public Module {
 public:
  Wrapper() {
    heads = register_module("heads", std::make_shared<ModuleList>());
    for (int i = 0; i < 2; ++i) heads->push_back(std::make_shared<Head>());
    scale = register_parameter("scale", Parameter(ones({2})));
    out_proj = register_module("out_proj", std::make_shared<Linear>(4, 4));
    norm = register_module("norm", std::make_shared<LayerNorm>(4));
  }
  std::shared_ptr<ModuleList> heads;
  Tensor scale;
  std::shared_ptr<Linear> out_proj;
  std::shared_ptr<LayerNorm> norm;
};

std::shared_ptr<Sequential> make_mlp() {
  return make_sequential(
      {std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(), std::make_shared<Linear>(4, 2)});
}

// ---------------------------------------------------------------------------------------------
// Names and order

// ---- deep nesting ----

// Runs fn on a thread whose stack is `bytes` long; an exception fn throws is rethrown here.
void run_on_stack(std::size_t bytes, const std::function<void()>& fn) {
  struct Job {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } job{&fn, nullptr};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* arg) -> void* {
                  auto* job = static_cast<Job*>(arg);
                  try {
                    (*job->fn)();
                  } catch (...) {
                    job->error = std::current_exception();
                  }
                  return nullptr;
                },
                &job),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  if (job.error) std::rethrow_exception(job.error);
}

// A chain of `depth` Sequentials, each inside the one before, with a Linear(1, 1) at the bottom.
std::shared_ptr<Sequential> nested_chain(int depth) {
  auto root = std::make_shared<Sequential>();
  Sequential* last = root.get();
  for (int i = 0; i < depth; ++i) {
    auto next = std::make_shared<Sequential>();
    last->push_back(next);
    last = next.get();
  }
  last->push_back(std::make_shared<Linear>(1, 1));
  return root;
}

// Walking a deeply nested model (parameters, state_dict, named_modules, train) and freeing it
// take bounded stack: 10,000 levels on a 256 KiB stack (a recursion would need a frame or more
// per level). (PyTorch's recursive walks stop at Python's recursion limit with a RecursionError;
// these return the model's contents.)
TEST(ModuleNesting, TenThousandLevelsAreWalkedAndFreedOnASmallStack) {
  const int depth = 10'000;
  run_on_stack(256 << 10, [&] {
    std::shared_ptr<Sequential> root = nested_chain(depth);
    std::string path;
    for (int i = 0; i <= depth; ++i) path += (i ? ".0" : "0");
    EXPECT_EQ(root->parameters().size(), 2u);
    EXPECT_EQ(keys(root->named_parameters()),
              (std::vector<std::string>{path + ".weight", path + ".bias"}));
    EXPECT_EQ(keys(root->state_dict()),
              (std::vector<std::string>{path + ".weight", path + ".bias"}));
    EXPECT_EQ(root->named_modules().size(), static_cast<std::size_t>(depth + 2));
    root->eval();
    std::size_t training = 0;
    for (const auto& [name, module] : root->named_modules()) training += module->is_training();
    EXPECT_EQ(training, 0u);
    root.reset();
  });
}

// Printing a deeply nested model takes bounded stack too (3,000 levels on a 64 KiB stack), and
// gives PyTorch's text: each level's lines two spaces further in.
TEST(ModuleNesting, ADeepModelPrintsOnASmallStack) {
  const int depth = 3'000;
  run_on_stack(64 << 10, [&] {
    std::shared_ptr<Sequential> root = nested_chain(depth);
    const std::string text = root->to_string();
    std::string expected = "Sequential(";
    for (int i = 1; i <= depth; ++i) {
      expected += "\n" + std::string(2 * static_cast<std::size_t>(i), ' ') + "(0): Sequential(";
    }
    const std::string bottom(2 * static_cast<std::size_t>(depth + 1), ' ');
    expected += "\n" + bottom + "(0): Linear(in_features=1, out_features=1, bias=True)";
    for (int i = depth; i >= 0; --i) {
      expected += "\n" + std::string(2 * static_cast<std::size_t>(i), ' ') + ")";
    }
    EXPECT_EQ(text, expected);
    root.reset();
  });
}

// A chain of 100,000 nested modules is freed without running out of the default stack.
TEST(ModuleNesting, AHundredThousandLevelsAreFreed) {
  std::shared_ptr<Sequential> root = nested_chain(100'000);
  std::weak_ptr<Module> bottom = root;
  while (!bottom.lock()->children().empty()) bottom = bottom.lock()->children()[0];
  root.reset();
  EXPECT_TRUE(bottom.expired());
}

TEST(ModuleRegistry, SequentialNamesItsLayersByPosition) {
  auto mlp = make_mlp();
  EXPECT_EQ(keys(mlp->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(keys(mlp->named_children()), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(mlp->parameters().size(), 4u);
  EXPECT_TRUE(mlp->parameters()[0].is_same((*mlp)[0]->named_parameters()[0].second));
}

TEST(ModuleRegistry, NestedModulesGiveStateDictKeysInPyTorchsOrder) {
  Wrapper model;
  // Own parameters first, then each submodule's, depth first in registration order.
  EXPECT_EQ(
      keys(model.named_parameters()),
      (std::vector<std::string>{"scale", "heads.0.W_query.weight", "heads.0.W_key.weight",
                                "heads.1.W_query.weight", "heads.1.W_key.weight", "out_proj.weight",
                                "out_proj.bias", "norm.weight", "norm.bias"}));
  // state_dict: each module's parameters, then its buffers, then its submodules.
  EXPECT_EQ(keys(model.state_dict()),
            (std::vector<std::string>{
                "scale", "heads.0.mask", "heads.0.W_query.weight", "heads.0.W_key.weight",
                "heads.1.mask", "heads.1.W_query.weight", "heads.1.W_key.weight", "out_proj.weight",
                "out_proj.bias", "norm.weight", "norm.bias"}));
  EXPECT_EQ(keys(model.named_buffers()),
            (std::vector<std::string>{"heads.0.mask", "heads.1.mask"}));
  EXPECT_EQ(keys(model.named_modules()),
            (std::vector<std::string>{"", "heads", "heads.0", "heads.0.W_query", "heads.0.W_key",
                                      "heads.0.dropout", "heads.1", "heads.1.W_query",
                                      "heads.1.W_key", "heads.1.dropout", "out_proj", "norm"}));
  EXPECT_EQ(keys(model.named_children()), (std::vector<std::string>{"heads", "out_proj", "norm"}));
  EXPECT_EQ(model.children().size(), 3u);
  EXPECT_EQ(keys(model.named_parameters(/*recurse=*/false)), (std::vector<std::string>{"scale"}));
  EXPECT_TRUE(model.named_buffers(/*recurse=*/false).empty());
}

TEST(ModuleRegistry, NamedModulesPointsAtTheModulesThemselves) {
  auto model = std::make_shared<Wrapper>();
  NamedModules modules = model->named_modules();
  EXPECT_EQ(modules[0].second.get(), model.get());
  EXPECT_EQ(modules[1].second.get(), model->heads.get());
  EXPECT_EQ(modules[2].second.get(), (*model->heads)[0].get());
  EXPECT_EQ(modules.back().second.get(), model->norm.get());
  EXPECT_EQ(model.use_count(), 2);  // model and modules[0]: no hidden owner

  Wrapper on_the_stack;  // works without a shared_ptr too
  EXPECT_EQ(on_the_stack.named_modules()[0].second.get(), &on_the_stack);
}

TEST(ModuleRegistry, AttributesAndRegistryAreTheSameTensors) {
  Wrapper model;
  auto head = model.heads->at<Head>(1);
  NamedTensors params = model.named_parameters();
  EXPECT_TRUE(params[3].second.is_same(head->W_query->weight));
  EXPECT_TRUE(model.named_buffers()[1].second.is_same(head->mask));
  EXPECT_TRUE(params[0].second.is_same(model.scale));
}

TEST(ModuleRegistry, ASharedSubmoduleIsListedOnceButSavedUnderEachName) {
  // l = nn.Linear(2, 2); s = nn.Sequential(l, l)
  auto shared = std::make_shared<Linear>(2, 2);
  Sequential twice(shared, shared);
  EXPECT_EQ(keys(twice.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(keys(twice.state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  EXPECT_EQ(keys(twice.named_modules()), (std::vector<std::string>{"", "0"}));
  EXPECT_EQ(twice.children().size(), 1u);
}

TEST(ModuleRegistry, LinearWithoutBiasHasNoBiasParameter) {
  Linear layer(3, 2, /*bias=*/false);
  EXPECT_FALSE(layer.bias.defined());
  EXPECT_EQ(keys(layer.named_parameters()), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(keys(layer.state_dict()), (std::vector<std::string>{"weight"}));
  // The name stays reserved, as after PyTorch's register_parameter("bias", None).
  EXPECT_NE(error_of([&] { layer.register_buffer("bias", zeros({2})); }), "");
}

// ---------------------------------------------------------------------------------------------
// Parameters and buffers

TEST(ModuleRegistry, ParametersAreLeavesThatRequireGrad) {
  Wrapper model;
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_TRUE(p.is_leaf()) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
  }
}

TEST(ModuleRegistry, BuffersAreNotParameters) {
  Head head;
  EXPECT_EQ(head.parameters().size(), 2u);
  ASSERT_EQ(head.buffers().size(), 1u);
  EXPECT_FALSE(head.buffers()[0].requires_grad());
  for (const Tensor& p : head.parameters()) EXPECT_FALSE(p.is_same(head.mask));
}

TEST(ModuleRegistry, NonPersistentBuffersStayOutOfTheStateDict) {
  Module module("Holder");
  module.register_buffer("kept", ones({1}));
  module.register_buffer("scratch", zeros({1}), /*persistent=*/false);
  EXPECT_EQ(keys(module.named_buffers()), (std::vector<std::string>{"kept", "scratch"}));
  EXPECT_EQ(keys(module.state_dict()), (std::vector<std::string>{"kept"}));
}

TEST(ModuleRegistry, ParameterMakesADetachedLeafSharingStorage) {
  Tensor source = ones({2, 3}) * 2.0;
  Tensor p = Parameter(source);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(p.storage(), source.storage());
  EXPECT_FALSE(Parameter(source, /*requires_grad=*/false).requires_grad());
}

TEST(ModuleRegistry, RegisterParameterRefusesNonLeaves) {
  Module module("Holder");
  Tensor leaf = Parameter(ones({2}));
  Tensor computed = leaf * 2.0;
  const std::string message = error_of([&] { module.register_parameter("w", computed); });
  EXPECT_NE(message.find("non-leaf tensor as parameter 'w'"), std::string::npos) << message;
  EXPECT_NE(message.find("MulBackward0"), std::string::npos) << message;
  // A plain leaf is made to require grad (or not, when asked).
  EXPECT_TRUE(module.register_parameter("a", zeros({2})).requires_grad());
  EXPECT_FALSE(module.register_parameter("b", zeros({2}), /*requires_grad=*/false).requires_grad());
}

TEST(ModuleRegistry, BadNamesAreRejected) {
  Module module("Holder");
  module.register_parameter("weight", zeros({2}));
  EXPECT_EQ(error_of([&] { module.register_parameter("", zeros({1})); }),
            "register_parameter: parameter name can't be empty string \"\"");
  EXPECT_EQ(error_of([&] { module.register_parameter("W.query", zeros({1})); }),
            "register_parameter: parameter name can't contain \".\", got \"W.query\"");
  EXPECT_EQ(error_of([&] { module.register_buffer("a.b", zeros({1})); }),
            "register_buffer: buffer name can't contain \".\", got \"a.b\"");
  EXPECT_EQ(error_of([&] { module.register_module("x.y", std::make_shared<ReLU>()); }),
            "register_module: module name can't contain \".\", got \"x.y\"");
  // A name is unique among parameters, buffers and submodules alike.
  EXPECT_EQ(error_of([&] { module.register_parameter("weight", zeros({1})); }),
            "register_parameter: attribute 'weight' already exists in Holder");
  EXPECT_EQ(error_of([&] { module.register_buffer("weight", zeros({1})); }),
            "register_buffer: attribute 'weight' already exists in Holder");
  EXPECT_EQ(error_of([&] { module.register_module("weight", std::make_shared<ReLU>()); }),
            "register_module: attribute 'weight' already exists in Holder");
  EXPECT_EQ(keys(module.named_parameters()), (std::vector<std::string>{"weight"}));
}

// ---------------------------------------------------------------------------------------------
// Modes and gradients

TEST(ModuleRegistry, TrainAndEvalReachEverySubmodule) {
  Wrapper model;
  auto all_modes_are = [&](bool training) {
    for (const auto& [name, module] : model.named_modules()) {
      if (module->is_training() != training) return false;
    }
    return true;
  };
  EXPECT_TRUE(all_modes_are(true));  // modules start in training mode
  model.eval();
  EXPECT_TRUE(all_modes_are(false));
  EXPECT_FALSE(model.heads->at<Head>(1)->dropout->is_training());
  model.train();
  EXPECT_TRUE(all_modes_are(true));
  model.heads->train(false);  // only that branch
  EXPECT_TRUE(model.is_training());
  EXPECT_FALSE(model.heads->at<Head>(0)->W_key->is_training());
  EXPECT_TRUE(model.out_proj->is_training());
}

TEST(ModuleRegistry, ZeroGradResetsEveryGradientToUndefined) {
  manual_seed(123);
  auto mlp = make_mlp();
  Tensor loss = sum((*mlp)(rand({5, 3})));
  loss.backward();
  for (const auto& [name, p] : mlp->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  mlp->zero_grad();
  for (const auto& [name, p] : mlp->named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
}

TEST(ModuleRegistry, ToConvertsParametersAndBuffersInPlace) {
  manual_seed(123);
  Wrapper model;
  const Tensor weight = model.out_proj->weight;
  const Tensor before = weight.clone();
  Tensor loss = sum((*model.out_proj)(ones({2, 4})));
  loss.backward();
  model.heads->at<Head>(0)->register_buffer("positions", arange(4));  // int64: kept as is

  model.to(DType::Float64);
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::Float64) << name;
    EXPECT_TRUE(p.is_leaf() && p.requires_grad()) << name;
  }
  EXPECT_EQ(model.heads->at<Head>(1)->mask.dtype(), DType::Float64);
  EXPECT_EQ(model.named_buffers()[1].second.dtype(), DType::Int64);
  // The same tensor objects, holding the same values in the new dtype.
  EXPECT_TRUE(model.out_proj->weight.is_same(weight));
  EXPECT_TRUE(equal(weight.to(DType::Float32), before));
  EXPECT_EQ(weight.grad().dtype(), DType::Float64);
  EXPECT_EQ((*model.out_proj)(ones({2, 4}, DType::Float64)).dtype(), DType::Float64);
}

// ---------------------------------------------------------------------------------------------
// state_dict and load_state_dict

TEST(ModuleRegistry, StateDictRoundTrip) {
  manual_seed(1);
  Wrapper source;
  manual_seed(2);
  Wrapper target;
  const Tensor target_weight = target.out_proj->weight;
  ASSERT_FALSE(equal(source.out_proj->weight, target.out_proj->weight));

  StateDict state = source.state_dict();
  for (const auto& [key, tensor] : state) {
    EXPECT_FALSE(tensor.requires_grad()) << key;  // detached, as PyTorch's state_dict()
  }
  EXPECT_EQ(state[0].second.storage(), source.scale.storage());  // but sharing storage

  LoadResult result = target.load_state_dict(state);
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  StateDict loaded = target.state_dict();
  ASSERT_EQ(keys(loaded), keys(state));
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT_TRUE(equal(loaded[i].second, state[i].second)) << state[i].first;
    EXPECT_NE(loaded[i].second.storage(), state[i].second.storage()) << "copied, not shared";
  }
  // Values were copied into the existing parameters, which are still leaves requiring grad.
  EXPECT_TRUE(target.out_proj->weight.is_same(target_weight));
  EXPECT_TRUE(target.out_proj->weight.is_leaf());
  EXPECT_TRUE(target.out_proj->weight.requires_grad());
  EXPECT_FALSE(target.out_proj->weight.grad_fn());
}

TEST(ModuleRegistry, LoadStateDictReportsMissingKeysLikePyTorch) {
  // nn.Linear(3, 2).load_state_dict({'weight': torch.ones(2, 3)})
  Linear layer(3, 2);
  EXPECT_EQ(error_of([&] {
              layer.load_state_dict({{"weight", ones({2, 3})}});
            }),
            "Error(s) in loading state_dict for Linear:\n"
            "\tMissing key(s) in state_dict: \"bias\". ");
}

TEST(ModuleRegistry, LoadStateDictRefusesAnUndefinedValueAndCopiesNothing) {
  Linear layer(3, 2);
  const Tensor weight = layer.weight.clone();
  EXPECT_EQ(error_of([&] {
              layer.load_state_dict({{"weight", ones({2, 3})}, {"bias", Tensor()}});
            }),
            "load_state_dict: expected a defined tensor for \"bias\", got an undefined one");
  EXPECT_TRUE(equal(layer.weight, weight));
}

TEST(ModuleRegistry, LoadStateDictReportsEveryProblemAndCopiesNothing) {
  // m.load_state_dict({'W_query.weight': torch.ones(3, 3), 'x': torch.ones(1)}) on a module
  // with parameters "p", "W_query.weight" and buffer "mask" (PyTorch's message, with shapes
  // printed as [3, 3] instead of torch.Size([3, 3])).
  Module model("M");
  model.register_parameter("p", ones({1}));
  model.register_buffer("mask", ones({2, 2}));
  auto W_query = model.register_module("W_query", std::make_shared<Linear>(3, 2, false));
  const Tensor before = W_query->weight.clone();
  const std::string message = error_of([&] {
    model.load_state_dict({{"W_query.weight", ones({3, 3})}, {"x", ones({1})}});
  });
  EXPECT_EQ(message,
            "Error(s) in loading state_dict for M:\n"
            "\tMissing key(s) in state_dict: \"p\", \"mask\". \n"
            "\tUnexpected key(s) in state_dict: \"x\". \n"
            "\tsize mismatch for W_query.weight: copying a param with shape [3, 3] from "
            "checkpoint, the shape in current model is [2, 3].");
  EXPECT_TRUE(equal(W_query->weight, before));
}

// A copy that fails is an Error naming its key; the other keys are copied (PyTorch's message,
// with shapes printed as [2, 2]):
//   l = nn.Linear(2, 2); sd = l.state_dict()
//   sd['weight'] = l.weight.t(); sd['bias'] = torch.ones(2)
//   l.load_state_dict(sd)  # While copying the parameter named "weight", ...; l.bias is [1, 1]
TEST(ModuleRegistry, LoadStateDictNamesTheKeyWhoseCopyFails) {
  Linear layer(2, 2);
  const Tensor weight_before = layer.weight.clone();
  StateDict state = layer.state_dict();
  state["weight"] = layer.weight.t();  // overlaps its destination in part
  state["bias"] = ones({2});
  EXPECT_EQ(error_of([&] { layer.load_state_dict(state); }),
            "Error(s) in loading state_dict for Linear:\n"
            "\tWhile copying the parameter named \"weight\", whose dimensions in the model are "
            "[2, 2] and whose dimensions in the checkpoint are [2, 2], an exception occurred : "
            "('copy_: unsupported operation: some elements of the input tensor and the "
            "written-to tensor refer to a single memory location. Please clone() the tensor "
            "before performing the operation. (destination shape [2, 2], input shape [2, 2])',).");
  EXPECT_TRUE(equal(layer.weight, weight_before));
  EXPECT_TRUE(equal(layer.bias, ones({2})));
}

TEST(ModuleRegistry, LoadStateDictNonStrictLoadsWhatMatches) {
  // m.load_state_dict({'weight': torch.ones(2, 3), 'extra': torch.ones(1)}, strict=False)
  //   -> _IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['extra'])
  Linear layer(3, 2);
  const Tensor bias_before = layer.bias.clone();
  LoadResult result =
      layer.load_state_dict({{"weight", ones({2, 3})}, {"extra", ones({1})}}, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"bias"}));
  EXPECT_EQ(result.unexpected_keys, (std::vector<std::string>{"extra"}));
  EXPECT_TRUE(equal(layer.weight, ones({2, 3})));
  EXPECT_TRUE(equal(layer.bias, bias_before));
  // A shape mismatch is an error even when not strict.
  EXPECT_EQ(error_of([&] {
              layer.load_state_dict({{"bias", ones({3})}}, false);
            }),
            "Error(s) in loading state_dict for Linear:\n"
            "\tsize mismatch for bias: copying a param with shape [3] from checkpoint, the shape "
            "in current model is [2].");
}

// ---------------------------------------------------------------------------------------------
// forward and containers

// libtorch's replace_module: the registry and the member both move to the new module, so
// parameters(), state_dict(), printing and forward agree (PyTorch's `mha.W_query = nn.Linear`).
TEST(ModuleRegistry, ReplaceModuleUpdatesRegistryAndMember) {
  manual_seed(123);
  auto mha = std::make_shared<MultiHeadAttention>(3, 2, 6, 0.0, 1, false);
  auto replacement = std::make_shared<Linear>(3, 2, true);
  replacement->weight.detach().fill_(0.0);
  replacement->bias.detach().fill_(1.0);
  mha->W_query = mha->replace_module("W_query", replacement);
  EXPECT_EQ(mha->W_query.get(), replacement.get());
  const auto params = mha->named_parameters();
  ASSERT_TRUE(params.contains("W_query.bias"));
  EXPECT_TRUE(params["W_query.weight"].is_same(replacement->weight));
  EXPECT_EQ(params.size(), 6u);  // W_query.{weight,bias}, W_key, W_value, out_proj.{weight,bias}
  EXPECT_EQ(mha->state_dict()["W_query.bias"].at({1}), 1.0);  // detached, the same storage
  EXPECT_NE(mha->to_string().find("(W_query): Linear(in_features=3, out_features=2, bias=True)"),
            std::string::npos);
  // Loading a state dict reaches the new module's tensors.
  auto sd = mha->state_dict();
  StateDict update;
  for (const auto& [name, t] : sd) update.insert(name, t.detach().clone());
  update["W_query.bias"].fill_(5.0);
  mha->load_state_dict(update);
  EXPECT_EQ(replacement->bias.at({0}), 5.0);
  // Unknown names and cycles are Errors; the holder form works too.
  expect_error([&] { mha->replace_module("W_nope", std::make_shared<Linear>(3, 2)); },
               "replace_module: MultiHeadAttention has no submodule 'W_nope'");
  auto outer = std::make_shared<Sequential>();
  outer->push_back(mha);
  expect_error([&] { mha->replace_module("W_key", outer); }, "would make a cycle");
  ModuleHolder<Linear> held(3, 2, false);
  mha->W_key = mha->replace_module("W_key", held).ptr();
  EXPECT_TRUE(mha->named_parameters()["W_key.weight"].is_same(held->weight));
}

TEST(ModuleRegistry, ForwardIsMissingUnlessAModuleDefinesIt) {
  Module plain("Plain");
  EXPECT_EQ(error_of([&] { plain(ones({1})); }),
            "Module [Plain] is missing the required \"forward\" function");
  ModuleList list;
  EXPECT_EQ(error_of([&] { list(ones({1})); }),
            "Module [ModuleList] is missing the required \"forward\" function");
}

TEST(ModuleRegistry, SequentialChainsItsModules) {
  manual_seed(123);
  auto mlp = make_mlp();
  Tensor x = rand({5, 3});
  Tensor expected = (*(*mlp)[2])(relu((*(*mlp)[0])(x)));
  EXPECT_TRUE(equal((*mlp)(x), expected));
  EXPECT_EQ(mlp->size(), 3);
}

TEST(ModuleRegistry, ModuleListIndexingAndIteration) {
  ModuleList list({std::make_shared<Linear>(3, 2), std::make_shared<ReLU>()});
  list.push_back(std::make_shared<Dropout>(0.1));
  EXPECT_EQ(list.size(), 3);
  EXPECT_EQ(list[-1]->type_name(), "Dropout");
  EXPECT_EQ(list.at<Linear>(0)->out_features, 2);
  EXPECT_EQ(list.at<Dropout>(2)->p, 0.1);
  std::vector<std::string> names;
  for (const auto& module : list) names.push_back(module->type_name());
  EXPECT_EQ(names, (std::vector<std::string>{"Linear", "ReLU", "Dropout"}));
  EXPECT_EQ(error_of([&] { list[3]; }), "ModuleList: index 3 is out of range (size 3)");
  EXPECT_NE(error_of([&] { list.at<Linear>(1); }).find("is a ReLU"), std::string::npos);
  EXPECT_EQ(keys(list.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
}

// ---------------------------------------------------------------------------------------------
// Printing (the expected text is PyTorch's print(module))

TEST(ModuleRepr, Linear) {
  EXPECT_EQ(Linear(3, 2).to_string(), "Linear(in_features=3, out_features=2, bias=True)");
  EXPECT_EQ(Linear(768, 64, false).to_string(),
            "Linear(in_features=768, out_features=64, bias=False)");
}

TEST(ModuleRepr, Layers) {
  EXPECT_EQ(Dropout(0.0).to_string(), "Dropout(p=0.0, inplace=False)");
  EXPECT_EQ(Dropout(0.1).to_string(), "Dropout(p=0.1, inplace=False)");
  EXPECT_EQ(Dropout().to_string(), "Dropout(p=0.5, inplace=False)");
  EXPECT_EQ(Embedding(4, 3).to_string(), "Embedding(4, 3)");
  EXPECT_EQ(LayerNorm(3).to_string(), "LayerNorm((3,), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(LayerNorm(Shape{3, 4}, 1e-6, false).to_string(),
            "LayerNorm((3, 4), eps=1e-06, elementwise_affine=False)");
  EXPECT_EQ(GELU().to_string(), "GELU(approximate='none')");
  EXPECT_EQ(GELU("tanh").to_string(), "GELU(approximate='tanh')");
  EXPECT_EQ(ReLU().to_string(), "ReLU()");
  EXPECT_EQ(Sequential().to_string(), "Sequential()");
  EXPECT_EQ(ModuleList().to_string(), "ModuleList()");
}

TEST(ModuleRepr, Sequential) {
  std::ostringstream printed;
  printed << *make_mlp();
  EXPECT_EQ(printed.str(),
            "Sequential(\n"
            "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=4, out_features=2, bias=True)\n"
            ")");
}

TEST(ModuleRepr, CustomModuleWithAModuleList) {
  EXPECT_EQ(Wrapper().to_string(),
            "Wrapper(\n"
            "  (heads): ModuleList(\n"
            "    (0): Head(\n"
            "      (W_query): Linear(in_features=3, out_features=2, bias=False)\n"
            "      (W_key): Linear(in_features=3, out_features=2, bias=False)\n"
            "      (dropout): Dropout(p=0.0, inplace=False)\n"
            "    )\n"
            "    (1): Head(\n"
            "      (W_query): Linear(in_features=3, out_features=2, bias=False)\n"
            "      (W_key): Linear(in_features=3, out_features=2, bias=False)\n"
            "      (dropout): Dropout(p=0.0, inplace=False)\n"
            "    )\n"
            "  )\n"
            "  (out_proj): Linear(in_features=4, out_features=4, bias=True)\n"
            "  (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True)\n"
            ")");
}

TEST(ModuleRepr, TypeNameCanBeGiven) {
  Module named("MultiHeadAttention");
  EXPECT_EQ(named.to_string(), "MultiHeadAttention()");
  EXPECT_EQ(Head().type_name(), "Head");  // otherwise the C++ class name
}

// A module whose extra_repr has several lines prints them one per line, like PyTorch.
class TwoLines : public Module {
 public:
  std::string extra_repr() const override { return "first\nsecond"; }
};

TEST(ModuleRepr, MultiLineExtraRepr) {
  EXPECT_EQ(TwoLines().to_string(), "TwoLines(\n  first\n  second\n)");
}

TEST(FloatRepr, MatchesPythonsRepr) {
  // repr() of these floats in Python.
  EXPECT_EQ(float_repr(0.0), "0.0");
  EXPECT_EQ(float_repr(-0.0), "-0.0");
  EXPECT_EQ(float_repr(0.5), "0.5");
  EXPECT_EQ(float_repr(0.1), "0.1");
  EXPECT_EQ(float_repr(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(float_repr(1e-5), "1e-05");
  EXPECT_EQ(float_repr(0.0001), "0.0001");
  EXPECT_EQ(float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(123.25), "123.25");
  EXPECT_EQ(float_repr(-2.0), "-2.0");
}

}  // namespace
}  // namespace ember::nn
