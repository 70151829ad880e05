// Optimizers, gradient clipping and schedulers against PyTorch 1.13
// (tests/fixtures/optim.txt from scripts/fixtures/gen_optim.py), state_dict round trips and
// resumed training equal to uninterrupted training bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "core/ember.h"
#include "core/ops/nn_ops.h"
#include "nn/loss.h"
#include "optim/optim.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::pattern;

// "opt sgd w1" -> (shape, values), from tests/fixtures/optim.txt ("opt/sgd/w1" lines, read by
// tests/fixtures.h; every value float64).
struct Line {
  Shape shape;
  std::vector<double> values;
};

const std::map<std::string, Line>& fixture() {
  static const std::map<std::string, Line> lines = [] {
    std::map<std::string, Line> out;
    const test::Fixture& f = test::fixture_file("optim.txt");
    for (const std::string& name : f.names()) {
      std::string key = name;
      std::replace(key.begin(), key.end(), '/', ' ');
      Tensor t = f.tensor(name);
      out[key] = Line{t.shape(), test::values(t)};
    }
    return out;
  }();
  return lines;
}

// The script's problem: a float64 MLP 4 -> 8 (tanh) -> 3, mse loss on 6 samples.
// (float32 for the configs ending in _f32.)
struct Mlp {
  explicit Mlp(DType dtype = DType::Float64) : dtype(dtype) {}
  DType dtype;
  Tensor w1 = (pattern({8, 4}, 1) * 0.5).to(dtype).requires_grad_();
  Tensor b1 = (pattern({8}, 2) * 0.1).to(dtype).requires_grad_();
  Tensor w2 = (pattern({3, 8}, 3) * 0.5).to(dtype).requires_grad_();
  Tensor b2 = (pattern({3}, 4) * 0.1).to(dtype).requires_grad_();
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor loss() const {
    Tensor h = tanh(linear(pattern({6, 4}, 5).to(dtype), w1, b1));
    return nn::functional::mse_loss(linear(h, w2, b2), pattern({6, 3}, 6).to(dtype));
  }
};

using namespace optim;

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Mlp& m) {
  auto p = m.params();
  if (name == "sgd") return std::make_unique<SGD>(p, SGDOptions(0.1));
  if (name == "sgd_momentum") return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9));
  if (name == "sgd_dampening")
    return std::make_unique<SGD>(p,
                                 SGDOptions(0.1).momentum(0.9).dampening(0.3).weight_decay(0.01));
  if (name == "sgd_nesterov")
    return std::make_unique<SGD>(p,
                                 SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  if (name == "sgd_maximize")
    return std::make_unique<SGD>(p, SGDOptions(0.01).momentum(0.5).maximize(true));
  if (name == "sgd_clip") return std::make_unique<SGD>(p, SGDOptions(0.5).momentum(0.9));
  if (name == "adam") return std::make_unique<Adam>(p, AdamOptions(1e-2));
  if (name == "adam_wd") return std::make_unique<Adam>(p, AdamOptions(1e-2).weight_decay(0.1));
  if (name == "adam_amsgrad")
    return std::make_unique<Adam>(p, AdamOptions(1e-2).betas({0.8, 0.9}).amsgrad(true));
  if (name == "adam_maximize") return std::make_unique<Adam>(p, AdamOptions(1e-3).maximize(true));
  if (name == "adamw") return std::make_unique<AdamW>(p, AdamWOptions(1e-2));
  if (name == "adamw_wd_betas")
    return std::make_unique<AdamW>(
        p, AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.95}).eps(1e-6));
  if (name == "adamw_amsgrad") return std::make_unique<AdamW>(p, AdamWOptions(1e-2).amsgrad(true));
  if (name == "adamw_groups") {
    std::vector<ParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{m.w1, m.w2},
                        std::make_unique<AdamWOptions>(AdamWOptions(5e-3).weight_decay(0.1)));
    groups.emplace_back(std::vector<Tensor>{m.b1, m.b2});
    return std::make_unique<AdamW>(std::move(groups), AdamWOptions(5e-3).weight_decay(0.0));
  }
  if (name == "rmsprop") return std::make_unique<RMSprop>(p, RMSpropOptions(1e-2));
  if (name == "rmsprop_centered")
    return std::make_unique<RMSprop>(
        p, RMSpropOptions(1e-2).centered(true).momentum(0.9).weight_decay(0.01));
  if (name == "rmsprop_maximize")
    return std::make_unique<RMSprop>(p, RMSpropOptions(1e-3).alpha(0.9).maximize(true));
  if (name == "adagrad") return std::make_unique<Adagrad>(p, AdagradOptions(0.1));
  if (name == "adagrad_decay")
    return std::make_unique<Adagrad>(
        p, AdagradOptions(0.1).lr_decay(0.1).weight_decay(0.01).initial_accumulator_value(0.1).eps(
               1e-8));
  if (name == "adagrad_maximize")
    return std::make_unique<Adagrad>(p, AdagradOptions(0.01).maximize(true));
  if (name == "adamw_f32") return std::make_unique<AdamW>(p, AdamWOptions(1e-2).weight_decay(0.1));
  if (name == "sgd_nesterov_f32")
    return std::make_unique<SGD>(p,
                                 SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  return nullptr;
}

