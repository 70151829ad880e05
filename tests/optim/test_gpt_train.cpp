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
#include "core/tensor/random.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "optim/optim.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

struct ParamExpectation {
  double sum = 0, sumsq = 0;
  std::vector<std::pair<int64_t, float>> samples;
};

struct Expected {
  std::map<int, float> loss;
  std::map<int, double> lr, grad_norm;
  std::vector<std::pair<std::string, ParamExpectation>> params;
};

// tests/fixtures/gpt_train.txt through tests/fixtures.h: "step/<i>/loss|lr|grad_norm" scalars;
// for each parameter, in order, "param/<key>" (sum, sum of squares) and "param/<key>/index",
// "param/<key>/value" (sampled elements).
Expected read_fixture() {
  Expected e;
  const test::Fixture& f = test::fixture_file("gpt_train.txt");
  for (const std::string& name : f.names()) {
    if (name.starts_with("step/")) {
      const std::size_t slash = name.find('/', 5);
      const int step = std::stoi(name.substr(5, slash - 5));
      const std::string what = name.substr(slash + 1);
      const Tensor t = f.tensor(name);
      if (what == "loss") {
        e.loss[step] = t.to_vector<float>()[0];
      } else {
        (what == "lr" ? e.lr : e.grad_norm)[step] = t.to_vector<double>()[0];
      }
    } else if (name.starts_with("param/") && !name.ends_with("/index") &&
               !name.ends_with("/value")) {
      ParamExpectation p;
      const std::vector<double> stats = f.tensor(name).to_vector<double>();
      p.sum = stats.at(0);
      p.sumsq = stats.at(1);
      const std::vector<int64_t> index = f.tensor(name + "/index").to_vector<int64_t>();
      const std::vector<float> value = f.tensor(name + "/value").to_vector<float>();
      for (std::size_t i = 0; i < index.size(); ++i) p.samples.emplace_back(index[i], value.at(i));
      e.params.emplace_back(name.substr(6), p);
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
    for (const auto& [index, value] : e.samples) {
      ASSERT_LT(index, static_cast<int64_t>(v.size()));
      EXPECT_NEAR(v[static_cast<std::size_t>(index)], value, 1e-5) << "element " << index;
    }
  }
}

}  // namespace
}  // namespace ember
