// autograd::profiler and modules: a module called through operator() (or a ModuleHolder, or by
// Sequential) is an event "nn.Module: <type>", and the ops inside carry the module path.
#include <gtest/gtest.h>

#include <string>

#include "core/autograd/profiler.h"
#include "core/ember.h"
#include "nn/container.h"
#include "nn/holder.h"
#include "nn/layers.h"

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
      EXPECT_EQ(e.module_path, "Sequential.Linear");
      EXPECT_EQ(e.label, "step");
    }
    if (e.name == "ember::relu") {
      saw_relu = true;
      EXPECT_EQ(e.module_path, "Sequential.ReLU");
    }
    if (e.kind == profiler::EventKind::kBackward) {
      EXPECT_EQ(e.module_path, "") << e.name;
    }
  }
  EXPECT_TRUE(saw_addmm);
  EXPECT_TRUE(saw_relu);
}

}  // namespace
}  // namespace ember
