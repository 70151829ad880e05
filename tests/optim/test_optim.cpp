// Optimizers, gradient clipping and schedulers against PyTorch 1.13
// (tests/fixtures/optim.txt from scripts/fixtures/gen_optim.py), state_dict round trips and
// resumed training equal to uninterrupted training bit for bit; hostile options, parameter groups,
// state dicts, scheduler arguments and clipping values, each with PyTorch 1.13's behaviour as the
// reference (quoted where it is asserted) or a clear ember::Error where PyTorch raises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

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
using test::expect_values;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// A float32 parameter of ones.
Tensor param(const Shape& shape, DType dtype = DType::Float32) {
  return ones(shape, dtype).requires_grad_();
}

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

// Every order torch.nn.utils.clip_grad_norm_ takes, with PyTorch 1.13's totals and gradients
// (float32 gradients g = [3, 0, -4] and h = [0, 1], max_norm 1, unless a case says otherwise):
// 0 counts non-zero elements, then non-zero norms; a negative order of a gradient holding a 0 is
// 0; nan gives nan; the order is rounded to float first (1e-300 is 0, 1e300 is inf); a float32
// |g|^p that overflows makes the norm inf, as PyTorch's float kernel does.
TEST(Optim, ClipGradNormOfEveryOrderMatchesPyTorch) {
  const auto run = [](double p, std::vector<std::vector<double>> values, DType dtype,
                      bool error_if_nonfinite = false) {
    std::vector<Tensor> params;
    for (const auto& v : values) {
      Tensor t = param({static_cast<int64_t>(v.size())}, dtype);
      t.set_grad(from_vector(v, {static_cast<int64_t>(v.size())}, dtype));
      params.push_back(t);
    }
    const double total = clip_grad_norm_(params, 1.0, p, error_if_nonfinite);
    std::vector<std::vector<double>> grads;
    for (const Tensor& t : params) grads.push_back(t.grad().to_vector<double>());
    return std::make_pair(total, grads);
  };
  const std::vector<std::vector<double>> gh = {{3, 0, -4}, {0, 1}};
  const auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  // clip_grad_norm_([g, h], 1.0, p) for p = 0 and 1e-300: 2.0, g [1.4999992847442627, 0,
  // -1.9999990463256836], h [0, 0.4999997615814209].
  for (double p : {0.0, 1e-300, -1e-300}) {
    SCOPED_TRACE(p);
    auto [total, grads] = run(p, gh, DType::Float32);
    EXPECT_EQ(total, 2.0);
    EXPECT_EQ(grads[0], (std::vector<double>{f(1.4999992847442627), 0, f(-1.9999990463256836)}));
    EXPECT_EQ(grads[1], (std::vector<double>{0, f(0.4999997615814209)}));
  }
  // p = 0.5: 22.392305374145508.
  EXPECT_NEAR(run(0.5, gh, DType::Float32).first, 22.392305374145508, 4e-6);
  // p = inf and 1e300: 4.0, g [0.7499998211860657, 0, -0.9999997615814209].
  for (double p : {kInfNorm, 1e300}) {
    auto [total, grads] = run(p, gh, DType::Float32);
    EXPECT_EQ(total, 4.0);
    EXPECT_EQ(grads[0], (std::vector<double>{f(0.7499998211860657), 0, f(-0.9999997615814209)}));
  }
  // p = -1, -2, -0.5, -inf, -1e300: 0.0, nothing scaled.
  for (double p : {-1.0, -2.0, -0.5, -kInfNorm, -1e300}) {
    SCOPED_TRACE(p);
    auto [total, grads] = run(p, gh, DType::Float32, true);
    EXPECT_EQ(total, 0.0);
    EXPECT_EQ(grads[0], (std::vector<double>{3, 0, -4}));
  }
  // p = nan: nan, every gradient nan; but [1.0] has norm pow(1, nan) = 1.
  {
    auto [total, grads] = run(kNaN, gh, DType::Float32);
    EXPECT_TRUE(std::isnan(total));
    for (double v : grads[1]) EXPECT_TRUE(std::isnan(v));
    EXPECT_EQ(run(kNaN, {{1.0}}, DType::Float32).first, 1.0);
    expect_error([&] { run(kNaN, gh, DType::Float32, true); }, "is non-finite (nan)");
  }
  // p = -inf and -1 of [nan, 1]: nan. p = 0 of [nan, 1] with error_if_nonfinite: 1.0 (nan is not
  // 0), g [nan, 0.9999990463256836].
  EXPECT_TRUE(std::isnan(run(-kInfNorm, {{kNaN, 1}}, DType::Float32).first));
  EXPECT_TRUE(std::isnan(run(-1.0, {{kNaN, 1}}, DType::Float32).first));
  {
    auto [total, grads] = run(0.0, {{kNaN, 1}}, DType::Float32, true);
    EXPECT_EQ(total, 1.0);
    EXPECT_EQ(grads[0][1], f(0.9999990463256836));
  }
  // float32 [1e13, 1] with p = 3: inf (1e39 overflows float), g [0, 0]; with
  // error_if_nonfinite an error. float64: 9999999999999.967.
  {
    auto [total, grads] = run(3.0, {{1e13, 1}}, DType::Float32);
    EXPECT_EQ(total, kInf);
    EXPECT_EQ(grads[0], (std::vector<double>{0, 0}));
    expect_error([&] { run(3.0, {{1e13, 1}}, DType::Float32, true); }, "is non-finite (inf)");
    EXPECT_NEAR(run(3.0, {{1e13, 1}}, DType::Float64).first, 9999999999999.967, 1e-2);
  }
  // float32 [1e-30, 1e-30] with p = -2: 0.0 (1e60 overflows float); float64:
  // 7.071067811865476e-31.
  EXPECT_EQ(run(-2.0, {{1e-30, 1e-30}}, DType::Float32).first, 0.0);
  EXPECT_NEAR(run(-2.0, {{1e-30, 1e-30}}, DType::Float64).first, 7.071067811865476e-31, 1e-45);
  // float64 [3, 0, -4] with p = 0.001: 3.711730893864494e+301.
  EXPECT_NEAR(run(0.001, {{3, 0, -4}}, DType::Float64).first, 3.711730893864494e+301, 1e289);
  // p = 2.0000001 rounds to 2: [3, 0, -4], [2] give 5.385164737701416.
  EXPECT_EQ(run(2.0000001, {{3, 0, -4}, {2}}, DType::Float32).first, f(5.385164737701416));
  // A gradient with no elements: norm 0 for every order but inf, where PyTorch's
  // g.abs().max() refuses it ("max(): Expected reduction dim to be specified for
  // input.numel() == 0").
  for (double p : {0.0, 2.0, -1.0, -kInfNorm, 1e300}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(run(p, {{}}, DType::Float32).first, 0.0);
  }
  EXPECT_EQ(run(-kInfNorm, {{}, {1}}, DType::Float32).first, 0.0);
  expect_error(
      [&] {
        run(kInfNorm, {{}, {1}}, DType::Float32);
      },
      "clip_grad_norm_: norm_type inf takes the largest |element| of each gradient, and "
      "gradient 0 (shape [0]) has no elements");
}