// Every element within rel of the expected one; with by_scale, within rel of the largest
// expected magnitude (float32 runs: an element near 0 inherits the rounding noise of its
// neighbours, ~1e-8 absolute, whatever the optimizer does).
void expect_rel(const std::vector<double>& actual, const std::vector<double>& expected,
                double rel = 1e-6, bool by_scale = false) {
  ASSERT_EQ(actual.size(), expected.size());
  double scale = 0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double reference = by_scale ? scale : std::abs(expected[i]);
    EXPECT_LE(std::abs(actual[i] - expected[i]), rel * reference + 1e-15)
        << "element " << i << ": " << actual[i] << " vs " << expected[i];
  }
}

// 10 steps (the loss before each), as the script runs them.
std::vector<double> train(Optimizer& opt, const Mlp& m, const std::string& name, int steps = 10) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = m.loss();
    losses.push_back(loss.item());
    loss.backward();
    if (name == "sgd_clip") clip_grad_norm_(m.params(), 0.05);
    opt.step();
  }
  return losses;
}

TEST(Optim, TenStepsMatchPyTorch) {
  int configs = 0;
  for (const auto& [key, line] : fixture()) {
    if (!key.starts_with("opt ") || !key.ends_with(" loss")) continue;
    const std::string name = key.substr(4, key.size() - 9);
    SCOPED_TRACE(name);
    Mlp m(name.ends_with("_f32") ? DType::Float32 : DType::Float64);
    auto opt = make_optimizer(name, m);
    ASSERT_TRUE(opt) << "no optimizer for config " << name;
    // float64: 1e-10 relative per element (the same operations in the same order); float32:
    // 1e-6 relative to each tensor's largest value.
    const bool f32 = name.ends_with("_f32");
    const double rel = f32 ? 1e-6 : 1e-10;
    expect_rel(train(*opt, m, name), line.values, rel, f32);
    const std::vector<std::pair<std::string, Tensor>> params = {
        {"w1", m.w1}, {"b1", m.b1}, {"w2", m.w2}, {"b2", m.b2}};
    for (const auto& [pname, t] : params) {
      const Line& expected = fixture().at("opt " + name + " " + pname);
      EXPECT_EQ(t.shape(), expected.shape);
      expect_rel(test::values(t), expected.values, rel, f32);
    }
    ++configs;
  }
  EXPECT_EQ(configs, 22);
}

TEST(Optim, ClipGradNormMatchesPyTorch) {
  for (auto [label, p] : std::vector<std::pair<std::string, double>>{
           {"2", 2.0}, {"1", 1.0}, {"inf", kInfNorm}, {"3", 3.0}}) {
    SCOPED_TRACE(label);
    Mlp m;
    m.loss().backward();
    const std::vector<double>& expected = fixture().at("clip norm_" + label).values;
    const double total = clip_grad_norm_(m.params(), 0.1, p);
    EXPECT_NEAR(total, expected[0], 1e-12 * expected[0]);
    expect_rel(test::values(m.w1.grad()), {expected.begin() + 1, expected.end()}, 1e-12);
  }
}

