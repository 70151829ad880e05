// Anomaly mode (core/autograd/anomaly.h) and the record hook it hangs on (core/graph/record.h):
// the switch and its guard, the NaN/inf check naming the node, its output, its forward's shapes,
// module path and labels; the module paths nn::ForwardScope computes in a GPT; nothing recorded
// when off.
#include "core/autograd/anomaly.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/graph/node.h"
#include "core/graph/record.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/tensor/random.h"
#include "nn/container.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "tests/nn/gpt_test_util.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;

// Every node of the graph behind t.
std::vector<autograd::Node*> graph_nodes(const Tensor& t) {
  std::vector<autograd::Node*> out, stack{t.grad_fn().get()};
  std::set<autograd::Node*> seen{t.grad_fn().get()};
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (const auto& next : n->next_functions) {
      if (next && seen.insert(next.get()).second) stack.push_back(next.get());
    }
  }
  return out;
}

TEST(AnomalyMode, OffByDefaultAndTheGuardRestoresThePreviousState) {
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  EXPECT_FALSE(autograd::is_recording());
  {
    autograd::DetectAnomalyGuard outer;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    EXPECT_TRUE(autograd::is_recording());
    {
      autograd::DetectAnomalyGuard inner;
      EXPECT_TRUE(autograd::is_anomaly_enabled());
    }
    EXPECT_TRUE(autograd::is_anomaly_enabled());  // the inner guard found it on
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(true);
  EXPECT_TRUE(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(false);
  EXPECT_FALSE(autograd::is_anomaly_enabled());
}

TEST(AnomalyMode, OffABackwardMakesNaNAndInfSilentlyAndNodesKeepNoContext) {
  Tensor x = tensor({0.0, 4.0}).requires_grad_();
  Tensor y = sqrt(x);
  EXPECT_EQ(y.grad_fn()->forward_context, nullptr);
  y.sum().backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_TRUE(std::isinf(g[0]));  // d sqrt(x)/dx = 1 / (2 sqrt(x)): inf at 0, as in PyTorch
  EXPECT_EQ(g[1], 0.25);
}

TEST(AnomalyMode, NamesTheNodeTheOutputTheShapesAndTheLabel) {
  autograd::DetectAnomalyGuard anomaly;
  Tensor x = tensor({{1.0, 0.0, 4.0}, {9.0, 1.0, 0.0}}).requires_grad_();
  Tensor y;
  {
    autograd::RecordFunction label("root of the squares");
    y = sqrt(x * x);
  }
  const std::string message = error_of([&] { y.sum().backward(); });
  EXPECT_NE(message.find("Function 'SqrtBackward0' returned inf values in its 0th output (the "
                         "gradient for input 0 of sqrt, of shape [2, 3])"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("forward: sqrt(inputs of shapes [2, 3]) -> [2, 3]"), std::string::npos)
      << message;
  EXPECT_NE(message.find("in: label \"root of the squares\""), std::string::npos) << message;
}

TEST(AnomalyMode, ReportsNaNAndWhichOutputOfATwoInputNode) {
  autograd::DetectAnomalyGuard anomaly;
  Tensor a = tensor({1.0, 2.0}).requires_grad_();
  Tensor b = tensor({0.0, 1.0}).requires_grad_();
  Tensor q = div(a, b * b);  // d/db of a / b^2 at b = 0: -2a/b^3 = -inf; d/da = 1/b^2 = inf
  const std::string message = error_of([&] { (q * 0.0).sum().backward(); });
  // 0 * inf: the upstream gradient is 0, so DivBackward0 makes 0/0 = nan for input 0 first.
  EXPECT_NE(message.find("Function 'DivBackward0' returned nan values in its 0th output"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("in: no module and no label (plain code)"), std::string::npos) << message;
}

TEST(AnomalyMode, ANodeMadeBeforeAnomalyModeWasOnSaysSo) {
  Tensor x = tensor({0.0}).requires_grad_();
  Tensor y = sqrt(x);
  autograd::DetectAnomalyGuard anomaly;
  const std::string message = error_of([&] { y.sum().backward(); });
  EXPECT_NE(message.find("SqrtBackward0"), std::string::npos) << message;
  EXPECT_NE(message.find("made while anomaly mode was off"), std::string::npos) << message;
}

TEST(AnomalyMode, FiniteGradientsPassAndLabelsNest) {
  autograd::DetectAnomalyGuard anomaly;
  Tensor x = tensor({1.0, 4.0}).requires_grad_();
  Tensor y;
  {
    autograd::RecordFunction outer("step 3");
    autograd::RecordFunction inner(std::string("loss"));
    y = sqrt(x).sum();
  }
  ASSERT_NE(y.grad_fn()->forward_context, nullptr);
  EXPECT_EQ(y.grad_fn()->forward_context->describe(), "label \"step 3\", label \"loss\"");
  EXPECT_TRUE(autograd::current_scopes().empty());
  y.backward();
  test::expect_values(x.grad(), {0.5, 0.25});
}

// A module of one's own, called through Sequential (whose call opens its ForwardScope).
class Root : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return sqrt(x); }
};

TEST(AnomalyMode, NamesThePathOfAModuleOfOnesOwn) {
  manual_seed(1);
  auto lin = std::make_shared<nn::Linear>(2, 2);
  {
    NoGradGuard no_grad;
    lin->weight.zero_();
    lin->bias.zero_();
  }
  auto relu = std::make_shared<nn::ReLU>();
  auto root = std::make_shared<Root>();
  auto inner = std::make_shared<nn::Sequential>(relu, root);
  auto net = std::make_shared<nn::Sequential>(lin, inner);
  autograd::DetectAnomalyGuard anomaly;
  Tensor y = (*net)(tensor({{1.0, 2.0}}));
  const std::string message = error_of([&] { y.sum().backward(); });
  EXPECT_NE(message.find("Function 'SqrtBackward0' returned inf values"), std::string::npos)
      << message;
  EXPECT_NE(message.find("in: module 1.1 (Root)"), std::string::npos) << message;
}

TEST(AnomalyMode, AnErrorInABackwardSaysWhereItsForwardRan) {
  autograd::DetectAnomalyGuard anomaly;
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y;
  {
    autograd::RecordFunction label("first pass");
    y = exp(x).sum();
  }
  y.backward();
  const std::string message = error_of([&] { y.backward(); });  // saved tensors freed
  EXPECT_NE(message.find("backward through the graph a second time"), std::string::npos) << message;
  EXPECT_NE(message.find("label \"first pass\""), std::string::npos) << message;
}

TEST(AnomalyMode, EveryNodeOfAGPTKnowsItsModulePath) {
  nn::GPTConfig cfg = test::tiny_gpt_config();
  cfg.drop_rate = 0.0;
  manual_seed(123);
  nn::GPTModel model(cfg);
  Tensor ids = tensor({{1, 15, 3, 7, 0}, {4, 4, 9, 12, 2}}, DType::Int64);
  std::set<std::string> paths;
  {
    autograd::DetectAnomalyGuard anomaly;
    Tensor logits = model.forward(ids);
    for (autograd::Node* n : graph_nodes(logits)) {
      if (n->as_accumulate_grad()) continue;
      ASSERT_NE(n->forward_context, nullptr) << n->name();
      EXPECT_TRUE(n->forward_context->in_module) << n->name();
      paths.insert(n->forward_context->module_path + " " + n->forward_context->module_type);
    }
  }
  for (const char* expected :
       {" GPTModel", "tok_emb Embedding", "pos_emb Embedding", "trf_blocks.0.norm1 LayerNorm",
        "trf_blocks.0.att.W_query Linear", "trf_blocks.1.att MultiHeadAttention",
        "trf_blocks.1.att.out_proj Linear", "trf_blocks.1.ff.layers.0 Linear",
        "trf_blocks.1.ff.layers.1 GELU", "trf_blocks.1 TransformerBlock", "final_norm LayerNorm",
        "out_head Linear"}) {
    EXPECT_EQ(paths.count(expected), 1u) << expected;
  }
  // Off again: no scope left open, and new nodes keep no context.
  EXPECT_TRUE(autograd::current_scopes().empty());
  Tensor logits = model.forward(ids);
  EXPECT_EQ(logits.grad_fn()->forward_context, nullptr);
}

TEST(AnomalyMode, AScopeIsPushedOnceWhenCalledThroughTheHolderAndForward) {
  autograd::DetectAnomalyGuard anomaly;
  nn::ModuleHolder<nn::Linear> lin(2, 3);
  Tensor y = lin(ones({1, 2}));
  ASSERT_NE(y.grad_fn()->forward_context, nullptr);
  EXPECT_EQ(y.grad_fn()->forward_context->describe(), "the outermost module (Linear)");
  EXPECT_TRUE(autograd::current_scopes().empty());
}

}  // namespace
}  // namespace ember
