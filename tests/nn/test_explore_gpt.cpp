// autograd::explore on a GPT block's graph (a tiny GPTModel with one transformer block): the page
// stays usable, its leaves are named by the module paths, and in headless Chromium its
// self-check passes (every node clicked, the backward played, leaf gradients compared).
#include <filesystem>
#include <string>

#include "core/autograd/explore.h"
#include "core/graph/function.h"
#include "nn/nn.h"
#include "tests/browser.h"

using namespace ember;
namespace F = ember::nn::functional;

TEST(ExploreGpt, ATinyGptBlockPagePassesItsSelfCheck) {
  nn::GPTConfig cfg{/*vocab_size=*/11, /*context_length=*/6, /*emb_dim=*/8,
                    /*n_heads=*/2,
                    /*n_layers=*/1,    /*drop_rate=*/0.0,    /*qkv_bias=*/false};
  manual_seed(5);
  nn::GPTModel model(cfg);
  Tensor x = from_vector({1, 4, 2, 7, 3, 0}, {1, 6}, DType::Int64);
  Tensor y = from_vector({4, 2, 7, 3, 0, 9}, {6}, DType::Int64);
  Tensor loss;
  {
    autograd::KeepValuesGuard keep;
    loss = F::cross_entropy(model.forward(x).flatten(0, 1), y);
  }
  autograd::ExploreOptions options;
  options.name_all(model.named_parameters());
  const std::string data = autograd::explore_data(loss, options);
  EXPECT_NE(data.find("\"label\":\"trf_blocks.0.att.W_query.weight\""), std::string::npos);
  EXPECT_NE(data.find("\"name\":\"CrossEntropyLossBackward0\""), std::string::npos);

  EMBER_SKIP_WITHOUT_CHROMIUM();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ember_gpt_block_" + std::to_string(getpid()) + ".html"))
                               .string();
  autograd::explore(loss, path, options);
  const std::string result = test::run_selftest(path);
  EXPECT_EQ(result.rfind("PASS ", 0), 0u) << result;
  const auto params = model.named_parameters().size();
  EXPECT_NE(result.find(std::to_string(params) + " leaf gradients"), std::string::npos) << result;
  std::filesystem::remove(path);
}