TEST(Optim, ClipGradNormEdgeCases) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({1}).requires_grad_();
  EXPECT_EQ(clip_grad_norm_({a, b}, 1.0), 0.0);  // no gradients at all
  a.set_grad(tensor({3.0, 4.0}));
  EXPECT_NEAR(clip_grad_norm_({a, b}, 10.0), 5.0, 1e-6);  // b has none: skipped
  test::expect_values(a.grad(), {3.0, 4.0});              // under max_norm: unchanged
  a.set_grad(tensor({NAN, 1.0}));
  expect_error([&] { clip_grad_norm_({a}, 1.0, 2.0, true); }, "is non-finite");
  EXPECT_EQ(a.grad().at({1}), 1.0);  // nothing scaled by the refused call
  a.set_grad(tensor({-3.0, 0.5}));
  clip_grad_value_({a}, 1.0);
  test::expect_values(a.grad(), {-1.0, 0.5});
}

TEST(Optim, StepSkipsParametersWithoutGradAndZeroGrad) {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  AdamW opt({a, b}, AdamWOptions(0.1));
  a.set_grad(tensor({1.0, -1.0}));
  opt.step();
  EXPECT_FALSE(opt.state(a).empty());
  EXPECT_TRUE(opt.state(b).empty());  // no grad: not stepped, no state
  test::expect_values(b, {1.0, 1.0});
  EXPECT_EQ(opt.state(a).at("step").item(), 1.0);
  opt.zero_grad(false);
  test::expect_values(a.grad(), {0.0, 0.0});
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optim, ClipGradOfAnUndefinedParameterIsAnError) {
  Tensor a = ones({2}).requires_grad_();
  a.sum().backward();
  expect_error(
      [&] {
        clip_grad_norm_({a, Tensor()}, 1.0);
      },
      "clip_grad_norm_: parameter 1 is an undefined tensor");
  expect_error(
      [&] {
        clip_grad_value_({Tensor(), a}, 1.0);
      },
      "clip_grad_value_: parameter 0 is an undefined tensor");
}

TEST(Optim, ParamGroupsAndErrors) {
  Tensor a = ones({2}).requires_grad_(), b = ones({3}).requires_grad_();
  SGD opt({a}, SGDOptions(0.1));
  expect_error([&] { opt.add_param_group(ParamGroup({a})); },
               "some parameters appear in more than one parameter group");
  opt.add_param_group(ParamGroup({b}, std::make_unique<SGDOptions>(SGDOptions(0.5))));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[1].options->get_lr(), 0.5);
  expect_error([&] { SGD bad({a * 2.0}, SGDOptions(0.1)); }, "can't optimize a non-leaf Tensor");
  expect_error([&] { SGD bad({arange(3)}, SGDOptions(0.1)); }, "floating point");
  expect_error(
      [&] {
        Adam bad({a}, AdamOptions(0.1).betas({1.0, 0.9}));
      },
      "Adam: invalid beta parameter at index 0: 1");
  expect_error([&] { SGD bad({a}, SGDOptions(0.1).nesterov(true)); }, "nesterov");
  a.set_grad(ones({3}));
  expect_error([&] { opt.step(); }, "SGD: gradient float32 [3] does not fit parameter float32 [2]");
}

// Resumed training equals uninterrupted training, bit for bit, for every optimizer kind.
TEST(Optim, StateDictResumeIsBitForBit) {
  for (const char* name :
       {"sgd_nesterov", "adam_amsgrad", "adamw_groups", "rmsprop_centered", "adagrad_decay"}) {
    SCOPED_TRACE(name);
    Mlp straight;
    auto opt = make_optimizer(name, straight);
    train(*opt, straight, name, 10);

    Mlp first;
    auto opt1 = make_optimizer(name, first);
    train(*opt1, first, name, 4);
    OptimizerStateDict saved = opt1->state_dict();
    Mlp resumed;  // fresh parameters, then the values of `first`
    for (std::size_t i = 0; i < 4; ++i) {
      NoGradGuard no_grad;
      resumed.params()[i].copy_(first.params()[i]);
    }
    auto opt2 = make_optimizer(name, resumed);
    opt2->load_state_dict(saved);
    train(*opt2, resumed, name, 6);
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(equal(resumed.params()[i], straight.params()[i])) << "parameter " << i;
    }
  }
}