// clip_grad_value_ clamps a gradient of any layout in place, as PyTorch's clamp_; a gradient
// whose elements share memory (an expand) is an Error, as clamp_'s:
//   p = torch.zeros(2, 2, requires_grad=True); p.grad = torch.tensor([[3., 0.], [4., -5.]]).t()
//   torch.nn.utils.clip_grad_value_([p], 1.0)   # p.grad: [[1, 1], [0, -1]], still strided
TEST(Optim, ClipGradValueClampsAStridedGradientInPlace) {
  Tensor p = zeros({2, 2}).requires_grad_(), q = zeros({2}).requires_grad_();
  Tensor buffer = tensor({{3.0, 0.0}, {4.0, -5.0}});
  p.set_grad(buffer.t());
  q.set_grad(tensor({2.0, -0.5}));
  clip_grad_value_({p, q}, 1.0);
  Tensor g = p.grad();
  EXPECT_EQ(g.strides(), (Shape{1, 2}));
  EXPECT_EQ(g.storage(), buffer.storage());
  test::expect_values(g, {1.0, 1.0, 0.0, -1.0});
  test::expect_values(buffer, {1.0, 0.0, 1.0, -1.0});
  test::expect_values(q.grad(), {1.0, -0.5});

  Tensor r = zeros({2}).requires_grad_();
  r.set_grad(tensor({3.0}).expand({2}));
  expect_error([&] { clip_grad_value_({r}, 1.0); },
               "more than one element of the written-to tensor refers to a single memory location");
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

// zero_grad(set_to_none=false) after a backward with create_graph leaves a zero gradient with
// no graph, as PyTorch's (which detaches it first); the next backward adds plain values.
//   x = torch.tensor([1., 2.], requires_grad=True); opt = torch.optim.SGD([x], lr=0.1)
//   (x * x * x).sum().backward(create_graph=True); opt.zero_grad(set_to_none=False)
//   # x.grad: [0, 0], grad_fn None, requires_grad False
//   (x * 2).sum().backward()   # x.grad: [2, 2], grad_fn None
TEST(Optim, ZeroGradDetachesAGradientThatHasAGraph) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  SGD opt({x}, SGDOptions(0.1));
  (x * x * x).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  ASSERT_NE(x.grad().grad_fn(), nullptr);
  const Tensor before = x.grad();
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(x.grad().grad_fn(), nullptr);
  EXPECT_FALSE(x.grad().requires_grad());
  EXPECT_EQ(x.grad().storage(), before.storage());
  test::expect_values(x.grad(), {0.0, 0.0});
  (x * 2.0).sum().backward();
  EXPECT_EQ(x.grad().grad_fn(), nullptr);
  EXPECT_FALSE(x.grad().requires_grad());
  test::expect_values(x.grad(), {2.0, 2.0});
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
  // A gradient that does not fit is refused when it is set (PyTorch: "assigned grad has data of
  // a different size"), so the optimizer never sees one.
  expect_error([&] { a.set_grad(ones({3})); },
               "set_grad: assigned grad has data of a different size");
}

