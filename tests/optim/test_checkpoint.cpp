// A training checkpoint (optim::save_checkpoint / load_checkpoint) resumes bit for bit, keeps
// every scheduler's state (ReduceLROnPlateau's infinite best included) and refuses hostile or
// mismatched states (a step that is not a whole number, a bad scheduler state: refused without
// changing anything) and a full disk.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/io/safetensors.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "optim/optim.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using namespace optim;
using test::temp_path;

// ---- a training checkpoint resumes bit for bit ----

struct Trainer {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::LinearLR> warmup;
  std::unique_ptr<optim::CosineAnnealingLR> cosine;
  std::unique_ptr<optim::SequentialLR> sched;
  explicit Trainer(uint64_t seed) {
    manual_seed(seed);
    model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(4, 8));
    model->push_back(std::make_shared<nn::GELU>());
    model->push_back(std::make_shared<nn::Linear>(8, 3));
    opt = std::make_unique<optim::AdamW>(
        model->parameters(), optim::AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.95}));
    warmup = std::make_unique<optim::LinearLR>(*opt, 0.1, 1.0, 3);
    cosine = std::make_unique<optim::CosineAnnealingLR>(*opt, 7);
    sched = std::make_unique<optim::SequentialLR>(
        *opt, std::vector<optim::LRScheduler*>{warmup.get(), cosine.get()},
        std::vector<int64_t>{3});
  }
  void steps(int from, int to) {
    for (int s = from; s < to; ++s) {
      Tensor x = test::pattern({5, 4}, s, DType::Float32);
      Tensor y = from_vector({0, 2, 1, 1, 0}, {5}, DType::Int64);
      opt->zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(x), y);
      loss.backward();
      optim::clip_grad_norm_(model->parameters(), 0.5);
      opt->step();
      sched->step();
    }
  }
};

TEST(Checkpoint, ResumedTrainingEqualsUninterruptedBitForBit) {
  Trainer straight(7);
  straight.steps(0, 10);

  Trainer first(7);
  first.steps(0, 4);
  const std::string path = temp_path("ckpt.safetensors");
  optim::save_checkpoint(path, first.model->state_dict(), *first.opt, first.sched.get(), 4,
                         {{"run", "test"}});

  Trainer resumed(99);  // other weights, fresh optimizer and schedulers
  NamedTensorList model_state;
  const int64_t step = optim::load_checkpoint(path, model_state, *resumed.opt, resumed.sched.get());
  EXPECT_EQ(step, 4);
  resumed.model->load_state_dict(model_state);
  resumed.steps(4, 10);
  const auto expected = straight.model->state_dict(), actual = resumed.model->state_dict();
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(equal(expected[i].second, actual[i].second)) << expected[i].first;
  }
  EXPECT_EQ(resumed.opt->param_groups()[0].options->get_lr(),
            straight.opt->param_groups()[0].options->get_lr());

  // A checkpoint of another optimizer kind, or a plain file, is refused.
  optim::SGD sgd(straight.model->parameters(), optim::SGDOptions(0.1));
  expect_error([&] { optim::load_checkpoint(path, model_state, sgd); },
               "holds the state of a AdamW optimizer, not of SGD");
  save_safetensors({{"a", ones({1})}}, temp_path("plain.safetensors"));
  expect_error([&] { optim::load_checkpoint(temp_path("plain.safetensors"), model_state, sgd); },
               "not a training checkpoint");
}

// ReduceLROnPlateau is not an LRScheduler (nor is PyTorch's), but a checkpoint stores it too,
// including its initial best of inf, which JSON cannot hold as a number.
TEST(Checkpoint, StoresReduceLROnPlateauIncludingInfiniteBest) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateauOptions o;
  o.patience = 1;
  o.factor = 0.5;
  const std::string path = temp_path("plateau.safetensors");
  {
    optim::ReduceLROnPlateau fresh(opt, o);  // best = inf, no metric yet
    optim::save_checkpoint(path, {{"w", w}}, opt, &fresh, 0);
  }
  optim::ReduceLROnPlateau restored(opt, o);
  NamedTensorList state;
  EXPECT_EQ(optim::load_checkpoint(path, state, opt, &restored), 0);
  EXPECT_EQ(restored.state_dict().at("best"), std::vector<double>{INFINITY});

  // Mid-run: after a best of 1.0, two bad epochs (patience 1) have halved the lr once; an
  // optimizer and scheduler restored from the checkpoint continue exactly as the originals.
  optim::ReduceLROnPlateau original(opt, o);
  for (double metric : {1.0, 2.0, 2.0}) original.step(metric);
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 0.5);
  optim::save_checkpoint(path, {{"w", w}}, opt, &original, 3);
  Tensor w2 = ones({2}).requires_grad_();
  optim::SGD opt2({w2}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau resumed(opt2, o);
  EXPECT_EQ(optim::load_checkpoint(path, state, opt2, &resumed), 3);
  EXPECT_EQ(resumed.state_dict(), original.state_dict());
  EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), 0.5);
  for (double metric : {3.0, 3.0, 0.5, 0.7, 0.7}) {
    original.step(metric);
    resumed.step(metric);
    EXPECT_EQ(resumed.state_dict(), original.state_dict());
    EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), opt.param_groups()[0].options->get_lr());
  }
  EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), 0.125);
}

