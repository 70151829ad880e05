// Learning-rate schedulers with PyTorch 1.13's formulas (the recursive, "chainable" forms its
// step() uses, so the sequences agree to the last bit). A scheduler changes the lr of its
// optimizer's groups (OneCycleLR also cycles momentum / beta1, as PyTorch's does):
//
//   optim::AdamW opt(params, optim::AdamWOptions(3e-4));
//   optim::LambdaLR warmup(opt, [](int64_t step) { return std::min(1.0, (step + 1) / 100.0); });
//   for (...) { ...; opt.step(); warmup.step(); }
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace ember::optim {

// A scheduler's state as numbers by name (last_epoch, base_lrs, ...), for checkpoints.
using SchedulerState = std::map<std::string, std::vector<double>>;

// What a checkpoint needs of any scheduler: its state as numbers, and back. (PyTorch's
// ReduceLROnPlateau is not an _LRScheduler either; both families derive from this.)
class StatefulScheduler {
 public:
  StatefulScheduler() = default;
  virtual ~StatefulScheduler() = default;
  StatefulScheduler(const StatefulScheduler&) = delete;
  StatefulScheduler& operator=(const StatefulScheduler&) = delete;
  virtual SchedulerState state_dict() const = 0;
  // Checks every value first (a hostile checkpoint is an Error, never a bad cast).
  virtual void load_state_dict(const SchedulerState& state) = 0;
  // The class's name ("StepLR"; a SequentialLR's names its schedulers too): a checkpoint records
  // it, and refuses the state of another scheduler. A scheduler of one's own that does not
  // name itself ("") is not checked.
  virtual std::string name() const { return ""; }
};

class LRScheduler : public StatefulScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);

  // One step: last_epoch + 1, and each group's lr from get_lr().
  virtual void step();
  // PyTorch's step(epoch): last_epoch = epoch and the closed form where there is one.
  void step(int64_t epoch);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }

  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

  Optimizer& optimizer() { return optimizer_; }

 protected:
  // The lrs of the next step (last_epoch already advanced).
  virtual std::vector<double> get_lr() = 0;
  virtual std::vector<double> closed_form_lr() { return get_lr(); }
  // PyTorch's _initial_step(): the constructor's first step (call at the end of a derived
  // constructor).
  void initial_step();
  // Throws when the optimizer's groups are not those the scheduler was built for.
  void check_groups(const char* op) const;
  std::vector<double> group_lrs() const;
  void apply_lrs(const std::vector<double>& lrs);

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;

  friend class SequentialLR;
};

// lr = base_lr * lr_lambda(epoch).
class LambdaLR : public LRScheduler {
 public:
  std::string name() const override { return "LambdaLR"; }
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  std::vector<double> get_lr() override;
  std::function<double(int64_t)> lr_lambda_;
};

// lr *= gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  std::string name() const override { return "StepLR"; }
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone.
class MultiStepLR : public LRScheduler {
 public:
  std::string name() const override { return "MultiStepLR"; }
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;
  std::vector<int64_t> milestones_;
  double gamma_;
};

// lr *= gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  std::string name() const override { return "ExponentialLR"; }
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;
  double gamma_;
};

// lr from base_lr * start_factor to base_lr * end_factor linearly over total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  std::string name() const override { return "LinearLR"; }
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2; T_max in [1, INT64_MAX / 2].
class CosineAnnealingLR : public LRScheduler {
 public:
  std::string name() const override { return "CosineAnnealingLR"; }
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;
  std::vector<double> closed_form_lr() override;
  int64_t T_max_;
  double eta_min_;
};

struct OneCycleLROptions {
  OneCycleLROptions(double max_lr, int64_t total_steps);
  double max_lr;
  int64_t total_steps;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // or "linear"
  bool cycle_momentum = true;           // momentum (SGD, RMSprop) or beta1 (Adam, AdamW)
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

// The 1cycle policy: from max_lr / div_factor up to max_lr, then down to
// initial_lr / final_div_factor, over total_steps steps.
class OneCycleLR : public LRScheduler {
 public:
  std::string name() const override { return "OneCycleLR"; }
  OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options);

 protected:
  std::vector<double> get_lr() override;
  OneCycleLROptions options_;
  struct Phase {
    double end_step;
    std::string start_lr, end_lr, start_momentum, end_momentum;
  };
  std::vector<Phase> phases_;
  bool use_beta1_ = false;
};

// Runs schedulers one after another, switching at the milestones (warmup, then cosine):
//   LinearLR warmup(opt, 0.01, 1.0, 100);  CosineAnnealingLR cosine(opt, 900);
//   SequentialLR schedule(opt, {&warmup, &cosine}, {100});
// The schedulers must outlive it.
class SequentialLR : public LRScheduler {
 public:
  // With its schedulers' names: "SequentialLR(LinearLR, CosineAnnealingLR)".
  std::string name() const override;
  SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers,
               std::vector<int64_t> milestones);
  using LRScheduler::step;
  void step() override;
  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

 protected:
  std::vector<double> get_lr() override { return group_lrs(); }
  // The state's own entries and those of each scheduler ("_schedulers.<i>.<key>").
  void split_state(const SchedulerState& state, SchedulerState& own,
                   std::vector<SchedulerState>& parts) const;
  std::vector<LRScheduler*> schedulers_;
  std::vector<int64_t> milestones_;
};

struct ReduceLROnPlateauOptions {
  std::string mode = "min";  // or "max"
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";  // or "abs"
  int64_t cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;
};

// Multiplies the lr by factor when the metric has not improved for patience epochs.
class ReduceLROnPlateau : public StatefulScheduler {
 public:
  std::string name() const override { return "ReduceLROnPlateau"; }
  ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  std::vector<double> get_last_lr() const;
  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

 private:
  bool is_better(double a, double best) const;
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
};

}  // namespace ember::optim