// A step that refuses one parameter updates none: every parameter is checked first.
TEST(Optim, ARefusedStepLeavesEveryParameterAsItWas) {
  Tensor p = from_vector({1.0, 2.0}, {2}).requires_grad_();
  Tensor q = zeros({3, 2}).t().requires_grad_();  // not contiguous
  SGD opt({p, q}, SGDOptions(0.1));
  (p.sum() + q.sum()).backward();
  expect_error([&] { opt.step(); }, "SGD: parameters must be contiguous");
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

// A gradient that views its own parameter or another one: the results of PyTorch 1.13, and its
// Error where plain SGD adds a partially overlapping gradient into the parameter in place.
//   p = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True); q = ... [[5., 6.], [7., 8.]]
//   two steps, each after p.grad = <g(p)>; q.grad = <g(q)>
TEST(Optim, AGradientThatViewsAParameterStepsAsPyTorchOrIsAnError) {
  struct Run {
    std::vector<float> p, q;
  };
  auto run = [](auto make, int mode) {
    Tensor p = tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_();
    Tensor q = tensor({{5.0, 6.0}, {7.0, 8.0}}).requires_grad_();
    auto opt = make(std::vector<Tensor>{p, q});
    for (int s = 0; s < 2; ++s) {
      // mode 0: p.grad = p.detach(); 1: p.grad = p.detach().t(); 2: p.grad = q.detach() and
      // q.grad = p.detach()
      const Tensor gp = mode == 0 ? p.detach() : mode == 1 ? p.detach().t() : q.detach();
      const Tensor gq = mode == 0 ? q.detach() : mode == 1 ? q.detach().t() : p.detach();
      p.set_grad(gp);
      q.set_grad(gq);
      opt.step();
    }
    return Run{p.detach().contiguous().to_vector<float>(),
               q.detach().contiguous().to_vector<float>()};
  };
  auto sgd = [](std::vector<Tensor> ps) { return SGD(ps, SGDOptions(0.1)); };
  auto sgd_momentum = [](std::vector<Tensor> ps) {
    return SGD(ps, SGDOptions(0.1).momentum(0.9).weight_decay(0.1));
  };
  auto adam = [](std::vector<Tensor> ps) { return Adam(ps, AdamOptions(0.1)); };
  // SGD(lr=0.1), p.grad = p.detach() -> p [0.81, 1.62, 2.43, 3.24]
  EXPECT_EQ(run(sgd, 0).p, (std::vector<float>{0.81f, 1.62f, 2.43f, 3.24f}));
  // SGD(lr=0.1), p.grad = p.detach().t() -> RuntimeError: unsupported operation: some elements
  // of the input tensor and the written-to tensor refer to a single memory location
  Tensor p = tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_();
  SGD plain({p}, SGDOptions(0.1));
  p.set_grad(p.detach().t());
  expect_error([&] { plain.step(); }, "SGD: unsupported operation: some elements of the input");
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  // SGD(lr=0.1, momentum=0.9, weight_decay=0.1), .t() -> p [0.6931, 1.0982, 2.3673, 2.7724]
  EXPECT_EQ(run(sgd_momentum, 1).p,
            (std::vector<float>{0.693099976f, 1.09819996f, 2.36730003f, 2.7723999f}));
  // SGD(lr=0.1), each other's -> p [0.005, 0.814, 1.623, 2.432], q [4.9495, 5.7786, 6.6077, 7.4368]
  const Run crossed = run(sgd, 2);
  EXPECT_EQ(crossed.p,
            (std::vector<float>{0.00500001153f, 0.813999951f, 1.62299991f, 2.43200016f}));
  EXPECT_EQ(crossed.q, (std::vector<float>{4.94949961f, 5.77860022f, 6.60769987f, 7.4368f}));
  // Adam(lr=0.1), .t() -> p [0.800412238, 1.80010271, 2.80016661, 3.8000741]
  EXPECT_EQ(run(adam, 1).p,
            (std::vector<float>{0.800412238f, 1.80010271f, 2.80016661f, 3.8000741f}));
  // Adam(lr=0.1), each other's -> q [4.80047846, 5.80017757, 6.800107, 7.80007601]
  EXPECT_EQ(run(adam, 2).q, (std::vector<float>{4.80047846f, 5.80017757f, 6.800107f, 7.80007601f}));
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

// state_dict() copies the state (a later step leaves it as it was); state_dict_shared() hands
// out the optimizer's own tensors (what a checkpoint streams to its file), the same values.
TEST(Optim, StateDictCopiesAndStateDictSharedShares) {
  Mlp m;
  auto opt = make_optimizer("adam_amsgrad", m);
  train(*opt, m, "adam_amsgrad", 2);
  const OptimizerStateDict copied = opt->state_dict(), shared = opt->state_dict_shared();
  ASSERT_EQ(copied.state.size(), shared.state.size());
  ASSERT_FALSE(shared.state.empty());
  for (const auto& [index, entries] : shared.state) {
    const ParamState& own = opt->state(m.params()[static_cast<std::size_t>(index)]);
    for (const auto& [key, t] : entries) {
      SCOPED_TRACE(key);
      EXPECT_EQ(t.storage(), own.at(key).storage());
      EXPECT_NE(copied.state.at(index).at(key).storage(), own.at(key).storage());
      EXPECT_TRUE(equal(copied.state.at(index).at(key), t));
    }
  }
  EXPECT_EQ(copied.param_groups.size(), shared.param_groups.size());
  EXPECT_EQ(copied.param_groups[0].options, shared.param_groups[0].options);
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
    // Bit for bit (lr_scheduler.h: PyTorch's chainable forms, operation for operation).
    for (std::size_t i = 0; i < lrs.size(); ++i) {
      EXPECT_EQ(lrs[i], line.values[i]) << "epoch " << i;
    }
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

// A scheduler whose optimizer gained a group after it was built (PyTorch zips the lists and
// silently ignores the new group) is an Error.
TEST(Scheduler, EverySchedulerRefusesGroupsAddedAfterIt) {
  auto check_scheduler = [](const char* what, auto make) {
    SCOPED_TRACE(what);
    SGD opt({param({2})}, SGDOptions(0.1).momentum(0.9));
    auto sched = make(opt);
    opt.add_param_group(ParamGroup({param({1})}));
    expect_error([&] { sched->step(); },
                 "the optimizer has 2 parameter groups, the scheduler was built for 1");
    expect_error([&] { sched->step(int64_t{4}); }, "the scheduler was built for 1");
  };
  check_scheduler("LambdaLR", [](Optimizer& o) {
    return std::make_unique<LambdaLR>(o, [](int64_t e) { return 1.0 / (e + 1); });
  });
  check_scheduler("StepLR", [](Optimizer& o) { return std::make_unique<StepLR>(o, 2); });
  check_scheduler("MultiStepLR", [](Optimizer& o) {
    return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{1});
  });
  check_scheduler("ExponentialLR",
                  [](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.9); });
  check_scheduler("LinearLR", [](Optimizer& o) { return std::make_unique<LinearLR>(o); });
  check_scheduler("CosineAnnealingLR",
                  [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 10); });
  check_scheduler("OneCycleLR", [](Optimizer& o) {
    return std::make_unique<OneCycleLR>(o, OneCycleLROptions(1.0, 10));
  });
  {
    SGD opt({param({2})}, SGDOptions(0.1));
    LinearLR a(opt);
    CosineAnnealingLR b(opt, 5);
    SequentialLR seq(opt, {&a, &b}, {2});
    opt.add_param_group(ParamGroup({param({1})}));
    expect_error([&] { seq.step(); }, "SequentialLR::step: the optimizer has 2 parameter groups");
  }
  // Built after the groups are added, every scheduler covers them all.
  SGD opt({param({2})}, SGDOptions(1.0));
  opt.add_param_group(ParamGroup({param({1})}, std::make_unique<SGDOptions>(2.0)));
  CosineAnnealingLR cosine(opt, 2);
  cosine.step();
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].options->get_lr(), 1.0);
}