// Scheduler states from a hostile file: every value is checked before anything is cast.
TEST(Checkpoint, HostileSchedulerStatesAreErrors) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(1.0));
  optim::StepLR step_lr(opt, 2);
  optim::SchedulerState good = step_lr.state_dict();
  for (double bad : {double{NAN}, double{INFINITY}, 1e300, 2.5, -1e19}) {
    optim::SchedulerState s = good;
    s["last_epoch"] = {bad};
    expect_error([&] { step_lr.load_state_dict(s); }, "'last_epoch' must be a whole number");
  }
  optim::SchedulerState missing = good;
  missing.erase("_step_count");
  expect_error([&] { step_lr.load_state_dict(missing); }, "missing '_step_count'");

  optim::ReduceLROnPlateau plateau(opt);
  optim::SchedulerState p = plateau.state_dict();
  p["num_bad_epochs"] = {NAN};
  expect_error([&] { plateau.load_state_dict(p); }, "'num_bad_epochs' must be a whole number");

  optim::LinearLR warm(opt, 0.5, 1.0, 2);
  optim::CosineAnnealingLR cosine(opt, 4);
  optim::SequentialLR seq(opt, {&warm, &cosine}, {2});
  for (const char* key : {"_schedulers.", "_schedulers.x.last_epoch", "_schedulers.7.last_epoch",
                          "_schedulers.99999999999999999999.a", "_schedulers.-1.a"}) {
    optim::SchedulerState s = seq.state_dict();
    s[key] = {1.0};
    expect_error([&] { seq.load_state_dict(s); }, "SequentialLR::load_state_dict: bad key");
  }
}

