// autograd::profiler and modules: a module's forward (through operator(), a ModuleHolder,
// Sequential, or its own forward: nn::ForwardScope) is an event "nn.Module: <type>", and the ops
// inside carry the module path anomaly mode names ("trf_blocks.1.att", as named_modules()).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/autograd/anomaly.h"
#include "core/ember.h"
#include "core/graph/profiler.h"
#include "nn/container.h"
#include "nn/gpt.h"
#include "nn/holder.h"
#include "nn/layers.h"
#include "tests/nn/gpt_test_util.h"

namespace ember {
namespace {

namespace profiler = autograd::profiler;

TEST(ProfilerModules, ModuleEventsAndPaths) {
  manual_seed(1);
  auto linear = std::make_shared<nn::Linear>(3, 4);
  auto relu = std::make_shared<nn::ReLU>();
  nn::ModuleHolder<nn::Sequential> net(linear, relu);
  const Tensor x = randn({2, 3});
  profiler::Profile prof;
  {
    profiler::RecordFunction label("step");
    net(x).sum().backward();
  }
  prof.stop();
  const profiler::KeyAverages averages = prof.key_averages();
  ASSERT_NE(averages.find("nn.Module: Sequential"), nullptr);
  ASSERT_NE(averages.find("nn.Module: Linear"), nullptr);
  ASSERT_NE(averages.find("nn.Module: ReLU"), nullptr);
  EXPECT_EQ(averages.find("nn.Module: Linear")->count, 1);
  bool saw_addmm = false, saw_relu = false;
  for (const profiler::Event& e : prof.events()) {
    if (e.name == "ember::addmm") {
      saw_addmm = true;
      EXPECT_EQ(e.module_path, "0");  // its path in the Sequential (named_modules())
      EXPECT_EQ(e.label, "step");
    }
    if (e.name == "ember::relu") {
      saw_relu = true;
      EXPECT_EQ(e.module_path, "1");
    }
    if (e.kind == profiler::EventKind::kBackward) {
      EXPECT_EQ(e.module_path, "") << e.name;
    }
  }
  EXPECT_TRUE(saw_addmm);
  EXPECT_TRUE(saw_relu);
  for (const profiler::Event& e : prof.events()) {
    if (e.name == "nn.Module: Sequential") {
      EXPECT_EQ(e.module_path, "");  // its own path
    }
    if (e.name == "nn.Module: Linear") {
      EXPECT_EQ(e.module_path, "0");
    }
  }
}

TEST(ProfilerModules, AGPTsOpsCarryTheirModulePaths) {
  manual_seed(123);
  nn::GPTConfig cfg = test::tiny_gpt_config();
  cfg.drop_rate = 0.0;
  cfg.qkv_bias = false;
  nn::GPTModel model(cfg);
  const Tensor ids = tensor({{1, 15, 3, 7, 0}, {4, 4, 9, 12, 2}}, DType::Int64);
  profiler::Profile prof;
  model.forward(ids).sum().backward();
  prof.stop();
  std::set<std::string> paths;
  int modules_events = 0, blocks = 0;
  for (const profiler::Event& e : prof.events()) {
    if (e.kind == profiler::EventKind::kOp) paths.insert(e.module_path + " " + e.name);
    if (e.kind == profiler::EventKind::kModule) ++modules_events;
    if (e.name == "nn.Module: TransformerBlock") {
      ++blocks;
      EXPECT_TRUE(e.module_path == "trf_blocks.0" || e.module_path == "trf_blocks.1")
          << e.module_path;
    }
  }
  for (const char* expected : {"tok_emb ember::embedding", "trf_blocks.0.att.W_query ember::mm",
                               "trf_blocks.1.att.out_proj ember::addmm",
                               "trf_blocks.1.ff.layers.0 ember::addmm", "out_head ember::mm"}) {
    EXPECT_EQ(paths.count(expected), 1u) << expected;
  }
  EXPECT_EQ(blocks, 2);
  EXPECT_GT(modules_events, 10);
}

TEST(ProfilerModules, OneLabelIsSeenByTheProfilerAndAnomalyModeAlike) {
  auto lin = std::make_shared<nn::Linear>(2, 3);
  nn::Sequential net(lin);
  autograd::DetectAnomalyGuard anomaly;
  profiler::Profile prof;
  Tensor y;
  {
    autograd::RecordFunction label("penalty");  // pushed once
    y = net(ones({1, 2}));
    EXPECT_EQ(profiler::current_label(), "penalty");
  }
  prof.stop();
  ASSERT_NE(y.grad_fn()->forward_context, nullptr);
  EXPECT_EQ(y.grad_fn()->forward_context->describe(), "module 0 (Linear), label \"penalty\"");
  ASSERT_NE(prof.key_averages().find("penalty"), nullptr);
  bool saw_op = false;
  for (const profiler::Event& e : prof.events()) {
    if (e.kind != profiler::EventKind::kOp) continue;
    saw_op = true;
    EXPECT_EQ(e.label, "penalty") << e.name;
    EXPECT_EQ(e.module_path, "0") << e.name;
  }
  EXPECT_TRUE(saw_op);
  EXPECT_TRUE(autograd::current_scopes().empty());
}

}  // namespace
}  // namespace ember