// Schedulers do PyTorch's arithmetic (floor division) and refuse what raises ZeroDivisionError
// there.
TEST(Scheduler, StepLRWithANegativeEpochFloors) {
  SGD opt({param({1})}, SGDOptions(1.0));
  StepLR sched(opt, 2, 0.5);
  sched.step(int64_t{-3});
  // PyTorch 1.13: 4.0 (0.5 ** (-3 // 2) = 0.5 ** -2)
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 4.0);
  sched.step(int64_t{-4});
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 4.0);
  sched.step(int64_t{5});
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 0.25);
}

// Epochs and periods at the int64 limits: Python's floor division and modulo without an
// intermediate sum that overflows, and periods that do not fit refused.
TEST(Scheduler, EpochsAtTheLimits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  SGD opt({param({1})}, SGDOptions(1.0));
  StepLR step_lr(opt, 2, 0.5);
  step_lr.step(kMin);  // 0.5 ** (kMin // 2) = 0.5 ** -2^62: inf, as in Python
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), std::numeric_limits<double>::infinity());
  StepLR huge_step(opt, kMax, 0.5);
  huge_step.step(kMin);  // kMin // kMax = -2
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 4.0);
  huge_step.step(kMax - 1);  // 0
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 1.0);
  huge_step.step();  // the recursive form at last_epoch kMax: one more decay
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 0.5);
  EXPECT_NE(test::error_of([&] { huge_step.step(); }).find("cannot be advanced"),
            std::string::npos);
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, kMin}) {
    EXPECT_NE(test::error_of([&] { StepLR(opt, bad); }).find("step_size must be positive"),
              std::string::npos);
  }

  // CosineAnnealingLR's period is 2 * T_max.
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, kMin, kMax, kMax / 2 + 1}) {
    EXPECT_EQ(test::error_of([&] { CosineAnnealingLR(opt, bad); }),
              "CosineAnnealingLR: T_max must be in [1, INT64_MAX / 2] (its period 2 * T_max must "
              "fit in int64), got " +
                  std::to_string(bad));
  }
  SGD opt2({param({1})}, SGDOptions(1.0));
  CosineAnnealingLR cosine(opt2, kMax / 2);
  for (const int64_t epoch : {kMin, kMin + 1, int64_t{-1}, kMax - 1}) {
    cosine.step(epoch);
    cosine.step();  // the recursive form at epoch + 1
    EXPECT_TRUE(std::isfinite(opt2.param_groups()[0].options->get_lr())) << epoch;
  }
  SGD opt3({param({1})}, SGDOptions(1.0));
  // T_max 1: the recursive form adds (base_lr - eta_min) (1 - cos(pi)) / 2 = 1 at every even epoch
  // ((epoch - 1 - T_max) % (2 T_max) == 0), also next to INT64_MIN.
  CosineAnnealingLR period_two(opt3, 1);
  period_two.step(kMin + 1);
  const double before = opt3.param_groups()[0].options->get_lr();
  period_two.step();  // kMin + 2
  EXPECT_EQ(opt3.param_groups()[0].options->get_lr(), before + 1.0);

  // OneCycleLR past its end names the step count, even at INT64_MAX.
  SGD opt4({param({1})}, SGDOptions(1.0).momentum(0.9));
  OneCycleLR one_cycle(opt4, OneCycleLROptions(0.1, 10));
  EXPECT_EQ(test::error_of([&] { one_cycle.step(kMax); }),
            "OneCycleLR: tried to step 9223372036854775808 times. The specified number of total "
            "steps is 10");
}

