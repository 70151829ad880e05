// Ten training steps of a small GPTModel against PyTorch 1.13 (llm.c's test_gpt2.c, at the scale
// of attention): the same seed, data, dropout masks, AdamW, gradient clipping and warmup + cosine
// schedule give the same losses (1e-5 relative) and the same final parameters (1e-5).
//
// Expected values: tests/fixtures/gpt_train.txt, written by scripts/fixtures/gen_gpt_train.py
// (its docstring describes the run and the format).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/elementwise.h"
#include "core/random.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "optim/optim.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

struct ParamExpectation {
  std::string shape;
  double sum = 0, sumsq = 0;
  std::vector<std::pair<int64_t, uint32_t>> samples;
};

struct Expected {
  std::map<int, float> loss;
  std::map<int, double> lr, grad_norm;
  std::vector<std::pair<std::string, ParamExpectation>> params;
};

Expected read_fixture() {
  Expected e;
  std::ifstream file(test::fixture_path("gpt_train.txt"));
  EXPECT_TRUE(file.good()) << "cannot open gpt_train.txt";
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "step") {
      int step;
      std::string word, hex;
      in >> step >> word >> hex;
      e.loss[step] = std::bit_cast<float>(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
    } else if (kind == "lr" || kind == "grad_norm") {
      int step;
      double value;
      in >> step >> value;
      (kind == "lr" ? e.lr : e.grad_norm)[step] = value;
    } else if (kind == "param") {
      std::string key;
      ParamExpectation p;
      in >> key >> p.shape >> p.sum >> p.sumsq;
      for (std::string item; in >> item;) {
        const auto colon = item.find(':');
        p.samples.emplace_back(
            std::stoll(item.substr(0, colon)),
            static_cast<uint32_t>(std::stoul(item.substr(colon + 1), nullptr, 16)));
      }
      e.params.emplace_back(key, p);
    }
  }
  return e;
}

// tokens[b][t] = (31 b + 17 t + 7 step + (b t) % 5) % 64: inputs tokens[:, :32], targets [:, 1:].
std::pair<Tensor, Tensor> batch(int step) {
  std::vector<double> inputs, targets;
  for (int b = 0; b < 4; ++b) {
    for (int t = 0; t < 33; ++t) {
      const double token = (31 * b + 17 * t + 7 * step + (b * t) % 5) % 64;
      if (t < 32) inputs.push_back(token);
      if (t > 0) targets.push_back(token);
    }
  }
  return {from_vector(inputs, {4, 32}, DType::Int64), from_vector(targets, {4, 32}, DType::Int64)};
}

TEST(GPTTrainingParity, TenAdamWStepsMatchPyTorch) {
  const Expected expected = read_fixture();
  ASSERT_EQ(expected.loss.size(), 10u);

  nn::GPTConfig cfg;
  cfg.vocab_size = 64;
  cfg.context_length = 32;
  cfg.emb_dim = 64;
  cfg.n_heads = 4;
  cfg.n_layers = 2;
  cfg.drop_rate = 0.1;
  cfg.qkv_bias = false;
  manual_seed(123);
  nn::GPTModel model(cfg);
  model.train();
  optim::AdamW opt(model.parameters(),
                   optim::AdamWOptions(1e-3).betas({0.9, 0.95}).weight_decay(0.1));
  constexpr int kSteps = 10, kWarmup = 3;
  optim::LambdaLR schedule(opt, [](int64_t step) {
    if (step < kWarmup) return static_cast<double>(step + 1) / kWarmup;
    return 0.5 * (1 + std::cos(M_PI * static_cast<double>(step - kWarmup) / (kSteps - kWarmup)));
  });

  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [inputs, targets] = batch(step);
    Tensor logits = model.forward(inputs);
    Tensor loss = nn::functional::cross_entropy(logits.flatten(0, 1), targets.flatten());
    const double expected_loss = expected.loss.at(step);
    EXPECT_NEAR(loss.item(), expected_loss, 1e-5 * std::abs(expected_loss));
    const auto& group = opt.param_groups()[0];
    EXPECT_DOUBLE_EQ(group.options ? group.options->get_lr() : opt.defaults().get_lr(),
                     expected.lr.at(step));
    opt.zero_grad();
    loss.backward();
    const double norm = optim::clip_grad_norm_(model.parameters(), 0.5);
    EXPECT_NEAR(norm, expected.grad_norm.at(step), 1e-5 * expected.grad_norm.at(step));
    opt.step();
    schedule.step();
  }

  const nn::NamedTensors params = model.named_parameters();
  ASSERT_EQ(params.size(), expected.params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [key, p] = params[i];
    const auto& [expected_key, e] = expected.params[i];
    SCOPED_TRACE(key);
    EXPECT_EQ(key, expected_key);
    const std::vector<float> v = p.to_vector<float>();
    double sum = 0, sumsq = 0, abs_sum = 0;
    for (float x : v) sum += x, sumsq += static_cast<double>(x) * x, abs_sum += std::abs(x);
    EXPECT_NEAR(sum, e.sum, 1e-5 * (abs_sum + 1));
    EXPECT_NEAR(sumsq, e.sumsq, 1e-5 * (sumsq + 1));
    for (const auto& [index, bits] : e.samples) {
      ASSERT_LT(index, static_cast<int64_t>(v.size()));
      EXPECT_NEAR(v[static_cast<std::size_t>(index)], std::bit_cast<float>(bits), 1e-5)
          << "element " << index;
    }
  }
}

}  // namespace
}  // namespace ember