TEST(Checkpoint, CheckpointStepMustBeAWholeNumber) {
  Tensor p = ones({2}).requires_grad_();
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

TEST(Checkpoint, AnotherSchedulersStateIsRefused) {
  Tensor p = ones({2}).requires_grad_();
  SGD opt({p}, SGDOptions(0.1));
  StepLR step_lr(opt, 2);
  const std::string path = temp_path("attack_scheduler_type.safetensors");
  save_checkpoint(path, {{"w", p.detach()}}, opt, &step_lr, 1);
  EXPECT_EQ(load_safetensors(path).metadata.at("ember.scheduler"), "StepLR");
  NamedTensorList model_state;
  ExponentialLR exponential(opt, 0.5);
  const std::vector<double> lrs = exponential.get_last_lr();
  // The state of a StepLR has the keys of an ExponentialLR's: without the type, it would load.
  expect_error([&] { load_checkpoint(path, model_state, opt, &exponential); },
               "load_checkpoint: the checkpoint holds the state of a StepLR scheduler, not of "
               "ExponentialLR");
  EXPECT_EQ(exponential.get_last_lr(), lrs);
  StepLR same(opt, 2);
  EXPECT_EQ(load_checkpoint(path, model_state, opt, &same), 1);
  // A SequentialLR's schedulers in another order have the same keys too.
  StepLR a(opt, 2);
  ExponentialLR b(opt, 0.5);
  SequentialLR ab(opt, {&a, &b}, {3}), ba(opt, {&b, &a}, {3});
  EXPECT_EQ(ab.name(), "SequentialLR(StepLR, ExponentialLR)");
  save_checkpoint(path, {{"w", p.detach()}}, opt, &ab, 1);
  expect_error([&] { load_checkpoint(path, model_state, opt, &ba); },
               "holds the state of a SequentialLR(StepLR, ExponentialLR) scheduler, not of "
               "SequentialLR(ExponentialLR, StepLR)");
  EXPECT_EQ(load_checkpoint(path, model_state, opt, &ab), 1);
  save_checkpoint(path, {{"w", p.detach()}}, opt, &step_lr, 1);
  // A checkpoint that does not name its scheduler loads as before.
  SafetensorsFile unnamed = load_safetensors(path);
  unnamed.metadata.erase("ember.scheduler");
  EXPECT_EQ(load_checkpoint(std::move(unnamed), model_state, opt, &same), 1);
}

// A scheduler a user writes need not name itself: its checkpoint records no type and loads.
class HalvingLR : public LRScheduler {
 public:
  explicit HalvingLR(Optimizer& optimizer) : LRScheduler(optimizer) { initial_step(); }

 protected:
  std::vector<double> get_lr() override {
    std::vector<double> lrs;
    for (double base : base_lrs_)
      lrs.push_back(base * std::pow(0.5, static_cast<double>(last_epoch_)));
    return lrs;
  }
};

TEST(Checkpoint, AnUnnamedSchedulerOfOnesOwnLoads) {
  Tensor p = ones({2}).requires_grad_();
  SGD opt({p}, SGDOptions(0.1));
  HalvingLR halving(opt);
  EXPECT_EQ(halving.name(), "");
  halving.step();
  const std::string path = temp_path("own_scheduler.safetensors");
  save_checkpoint(path, {{"w", p.detach()}}, opt, &halving, 1);
  EXPECT_EQ(load_safetensors(path).metadata.count("ember.scheduler"), 0u);
  HalvingLR fresh(opt);
  NamedTensorList model_state;
  EXPECT_EQ(load_checkpoint(path, model_state, opt, &fresh), 1);
  EXPECT_EQ(fresh.get_last_lr(), halving.get_last_lr());
}

TEST(Checkpoint, KeysAndValuesWithANulAreShownEscaped) {
  Tensor p = ones({2}).requires_grad_();
  SGD opt({p}, SGDOptions(0.1));
  expect_error(
      [&] {
        save_checkpoint(temp_path("reserved_nul.safetensors"), {}, opt, nullptr, 0,
                        {{std::string("ember.\0x", 8), "v"}});
      },
      "metadata key 'ember.\\u0000x' is reserved");
  // What a loaded checkpoint names is shown escaped too.
  const std::string path = temp_path("nul_step.safetensors");
  save_checkpoint(path, {}, opt, nullptr, 0);
  NamedTensorList model_state;
  SafetensorsFile file = load_safetensors(path);
  file.metadata["ember.step"] = std::string("1\0x", 3);
  expect_error([&] { load_checkpoint(std::move(file), model_state, opt); },
               "the step '1\\u0000x' in the checkpoint is not a whole number");
  file = load_safetensors(path);
  file.metadata["ember.optimizer"] = std::string("SGD\0x", 5);
  expect_error([&] { load_checkpoint(std::move(file), model_state, opt); },
               "holds the state of a SGD\\u0000x optimizer, not of SGD");
}

// A param group's extra entry named by text that is not UTF-8 is an Error naming it and its
// group, and no file is written; a name with a quote is kept as it is.
TEST(Checkpoint, AnOptionNameThatIsNotUtf8IsAnError) {
  Tensor p = ones({2}).requires_grad_(), q = ones({3}).requires_grad_();
  SGD opt({p}, SGDOptions(0.1));
  ParamGroup group({q});
  group.extra["x\xC3"] = 2.0;
  opt.add_param_group(group);
  const std::string path = temp_path("option_not_utf8.safetensors");
  std::filesystem::remove(path);
  expect_error([&] { save_checkpoint(path, {}, opt, nullptr, 0); },
               "save_checkpoint: the option name 'x\xC3' of param group 1 is not valid UTF-8");
  EXPECT_FALSE(std::filesystem::exists(path));
  SGD quoted({p}, SGDOptions(0.1));
  quoted.param_groups()[0].extra["k\"q"] = 1.0;
  save_checkpoint(path, {}, quoted, nullptr, 0);
  SGD loaded({p}, SGDOptions(0.1));
  NamedTensorList model_state;
  load_checkpoint(path, model_state, loaded);
  EXPECT_EQ(loaded.param_groups()[0].extra.at("k\"q"), 1.0);
  std::filesystem::remove(path);
}

TEST(Checkpoint, ARefusedCheckpointChangesNothing) {
  Tensor p = ones({2}).requires_grad_();
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

TEST(Checkpoint, CheckpointToAFullDiskIsAnError) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  Tensor p = ones({64}).requires_grad_();
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