TEST(Scheduler, OneCycleLRRefusesWhatPyTorchDividesByZero) {
  auto make = [](OneCycleLROptions o) {
    SGD opt({param({1})}, SGDOptions(1.0).momentum(0.9));
    OneCycleLR sched(opt, o);
    for (int64_t i = 1; i < o.total_steps; ++i) sched.step();
    return opt.param_groups()[0].options->get_lr();
  };
  OneCycleLROptions degenerate(0.1, 1);
  degenerate.pct_start = 1.0;
  expect_error([&] { make(degenerate); },
               "OneCycleLR: phase 1 of the schedule has zero length at step 0 (total_steps 1, "
               "pct_start 1): float division by zero");
  OneCycleLROptions three(0.1, 2);
  three.pct_start = 0.5;
  three.three_phase = true;
  expect_error([&] { make(three); }, "zero length");
  OneCycleLROptions div(0.1, 10);
  div.div_factor = 0;
  expect_error([&] { make(div); }, "OneCycleLR: div_factor must not be 0");
  OneCycleLROptions final_div(0.1, 10);
  final_div.final_div_factor = 0;
  expect_error([&] { make(final_div); }, "OneCycleLR: final_div_factor must not be 0");
  // total_steps 1 with the default pct_start is fine: PyTorch 1.13 gives [4e-07].
  EXPECT_DOUBLE_EQ(make(OneCycleLROptions(0.1, 1)), 4e-07);
}

TEST(Scheduler, OneCycleLRWithoutItsGroupEntriesIsAnError) {
  SGD opt({param({1})}, SGDOptions(1.0).momentum(0.9));
  OneCycleLR sched(opt, OneCycleLROptions(0.1, 10));
  opt.param_groups()[0].extra.erase("max_lr");
  expect_error([&] { sched.step(); }, "OneCycleLR: a parameter group has no 'max_lr' entry");
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

// ---- hostile input: parameter groups, options, state dicts, set_grad, clipping ----

// ParamGroup copies and moves keep the entries a scheduler wrote.
TEST(Optim, ParamGroupCopiesAndMovesKeepEverything) {
  ParamGroup g({param({2})}, std::make_unique<SGDOptions>(0.5));
  g.extra["initial_lr"] = 0.5;
  g.extra["max_lr"] = 2.0;
  ParamGroup copy(g);
  EXPECT_EQ(copy.extra, g.extra);
  EXPECT_EQ(copy.options->get_lr(), 0.5);
  ParamGroup assigned({});
  assigned = g;
  EXPECT_EQ(assigned.extra, g.extra);
  ParamGroup moved(std::move(copy));
  EXPECT_EQ(moved.extra.at("max_lr"), 2.0);
  std::vector<ParamGroup> groups;
  for (int i = 0; i < 9; ++i) groups.push_back(g);  // reallocations move the groups
  for (const ParamGroup& each : groups) EXPECT_EQ(each.extra.at("initial_lr"), 0.5);

  // add_param_group grows the optimizer's vector: the entries a scheduler wrote stay.
  SGD opt({param({2})}, SGDOptions(0.1).momentum(0.9));
  OneCycleLR sched(opt, OneCycleLROptions(1.0, 10));
  for (int i = 0; i < 3; ++i) opt.add_param_group(ParamGroup({param({1})}));
  EXPECT_EQ(opt.param_groups()[0].extra.at("max_lr"), 1.0);
  EXPECT_EQ(opt.param_groups()[0].extra.at("initial_lr"), 1.0 / 25);
}

// A group with another optimizer's options: PyTorch reads the options both have by name and uses
// its own defaults for the rest.
TEST(Optim, GroupOptionsOfAnotherOptimizerAreReadByName) {
  Tensor a = param({2}), b = param({2});
  std::vector<ParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});
  groups.emplace_back(std::vector<Tensor>{b},
                      std::make_unique<AdamOptions>(AdamOptions(0.5).weight_decay(0.25)));
  SGD opt(groups, SGDOptions(0.1).momentum(0.9));
  const auto& options = dynamic_cast<const SGDOptions&>(*opt.param_groups()[1].options);
  EXPECT_EQ(options.lr(), 0.5);                             // the group's lr
  EXPECT_EQ(options.weight_decay(), 0.25);                  // and weight decay
  EXPECT_EQ(options.momentum(), 0.9);                       // SGD's default for what Adam has not
  EXPECT_EQ(opt.param_groups()[1].extra.at("beta1"), 0.9);  // kept in the group, as PyTorch
  a.set_grad(ones({2}));
  b.set_grad(ones({2}));
  opt.step();
  // b - 0.5 * (1 + 0.25 * 1) (PyTorch: param.add_(d_p, alpha=-lr), d_p = grad + wd * param)
  expect_values(b, {0.375, 0.375});
}