TEST(Optim, LoadStateDictRefusesMismatches) {
  Mlp m;
  Adam opt(m.params(), AdamOptions());
  train(opt, m, "adam", 1);
  OptimizerStateDict saved = opt.state_dict();
  Tensor other = ones({5}).requires_grad_();
  Adam small({other}, AdamOptions());
  expect_error([&] { small.load_state_dict(saved); }, "group 0 of the state dict has 4 parameters");
  saved.state[0]["exp_avg"] = zeros({2}, DType::Float64);
  Mlp m2;
  Adam opt2(m2.params(), AdamOptions());
  expect_error([&] { opt2.load_state_dict(saved); },
               "state 'exp_avg' of parameter 0 has shape [2]");
}

// ---- schedulers ----

std::vector<double> run_scheduler(const std::string& name) {
  Tensor p = zeros({1}).requires_grad_();
  SGD opt({p}, SGDOptions(0.1).momentum(0.9));
  std::unique_ptr<LRScheduler> sched;
  std::vector<std::unique_ptr<LRScheduler>> parts;
  std::unique_ptr<ReduceLROnPlateau> plateau;
  std::function<double(int64_t)> metric;
  if (name == "step") sched = std::make_unique<StepLR>(opt, 7, 0.5);
  if (name == "multistep")
    sched = std::make_unique<MultiStepLR>(opt, std::vector<int64_t>{10, 30, 30, 70}, 0.3);
  if (name == "exponential") sched = std::make_unique<ExponentialLR>(opt, 0.95);
  if (name == "lambda")
    sched = std::make_unique<LambdaLR>(opt, [](int64_t e) {
      return std::min(1.0, static_cast<double>(e + 1) / 10) *
             std::pow(0.5, static_cast<double>(e / 25));
    });
  if (name == "linear") sched = std::make_unique<LinearLR>(opt, 0.1, 1.0, 20);
  if (name == "cosine") sched = std::make_unique<CosineAnnealingLR>(opt, 30, 0.001);
  if (name.starts_with("onecycle")) {
    const bool three = name.starts_with("onecycle_linear3");
    OneCycleLROptions o(three ? 0.5 : 1.0, three ? 101 : 110);
    if (three) {
      o.anneal_strategy = "linear";
      o.three_phase = true;
      o.pct_start = 0.25;
    }
    sched = std::make_unique<OneCycleLR>(opt, o);
  }
  if (name == "sequential") {
    parts.push_back(std::make_unique<LinearLR>(opt, 0.01, 1.0, 10));
    parts.push_back(std::make_unique<CosineAnnealingLR>(opt, 90));
    sched = std::make_unique<SequentialLR>(
        opt, std::vector<LRScheduler*>{parts[0].get(), parts[1].get()}, std::vector<int64_t>{10});
  }
  if (name == "sequential_lambda") {
    parts.push_back(
        std::make_unique<LambdaLR>(opt, [](int64_t e) { return static_cast<double>(e + 1) / 5; }));
    parts.push_back(std::make_unique<ExponentialLR>(opt, 0.9));
    parts.push_back(std::make_unique<CosineAnnealingLR>(opt, 40, 0.01));
    sched = std::make_unique<SequentialLR>(
        opt, std::vector<LRScheduler*>{parts[0].get(), parts[1].get(), parts[2].get()},
        std::vector<int64_t>{5, 30});
  }
  if (name == "plateau") {
    ReduceLROnPlateauOptions o;
    o.factor = 0.5;
    o.patience = 3;
    o.cooldown = 2;
    o.threshold = 0.01;
    plateau = std::make_unique<ReduceLROnPlateau>(opt, o);
    metric = [](int64_t e) { return 1.0 / static_cast<double>(1 + e % 20); };
  }
  if (name == "plateau_max_abs") {
    ReduceLROnPlateauOptions o;
    o.mode = "max";
    o.factor = 0.3;
    o.patience = 2;
    o.threshold = 0.05;
    o.threshold_mode = "abs";
    o.min_lr = 1e-3;
    plateau = std::make_unique<ReduceLROnPlateau>(opt, o);
    metric = [](int64_t e) { return static_cast<double>(e % 7); };
  }
  EXPECT_TRUE(sched || plateau) << "no scheduler for " << name;
  const bool momentum = name.ends_with("_momentum");
  auto value = [&] {
    return momentum ? opt.param_groups()[0].options->to_map().at("momentum")
                    : opt.param_groups()[0].options->get_lr();
  };
  std::vector<double> out{value()};
  for (int64_t e = 0; e < 100; ++e) {
    opt.step();
    if (plateau) {
      plateau->step(metric(e));
    } else if (sched) {
      sched->step();
    }
    out.push_back(value());
  }
  return out;
}

