// The training API under attack: hostile options, parameter groups, state dicts, scheduler
// arguments, clipping values, checkpoints and files, each class of defect with PyTorch 1.13's
// behaviour as the reference (values from Debian's PyTorch, quoted where they are asserted) or
// a clear ember::Error where PyTorch raises.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/io/safetensors.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "optim/optim.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using namespace optim;
using test::expect_error;
using test::expect_values;
using test::temp_path;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor param(const Shape& shape, DType dtype = DType::Float32) {
  return ones(shape, dtype).requires_grad_();
}

// ---- ParamGroup copies and moves keep the scheduler entries ----

TEST(OptimAttack, ParamGroupCopiesAndMovesKeepEverything) {
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

// ---- A scheduler whose optimizer gained a group (PyTorch zips; Ember read past its lists) ----

TEST(OptimAttack, EverySchedulerRefusesGroupsAddedAfterIt) {
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

// ---- A group with another optimizer's options: PyTorch uses its own defaults for the rest ----

TEST(OptimAttack, GroupOptionsOfAnotherOptimizerAreReadByName) {
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

// ---- Option validation, for every optimizer and option (PyTorch's ValueError messages) ----

TEST(OptimAttack, EveryOptimizerValidatesEveryOption) {
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

TEST(OptimAttack, EmptyAndDuplicateParameters) {
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

// ---- State dicts: missing or unknown state, a step that is not a count, an int moment ----

TEST(OptimAttack, LoadStateDictChecksEveryStateEntry) {
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
  // A float64 moment for a float32 parameter is converted; the step is kept as a count.
  OptimizerStateDict f64 = good;
  f64.state[0]["exp_avg"] = f64.state[0]["exp_avg"].to(DType::Float64);
  f64.state[0]["step"] = tensor({1.0}, DType::Float64);
  adam.load_state_dict(f64);
  EXPECT_EQ(adam.state(p).at("exp_avg").dtype(), DType::Float32);
  EXPECT_EQ(adam.state(p).at("step").dim(), 0);
}

TEST(OptimAttack, AParameterChangedAfterAStepIsNamed) {
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

// ---- set_grad: another shape or dtype (PyTorch: "assigned grad has data of a different ...") --

TEST(OptimAttack, SetGradChecksShapeAndDtype) {
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

// ---- Schedulers: PyTorch's arithmetic (floor division) and its ZeroDivisionErrors ----

TEST(OptimAttack, StepLRWithANegativeEpochFloors) {
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

TEST(OptimAttack, OneCycleLRRefusesWhatPyTorchDividesByZero) {
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

TEST(OptimAttack, OneCycleLRWithoutItsGroupEntriesIsAnError) {
  SGD opt({param({1})}, SGDOptions(1.0).momentum(0.9));
  OneCycleLR sched(opt, OneCycleLROptions(0.1, 10));
  opt.param_groups()[0].extra.erase("max_lr");
  expect_error([&] { sched.step(); }, "OneCycleLR: a parameter group has no 'max_lr' entry");
}

// ---- Clipping: nan bounds and mixed dtypes as torch.clamp and torch.stack give them ----

TEST(OptimAttack, ClipGradValueWithNaNGivesNaN) {
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

TEST(OptimAttack, ClipGradNormOfMixedDtypesIsFloat64) {
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

// ---- Losses: a reduction out of range; +inf logits and no classes as PyTorch ----

TEST(OptimAttack, LossesRefuseAReductionOutOfRange) {
  namespace F = nn::functional;
  const auto bad = static_cast<nn::Reduction>(7);
  Tensor x = full({2, 3}, 0.5), t = zeros({2}, DType::Int64);
  expect_error([&] { F::cross_entropy(x, t, F::CrossEntropyFuncOptions().reduction(bad)); },
               "cross_entropy: 7 is not a valid value for reduction");
  expect_error([&] { F::nll_loss(x, t, F::NLLLossFuncOptions().reduction(bad)); },
               "nll_loss: 7 is not a valid value for reduction");
  expect_error([&] { F::mse_loss(x, x, F::MSELossFuncOptions(bad)); }, "mse_loss: 7 is not");
  expect_error([&] { F::l1_loss(x, x, F::L1LossFuncOptions(bad)); }, "l1_loss: 7 is not");
  expect_error(
      [&] { F::binary_cross_entropy(x, x, F::BinaryCrossEntropyFuncOptions().reduction(bad)); },
      "binary_cross_entropy: 7 is not");
  expect_error(
      [&] {
        F::binary_cross_entropy_with_logits(
            x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(bad));
      },
      "binary_cross_entropy_with_logits: 7 is not");
}

TEST(OptimAttack, CrossEntropyOfInfiniteLogitsAndNoClasses) {
  namespace F = nn::functional;
  const auto none = F::CrossEntropyFuncOptions().reduction(nn::Reduction::None);
  // PyTorch 1.13: [nan, 1.4076058864593506] for target 0 and for target 1 (log_softmax of a row
  // holding +inf is nan everywhere).
  Tensor x = tensor({{kInf, 0.0, 1.0}, {0.0, 1.0, 2.0}});
  for (int64_t first : {0, 1}) {
    const std::vector<double> loss =
        F::cross_entropy(x, from_vector({static_cast<double>(first), 1.0}, {2}, DType::Int64), none)
            .to_vector<double>();
    EXPECT_TRUE(std::isnan(loss[0])) << "target " << first;
    EXPECT_NEAR(loss[1], 1.4076058864593506, 1e-6);
  }
  // The float32 road's backward too: PyTorch 1.13 gives nan for the whole +inf row and
  // [0.0900, -0.7553, 0.6652] for the other (target 1).
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor xg = x.to(dtype).detach().requires_grad_();
    F::cross_entropy(xg, from_vector({1.0, 1.0}, {2}, DType::Int64), none).sum().backward();
    const std::vector<double> g = xg.grad().to_vector<double>();
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(g[k])) << dtype_name(dtype) << " " << k;
    EXPECT_NEAR(g[3], 0.0900, 1e-4);
    EXPECT_NEAR(g[4], -0.7553, 1e-4);
    EXPECT_NEAR(g[5], 0.6652, 1e-4);
  }
  // -inf logits: inf at the -inf class, finite elsewhere (PyTorch: [inf], [1.31326162815094]).
  Tensor y = tensor({{-kInf, 0.0, 1.0}});
  EXPECT_EQ(F::cross_entropy(y, zeros({1}, DType::Int64), none).item(), kInf);
  EXPECT_NEAR(F::cross_entropy(y, ones({1}, DType::Int64), none).item(), 1.31326162815094, 1e-6);
  // No classes: any class index is out of bounds; no rows: [], nan (mean), 0 (sum).
  expect_error([] { F::cross_entropy(zeros({2, 0}), zeros({2}, DType::Int64)); }, "out of bounds");
  EXPECT_EQ(F::cross_entropy(zeros({0, 3}), zeros({0}, DType::Int64), none).numel(), 0);
  EXPECT_TRUE(std::isnan(F::cross_entropy(zeros({0, 3}), zeros({0}, DType::Int64)).item()));
  EXPECT_EQ(F::cross_entropy(zeros({0, 3}), zeros({0}, DType::Int64),
                             F::CrossEntropyFuncOptions().reduction(nn::Reduction::Sum))
                .item(),
            0.0);
  // Probabilities over no classes: PyTorch divides by input.numel() / C = 0 / 0: nan.
  EXPECT_TRUE(std::isnan(F::cross_entropy(zeros({2, 0}), zeros({2, 0})).item()));
}

// ---- Checkpoints: the step, files that are not checkpoints, a full disk ----

TEST(OptimAttack, CheckpointStepMustBeAWholeNumber) {
  Tensor p = param({2});
  Adam opt({p}, AdamOptions());
  StepLR sched(opt, 2);
  const std::string path = temp_path("attack_ckpt.safetensors");
  save_checkpoint(path, {{"w", p.detach()}}, opt, &sched, 7);
  NamedTensorList model_state;
  EXPECT_EQ(load_checkpoint(path, model_state, opt, &sched), 7);
  for (const char* step : {"1e5", "12abc", "", " 3", "99999999999999999999", "0x10"}) {
    SCOPED_TRACE(step);
    SafetensorsFile file = load_safetensors(path);
    file.metadata["ember.step"] = step;
    expect_error([&] { load_checkpoint(std::move(file), model_state, opt, &sched); },
                 "is not a whole number");
  }
  SafetensorsFile negative = load_safetensors(path);
  negative.metadata["ember.step"] = "-3";
  EXPECT_EQ(load_checkpoint(std::move(negative), model_state, opt, &sched), -3);
}

TEST(OptimAttack, ARefusedCheckpointChangesNothing) {
  Tensor p = param({2});
  SGD opt({p}, SGDOptions(0.1).momentum(0.9));
  StepLR sched(opt, 2);
  p.set_grad(ones({2}));
  opt.step();
  sched.step();
  const std::string path = temp_path("attack_rollback.safetensors");
  save_checkpoint(path, {{"w", p.detach()}}, opt, &sched, 1);
  // A second optimizer, trained differently, receives a checkpoint whose scheduler state is bad.
  SGD other({p}, SGDOptions(0.5).momentum(0.5));
  StepLR other_sched(other, 3);
  SafetensorsFile file = load_safetensors(path);
  file.metadata["scheduler"] = R"({"last_epoch":[2.5]})";
  NamedTensorList model_state = {{"keep", ones({1})}};
  expect_error([&] { load_checkpoint(std::move(file), model_state, other, &other_sched); },
               "'last_epoch' must be a whole number");
  EXPECT_EQ(other.param_groups()[0].options->get_lr(), 0.5);  // options as they were
  EXPECT_EQ(model_state.size(), 1u);                          // model_state as it was
  EXPECT_EQ(model_state[0].first, "keep");
}

TEST(OptimAttack, CheckpointToAFullDiskIsAnError) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  Tensor p = param({64});
  SGD opt({p}, SGDOptions(0.1));
  expect_error(
      [&] {
        save_checkpoint("/dev/full", {{"w", p.detach()}}, opt, nullptr, 0);
      },
      "No space left on device");
  nn::Linear model(8, 8);
  expect_error([&] { model.save("/dev/full"); }, "No space left on device");
}

}  // namespace
}  // namespace ember