// Every option of every optimizer is validated, with PyTorch's ValueError messages.
TEST(Optim, EveryOptimizerValidatesEveryOption) {
  struct Case {
    const char* error;
    std::function<void(std::vector<Tensor>)> make;
  };
  const std::vector<Case> cases = {
      {"SGD: invalid learning rate: -1", [](auto p) { SGD(p, SGDOptions(-1)); }},
      {"SGD: invalid momentum value: -0.1", [](auto p) { SGD(p, SGDOptions(0.1).momentum(-0.1)); }},
      {"SGD: invalid weight_decay value: -1",
       [](auto p) { SGD(p, SGDOptions(0.1).weight_decay(-1)); }},
      {"SGD: nesterov momentum requires", [](auto p) { SGD(p, SGDOptions(0.1).nesterov(true)); }},
      {"Adam: invalid learning rate: nan", [](auto p) { Adam(p, AdamOptions(kNaN)); }},
      {"Adam: invalid epsilon value: -1", [](auto p) { Adam(p, AdamOptions().eps(-1)); }},
      {"Adam: invalid beta parameter at index 1: 1",
       [](auto p) {
         Adam(p, AdamOptions().betas({0.9, 1.0}));
       }},
      {"Adam: invalid weight_decay value: -1",
       [](auto p) { Adam(p, AdamOptions().weight_decay(-1)); }},
      {"AdamW: invalid beta parameter at index 0: -0.5",
       [](auto p) {
         AdamW(p, AdamWOptions().betas({-0.5, 0.9}));
       }},
      {"AdamW: invalid epsilon value: -1", [](auto p) { AdamW(p, AdamWOptions().eps(-1)); }},
      {"RMSprop: invalid epsilon value: -1", [](auto p) { RMSprop(p, RMSpropOptions().eps(-1)); }},
      {"RMSprop: invalid momentum value: -1",
       [](auto p) { RMSprop(p, RMSpropOptions().momentum(-1)); }},
      {"RMSprop: invalid weight_decay value: -1",
       [](auto p) { RMSprop(p, RMSpropOptions().weight_decay(-1)); }},
      {"RMSprop: invalid alpha value: -1", [](auto p) { RMSprop(p, RMSpropOptions().alpha(-1)); }},
      {"Adagrad: invalid epsilon value: -1", [](auto p) { Adagrad(p, AdagradOptions().eps(-1)); }},
      {"Adagrad: invalid weight_decay value: -1",
       [](auto p) { Adagrad(p, AdagradOptions().weight_decay(-1)); }},
      {"Adagrad: invalid lr_decay value: -1",
       [](auto p) { Adagrad(p, AdagradOptions().lr_decay(-1)); }},
      {"Adagrad: invalid initial_accumulator_value value: -1",
       [](auto p) { Adagrad(p, AdagradOptions().initial_accumulator_value(-1)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    expect_error([&] { c.make({param({2})}); }, c.error);
  }
  // A group's own options are checked too, at construction and in add_param_group.
  std::vector<ParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{param({1})},
                      std::make_unique<RMSpropOptions>(RMSpropOptions().eps(-1)));
  expect_error([&] { RMSprop(groups, RMSpropOptions()); }, "RMSprop: invalid epsilon value: -1");
  Adagrad adagrad({param({1})}, AdagradOptions());
  expect_error(
      [&] {
        adagrad.add_param_group(
            ParamGroup({param({1})}, std::make_unique<AdagradOptions>(AdagradOptions().eps(-1))));
      },
      "Adagrad: invalid epsilon value: -1");
  EXPECT_EQ(adagrad.param_groups().size(), 1u);
}

TEST(Optim, EmptyAndDuplicateParameters) {
  expect_error([] { SGD(std::vector<Tensor>{}, SGDOptions(0.1)); },
               "SGD: optimizer got an empty parameter list");
  expect_error([] { Adam(std::vector<Tensor>{}, AdamOptions()); },
               "Adam: optimizer got an empty parameter list");
  expect_error([] { AdamW(std::vector<ParamGroup>{}, AdamWOptions()); },
               "AdamW: optimizer got an empty parameter list");
  // A group with no parameters is allowed (PyTorch allows {'params': []}).
  SGD opt(std::vector<ParamGroup>{ParamGroup({})}, SGDOptions(0.1));
  Tensor p = param({3});
  expect_error(
      [&] {
        RMSprop({p, p}, RMSpropOptions());
      },
      "the parameter group lists the same parameter twice (at 0 and 1, shape [3])");
  Adagrad adagrad({p}, AdagradOptions());
  expect_error([&] { adagrad.add_param_group(ParamGroup({p})); },
               "Adagrad: some parameters appear in more than one parameter group");
}

// A loaded "step" keeps its dtype and shape, as PyTorch's load_state_dict (which casts every
// other state tensor to the parameter's dtype): PyTorch 1.13's Adam saves a float32 0-d step,
// which a run under the default dtype float64 must not turn into a float64 one.
TEST(Optim, LoadStateDictKeepsTheStepsDtype) {
  Tensor p = ones({3}).requires_grad_(true);
  const std::vector<Tensor> params{p};
  Adam first(params, AdamOptions());
  p.set_grad(ones({3}));
  first.step();
  OptimizerStateDict saved = first.state_dict();
  ASSERT_EQ(saved.state.at(0).at("step").dtype(), DType::Float32);

  DefaultDtypeGuard float64(DType::Float64);
  Adam second(params, AdamOptions());
  second.load_state_dict(saved);
  EXPECT_EQ(second.state(p).at("step").dtype(), DType::Float32);
  EXPECT_EQ(second.state(p).at("step").item(), 1.0);
  second.step();
  EXPECT_EQ(second.state(p).at("step").dtype(), DType::Float32);
  EXPECT_EQ(second.state(p).at("step").item(), 2.0);

  // A float64 step of shape [1] stays both (PyTorch: tensor([7.], dtype=torch.float64)).
  saved.state.at(0)["step"] = full({1}, 7.0, DType::Float64);
  DefaultDtypeGuard float32(DType::Float32);
  Adam third(params, AdamOptions());
  third.load_state_dict(saved);
  EXPECT_EQ(third.state(p).at("step").dtype(), DType::Float64);
  EXPECT_EQ(third.state(p).at("step").shape(), (Shape{1}));
  third.step();
  EXPECT_EQ(third.state(p).at("step").item(), 8.0);
  // The loaded step is a copy: the state dict's tensor is left as it was.
  EXPECT_EQ(saved.state.at(0).at("step").item(), 7.0);
}

// State dicts: missing or unknown state, a step that is not a count, an integer moment.
TEST(Optim, LoadStateDictChecksEveryStateEntry) {
  auto trained = [](auto& opt, Tensor& p) {
    p.set_grad(full(p.shape(), 0.5));
    opt.step();
    return opt.state_dict();
  };
  Tensor p = param({2});
  Adam adam({p}, AdamOptions().amsgrad(true));
  const OptimizerStateDict good = trained(adam, p);

  OptimizerStateDict missing = good;
  missing.state[0].erase("exp_avg");
  expect_error([&] { adam.load_state_dict(missing); },
               "the state of parameter 0 has no 'exp_avg', which Adam needs");
  OptimizerStateDict no_max = good;
  no_max.state[0].erase("max_exp_avg_sq");
  expect_error([&] { adam.load_state_dict(no_max); }, "has no 'max_exp_avg_sq'");
  OptimizerStateDict unknown = good;
  unknown.state[0]["momentum_buffer"] = zeros({2});
  expect_error([&] { adam.load_state_dict(unknown); },
               "unexpected state 'momentum_buffer' of parameter 0 for Adam");
  OptimizerStateDict fraction = good;
  fraction.state[0]["step"] = scalar_tensor(2.5);
  expect_error([&] { adam.load_state_dict(fraction); },
               "state 'step' of parameter 0 must be a whole number >= 0, got 2.5");
  OptimizerStateDict negative = good;
  negative.state[0]["step"] = scalar_tensor(-1);
  expect_error([&] { adam.load_state_dict(negative); }, "must be a whole number >= 0, got -1");
  OptimizerStateDict vector_step = good;
  vector_step.state[0]["step"] = ones({3});
  expect_error([&] { adam.load_state_dict(vector_step); },
               "state 'step' of parameter 0 must hold one number, got shape [3]");
  OptimizerStateDict int_moment = good;
  int_moment.state[0]["exp_avg"] = zeros({2}, DType::Int64);
  expect_error([&] { adam.load_state_dict(int_moment); },
               "state 'exp_avg' of parameter 0 is int64; expected a floating point tensor");
  OptimizerStateDict bad_option = good;
  bad_option.param_groups[0].options["beta2"] = 1.5;
  expect_error([&] { adam.load_state_dict(bad_option); },
               "group 0 of the state dict: Adam: invalid beta parameter at index 1: 1.5");
  OptimizerStateDict twice = good;
  twice.param_groups[0].params = {0};
  twice.param_groups.push_back(twice.param_groups[0]);
  // (two groups in the dict, one in the optimizer)
  expect_error([&] { adam.load_state_dict(twice); }, "the state dict has 2 parameter groups");

  // Nothing was changed by the refused loads: the next step is the one after `good`.
  const OptimizerStateDict now = adam.state_dict();
  EXPECT_EQ(now.state.at(0).at("step").item(), 1.0);
  EXPECT_TRUE(equal(now.state.at(0).at("exp_avg"), good.state.at(0).at("exp_avg")));

  // Each optimizer's required keys.
  Tensor q = param({2});
  RMSprop rms({q}, RMSpropOptions().momentum(0.5).centered(true));
  OptimizerStateDict r = trained(rms, q);
  r.state[0].erase("grad_avg");
  expect_error([&] { rms.load_state_dict(r); }, "has no 'grad_avg', which RMSprop needs");
  Tensor s = param({2});
  Adagrad adagrad({s}, AdagradOptions());
  OptimizerStateDict a = trained(adagrad, s);
  a.state[0].erase("sum");
  expect_error([&] { adagrad.load_state_dict(a); }, "has no 'sum', which Adagrad needs");
  // SGD without its momentum buffer starts it again, as PyTorch's (momentum_buffer None).
  Tensor t = param({2});
  SGD sgd({t}, SGDOptions(0.1).momentum(0.9));
  OptimizerStateDict m = trained(sgd, t);
  m.state[0].erase("momentum_buffer");
  sgd.load_state_dict(m);
  // A float64 moment for a float32 parameter is converted; the step is kept as it was saved
  // (PyTorch casts every state tensor but "step").
  OptimizerStateDict f64 = good;
  f64.state[0]["exp_avg"] = f64.state[0]["exp_avg"].to(DType::Float64);
  f64.state[0]["step"] = tensor({1.0}, DType::Float64);
  adam.load_state_dict(f64);
  EXPECT_EQ(adam.state(p).at("exp_avg").dtype(), DType::Float32);
  EXPECT_EQ(adam.state(p).at("step").dtype(), DType::Float64);
  EXPECT_EQ(adam.state(p).at("step").shape(), (Shape{1}));
}

TEST(Optim, AParameterChangedAfterAStepIsNamed) {
  nn::Linear model(2, 2);
  SGD opt(model.parameters(), SGDOptions(0.1).momentum(0.9));
  Tensor loss = model.forward(ones({1, 2})).sum();
  loss.backward();
  opt.step();
  model.double_();
  model.zero_grad();
  model.forward(ones({1, 2}, DType::Float64)).sum().backward();
  expect_error([&] { opt.step(); },
               "SGD: state 'momentum_buffer' of a parameter is float32 [2, 2] but the parameter "
               "is now float64 [2, 2]");
}

// PyTorch: "assigned grad has data of a different size / type".
TEST(Optim, SetGradChecksShapeAndDtype) {
  Tensor w = param({2, 3});
  expect_error([&] { w.set_grad(zeros({3})); },
               "set_grad: assigned grad has data of a different size ([3], the tensor is [2, 3])");
  expect_error(
      [&] {
        w.set_grad(zeros({2, 3}, DType::Float64));
      },
      "set_grad: assigned grad has data of a different type");
  expect_error([&] { w.set_grad(w); }, "can't assign Variable as its own grad");
  w.set_grad(full({2, 3}, 2.0));
  w.set_grad(Tensor());
  EXPECT_FALSE(w.grad().defined());
}

// Clipping: nan bounds and mixed dtypes as torch.clamp and torch.stack give them.
TEST(Optim, ClipGradValueWithNaNGivesNaN) {
  Tensor p = param({3});
  p.set_grad(tensor({1.0, -2.0, 0.5}));
  clip_grad_value_({p}, kNaN);
  for (double v : p.grad().to_vector<double>()) EXPECT_TRUE(std::isnan(v));  // PyTorch: nan x3
  p.set_grad(tensor({1.0, -2.0, 0.5}));
  clip_grad_value_({p}, -1.0);
  expect_values(p.grad(), {-1, -1, -1});  // PyTorch: max wins over min
  p.set_grad(tensor({1.0, -2.0, 0.5}));
  clip_grad_value_({p}, kInf);
  expect_values(p.grad(), {1, -2, 0.5});
  clip_grad_value_({}, 1.0);  // an empty list: nothing to do
}

// A gradient listed twice is counted twice in the norm and scaled twice, as PyTorch's loop does
// (torch.nn.utils.clip_grad_norm_([w, w], 1.0) with w.grad = [3, 3, 3, 3]: total
// 8.485280990600586, w.grad 0.0416666604578495). tests/threads/test_optim_threads.cpp has large
// ones on two threads.
TEST(Optim, ClipGradOfAGradientListedTwiceScalesItTwice) {
  Tensor w = param({4});
  w.set_grad(full({4}, 3.0));
  EXPECT_EQ(clip_grad_norm_({w, w}, 1.0), static_cast<double>(8.485280990600586f));
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(4, 0.0416666604578495f));
}

// Two leaves that view one buffer are updated one after the other, as PyTorch's loop: the
// shared elements get both updates (torch.optim.Adam([a, b], lr=0.1) with base = arange(6),
// a = base[:4], b = base[2:] gives base [-0.1, 0.9, 1.8, 2.8, 3.9, 4.9]).
// tests/threads/test_optim_threads.cpp has large ones on two threads.
TEST(Optim, AdamStepsParametersThatShareMemoryOneAfterTheOther) {
  Tensor base = arange(0, 6, 1, DType::Float32);
  Tensor a = base.narrow(0, 0, 4).detach().requires_grad_();
  Tensor b = base.narrow(0, 2, 4).detach().requires_grad_();
  a.set_grad(ones({4}));
  b.set_grad(full({4}, 2.0));
  Adam({a, b}, AdamOptions(0.1)).step();
  expect_values(base, {-0.1, 0.9, 1.8, 2.8, 3.9, 4.9}, 1e-6);
}

TEST(Optim, ClipGradNormOfMixedDtypesIsFloat64) {
  // PyTorch 1.13: total 0.7416198511877966 (float64) whichever gradient comes first; a.grad
  // [0.06741989403963089, 0.13483978807926178, 0.20225968956947327],
  // b.grad [0.2696795804482513, 0.3370994755603141].
  for (bool float32_first : {true, false}) {
    Tensor a = param({3}), b = param({2}, DType::Float64);
    a.set_grad(tensor({0.1, 0.2, 0.3}));
    b.set_grad(tensor({0.4, 0.5}, DType::Float64));
    const double total =
        float32_first ? clip_grad_norm_({a, b}, 0.5) : clip_grad_norm_({b, a}, 0.5);
    EXPECT_EQ(total, 0.7416198511877966);
    const std::vector<double> ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
    EXPECT_EQ(ga, (std::vector<double>{static_cast<float>(0.06741989403963089),
                                       static_cast<float>(0.13483978807926178),
                                       static_cast<float>(0.20225968956947327)}));
    EXPECT_NEAR(gb[0], 0.2696795804482513, 1e-16);
    EXPECT_NEAR(gb[1], 0.3370994755603141, 1e-16);
  }
}

}  // namespace
}  // namespace ember