TEST(Scheduler, HundredStepsMatchPyTorch) {
  int count = 0;
  for (const auto& [key, line] : fixture()) {
    if (!key.starts_with("sched ")) continue;
    std::string name = key.substr(6);
    SCOPED_TRACE(name);
    const std::string base = name.ends_with("_momentum") ? name.substr(0, name.size() - 9) : name;
    std::vector<double> lrs = run_scheduler(name == base ? name : base + "_momentum");
    ASSERT_EQ(lrs.size(), 101u);
    expect_rel(lrs, line.values, 1e-12);
    ++count;
  }
  EXPECT_EQ(count, 14);
}

TEST(Scheduler, StateDictResume) {
  Tensor p = zeros({1}).requires_grad_();
  SGD opt({p}, SGDOptions(0.1));
  LinearLR warmup(opt, 0.01, 1.0, 10);
  CosineAnnealingLR cosine(opt, 90);
  SequentialLR sched(opt, {&warmup, &cosine}, {10});
  for (int i = 0; i < 15; ++i) sched.step();
  SchedulerState saved = sched.state_dict();
  OptimizerStateDict saved_opt = opt.state_dict();
  std::vector<double> expected;
  for (int i = 0; i < 20; ++i) {
    sched.step();
    expected.push_back(opt.param_groups()[0].options->get_lr());
  }
  Tensor q = zeros({1}).requires_grad_();
  SGD opt2({q}, SGDOptions(0.1));
  LinearLR warmup2(opt2, 0.01, 1.0, 10);
  CosineAnnealingLR cosine2(opt2, 90);
  SequentialLR sched2(opt2, {&warmup2, &cosine2}, {10});
  opt2.load_state_dict(saved_opt);
  sched2.load_state_dict(saved);
  for (int i = 0; i < 20; ++i) {
    sched2.step();
    EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), expected[i]) << "step " << i;
  }
}

// Every update rule runs its elementwise loop on both threads for a large parameter (2^16+
// elements, kernels::parallel_ranges): the same bits at 1 and 2 threads, step after step.
TEST(Optim, LargeParametersGetTheSameUpdatesAtOneAndTwoThreads) {
  const int saved = get_num_threads();
  for (const char* name :
       {"sgd_nesterov", "adamw_wd_betas", "adam_amsgrad", "rmsprop_centered", "adagrad"}) {
    std::vector<float> results[2];
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      manual_seed(11);
      Tensor w = randn({300, 301}).requires_grad_();
      std::vector<Tensor> p{w};
      std::unique_ptr<Optimizer> opt;
      const std::string n = name;
      if (n == "sgd_nesterov")
        opt = std::make_unique<SGD>(
            p, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
      if (n == "adamw_wd_betas")
        opt = std::make_unique<AdamW>(p, AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.95}));
      if (n == "adam_amsgrad") opt = std::make_unique<Adam>(p, AdamOptions(1e-2).amsgrad(true));
      if (n == "rmsprop_centered")
        opt = std::make_unique<RMSprop>(p, RMSpropOptions(1e-2).centered(true).momentum(0.9));
      if (n == "adagrad") opt = std::make_unique<Adagrad>(p, AdagradOptions(0.1));
      for (int step = 0; step < 3; ++step) {
        opt->zero_grad();
        (w * w * w).sum().backward();
        clip_grad_value_(p, 50.0);
        opt->step();
      }
      results[threads - 1] = w.detach().to_vector<float>();
    }
    EXPECT_EQ(results[0], results[1]) << name;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace ember
