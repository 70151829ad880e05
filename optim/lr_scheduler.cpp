// Schedulers: PyTorch 1.13's torch/optim/lr_scheduler.py, formula for formula.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/base/error.h"

namespace ember::optim {

namespace {
constexpr double kPi = std::numbers::pi;
// Python's a % b and a // b for b > 0 (the remainder never negative, the quotient floored), for
// every int64 a and b (no intermediate a + b or a - b that could overflow).
int64_t py_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return r < 0 ? r + b : r;
}
int64_t py_floordiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

// The one value stored under key, as a whole number (epochs and counters): a state from a
// hostile file may hold nan, 1e300 or 2.5, and casting those to int64 is undefined.
int64_t state_integer(const SchedulerState& state, const char* key, const char* op) {
  auto it = state.find(key);
  check(it != state.end() && it->second.size() == 1, op, ": missing '", key, "'");
  const double v = it->second[0];
  check(std::isfinite(v) && v == std::trunc(v) && std::abs(v) <= 0x1p62, op, ": '", key,
        "' must be a whole number, got ", v);
  return static_cast<int64_t>(v);
}
}  // namespace

// ---- base ----

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (ParamGroup& g : optimizer_.param_groups()) {
    if (!g.extra.count("initial_lr")) g.extra["initial_lr"] = g.options->get_lr();
    base_lrs_.push_back(g.extra["initial_lr"]);
  }
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> lrs;
  for (const ParamGroup& g : optimizer_.param_groups()) lrs.push_back(g.options->get_lr());
  return lrs;
}

void LRScheduler::apply_lrs(const std::vector<double>& lrs) {
  auto& groups = optimizer_.param_groups();
  for (std::size_t i = 0; i < groups.size() && i < lrs.size(); ++i)
    groups[i].options->set_lr(lrs[i]);
  last_lr_ = group_lrs();
}

void LRScheduler::check_groups(const char* op) const {
  // Each scheduler keeps per-group lists (base_lrs, and OneCycleLR's group entries) made when
  // it was built: a group added to the optimizer since then has none. (PyTorch zips the lists
  // with the groups, so some of its schedulers skip the new group and others scale it.)
  check(optimizer_.param_groups().size() == base_lrs_.size(), op, ": the optimizer has ",
        optimizer_.param_groups().size(), " parameter groups, the scheduler was built for ",
        base_lrs_.size(),
        " (add_param_group after creating the scheduler); create the scheduler "
        "after adding the groups");
}

void LRScheduler::step() {
  check_groups("LRScheduler::step");
  check(last_epoch_ < std::numeric_limits<int64_t>::max(), "LRScheduler::step: last_epoch ",
        last_epoch_, " cannot be advanced");
  ++step_count_;
  ++last_epoch_;
  apply_lrs(get_lr());
}

void LRScheduler::step(int64_t epoch) {
  check_groups("LRScheduler::step");
  ++step_count_;
  last_epoch_ = epoch;
  apply_lrs(closed_form_lr());
}

SchedulerState LRScheduler::state_dict() const {
  return {{"last_epoch", {static_cast<double>(last_epoch_)}},
          {"_step_count", {static_cast<double>(step_count_)}},
          {"base_lrs", base_lrs_},
          {"_last_lr", last_lr_}};
}

void LRScheduler::load_state_dict(const SchedulerState& state) {
  auto one = [&](const char* key) {
    return state_integer(state, key, "LRScheduler::load_state_dict");
  };
  auto list = [&](const char* key) {
    auto it = state.find(key);
    check(it != state.end() && it->second.size() == optimizer_.param_groups().size(),
          "LRScheduler::load_state_dict: '", key, "' must hold one value per parameter group (",
          optimizer_.param_groups().size(), ")");
    return it->second;
  };
  const int64_t last_epoch = one("last_epoch"), step_count = one("_step_count");
  std::vector<double> base = list("base_lrs"), last = list("_last_lr");
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = base;
  last_lr_ = last;
}

// ---- LambdaLR ----

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
  check(static_cast<bool>(lr_lambda_), "LambdaLR: lr_lambda is empty");
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * lr_lambda_(last_epoch_));
  return lrs;
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_) {
    // gamma ** (last_epoch // step_size): Python floors (step(-3) with step_size 2 is gamma^-2).
    lrs.push_back(base *
                  std::pow(gamma_, static_cast<double>(py_floordiv(last_epoch_, step_size_))));
  }
  return lrs;
}

// ---- MultiStepLR ----

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (count == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(count));
  return lrs;
}

std::vector<double> MultiStepLR::closed_form_lr() {
  const auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

// ---- ExponentialLR ----

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> ExponentialLR::closed_form_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}

// ---- LinearLR ----

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  check(start_factor > 0 && start_factor <= 1,
        "LinearLR: starting multiplicative factor expected to be greater than 0 and less or "
        "equal to 1, got ",
        start_factor);
  check(end_factor >= 0 && end_factor <= 1,
        "LinearLR: ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  check(total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double d = end_factor_ - start_factor_;
  for (double& lr : lrs) {
    lr *= 1. + d / (static_cast<double>(total_iters_) * start_factor_ +
                    static_cast<double>(last_epoch_ - 1) * d);
  }
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_) {
    lrs.push_back(base *
                  (start_factor_ + (end_factor_ - start_factor_) *
                                       static_cast<double>(std::min(total_iters_, last_epoch_)) /
                                       static_cast<double>(total_iters_)));
  }
  return lrs;
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  check(T_max > 0 && T_max <= std::numeric_limits<int64_t>::max() / 2,
        "CosineAnnealingLR: T_max must be in [1, INT64_MAX / 2] (its period 2 * T_max must fit in "
        "int64), "
        "got ",
        T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    for (std::size_t i = 0; i < lrs.size(); ++i) {
      lrs[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1 + std::cos(e * kPi / T)) / 2;
    }
    return lrs;
  }
  // (last_epoch - 1 - T_max) % (2 T_max) == 0, as residues (last_epoch may be any int64).
  if (py_mod(last_epoch_, 2 * T_max_) == py_mod(1 + T_max_, 2 * T_max_)) {
    for (std::size_t i = 0; i < lrs.size(); ++i) {
      lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
    }
    return lrs;
  }
  for (double& lr : lrs) {
    lr = (1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (lr - eta_min_) +
         eta_min_;
  }
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() {
  std::vector<double> lrs;
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  for (double base : base_lrs_) {
    lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(kPi * e / T)) / 2);
  }
  return lrs;
}

// ---- OneCycleLR ----

OneCycleLROptions::OneCycleLROptions(double max_lr_, int64_t total_steps_)
    : max_lr(max_lr_), total_steps(total_steps_) {}

namespace {
bool has_option(const OptimizerOptions& o, const char* name) { return o.to_map().count(name) > 0; }
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& o)
    : LRScheduler(optimizer), options_(o) {
  check(o.total_steps > 0, "OneCycleLR: expected a positive total_steps, got ", o.total_steps);
  check(o.pct_start >= 0 && o.pct_start <= 1,
        "OneCycleLR: expected pct_start between 0 and 1, got ", o.pct_start);
  check(o.anneal_strategy == "cos" || o.anneal_strategy == "linear",
        "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', got '", o.anneal_strategy,
        "'");
  // PyTorch divides by them in Python: ZeroDivisionError.
  check(o.div_factor != 0,
        "OneCycleLR: div_factor must not be 0 (max_lr / div_factor is the "
        "initial lr)");
  check(o.final_div_factor != 0,
        "OneCycleLR: final_div_factor must not be 0 (initial_lr / "
        "final_div_factor is the minimum lr)");
  const double total = static_cast<double>(o.total_steps);
  if (o.three_phase) {
    phases_ = {
        {o.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
        {2 * o.pct_start * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
        {total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{o.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  base_lrs_.clear();
  const OptimizerOptions& defaults = optimizer.defaults();
  if (o.cycle_momentum) {
    check(has_option(defaults, "momentum") || has_option(defaults, "beta1"),
          "OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` enabled");
    use_beta1_ = has_option(defaults, "beta1");
  }
  for (ParamGroup& g : optimizer.param_groups()) {
    g.extra["initial_lr"] = o.max_lr / o.div_factor;
    g.extra["max_lr"] = o.max_lr;
    g.extra["min_lr"] = g.extra["initial_lr"] / o.final_div_factor;
    base_lrs_.push_back(g.extra["initial_lr"]);
    if (o.cycle_momentum) {
      g.options->set(use_beta1_ ? "beta1" : "momentum", o.max_momentum);
      g.extra["max_momentum"] = o.max_momentum;
      g.extra["base_momentum"] = o.base_momentum;
    }
  }
  initial_step();
}

std::vector<double> OneCycleLR::get_lr() {
  const double step_num = static_cast<double>(last_epoch_);
  // (The count is printed unsigned: last_epoch + 1 overflows int64 at INT64_MAX.)
  check(last_epoch_ <= options_.total_steps, "OneCycleLR: tried to step ",
        static_cast<uint64_t>(last_epoch_) + 1, " times. The specified number of total steps is ",
        options_.total_steps);
  auto anneal = [&](double start, double end, double pct) {
    if (options_.anneal_strategy == "cos")
      return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
    return (end - start) * pct + start;
  };
  // The group entries the constructor made (a group whose entries were lost, e.g. through an
  // optimizer state dict without them, is an error as PyTorch's KeyError, not an lr of 0).
  auto entry = [](const ParamGroup& g, const std::string& key) {
    auto it = g.extra.find(key);
    check(it != g.extra.end(), "OneCycleLR: a parameter group has no '", key, "' entry");
    return it->second;
  };
  std::vector<double> lrs;
  for (ParamGroup& g : optimizer_.param_groups()) {
    double start_step = 0, lr = 0, momentum = 0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const Phase& phase = phases_[i];
      if (step_num <= phase.end_step || i == phases_.size() - 1) {
        // A phase of zero length (total_steps 1 and pct_start 1, ...): PyTorch's division
        // raises ZeroDivisionError here, where C++ would make the lr nan.
        check(phase.end_step != start_step, "OneCycleLR: phase ", i + 1, " of the schedule has ",
              "zero length at step ", last_epoch_, " (total_steps ", options_.total_steps,
              ", pct_start ", options_.pct_start, "): float division by zero");
        const double pct = (step_num - start_step) / (phase.end_step - start_step);
        lr = anneal(entry(g, phase.start_lr), entry(g, phase.end_lr), pct);
        if (options_.cycle_momentum) {
          momentum = anneal(entry(g, phase.start_momentum), entry(g, phase.end_momentum), pct);
        }
        break;
      }
      start_step = phase.end_step;
    }
    lrs.push_back(lr);
    if (options_.cycle_momentum) g.options->set(use_beta1_ ? "beta1" : "momentum", momentum);
  }
  return lrs;
}

// ---- SequentialLR ----

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  check(!schedulers_.empty(), "SequentialLR: expects at least one scheduler");
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    check(schedulers_[i] != nullptr && &schedulers_[i]->optimizer() == &optimizer,
          "SequentialLR: expects all schedulers to belong to the same optimizer, but got "
          "scheduler at index ",
          i, " to be different than the optimizer passed in");
  }
  check(milestones_.size() == schedulers_.size() - 1,
        "SequentialLR: expects number of schedulers provided to be one more than the number of "
        "milestone points, but got number of schedulers ",
        schedulers_.size(), " and the number of milestones to be equal to ", milestones_.size());
  last_epoch_ = 0;
  for (ParamGroup& g : optimizer_.param_groups()) g.options->set_lr(g.extra["initial_lr"]);
  for (LRScheduler* s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  check_groups("SequentialLR::step");
  ++last_epoch_;
  const auto idx = static_cast<std::size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler* s = schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    s->step(int64_t{0});
  } else {
    s->step();
  }
  last_lr_ = s->get_last_lr();
}

std::string SequentialLR::name() const {
  std::string out = "SequentialLR(";
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    out += (i ? ", " : "") + schedulers_[i]->name();
  return out + ")";
}

SchedulerState SequentialLR::state_dict() const {
  SchedulerState out = LRScheduler::state_dict();
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    for (const auto& [key, value] : schedulers_[i]->state_dict()) {
      out["_schedulers." + std::to_string(i) + "." + key] = value;
    }
  }
  return out;
}

void SequentialLR::load_state_dict(const SchedulerState& state) {
  SchedulerState own;
  std::vector<SchedulerState> parts;
  split_state(state, own, parts);
  // All or nothing: if a part is refused, what was loaded before it is put back.
  const SchedulerState before = state_dict();
  try {
    LRScheduler::load_state_dict(own);
    for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(parts[i]);
  } catch (...) {
    split_state(before, own, parts);
    LRScheduler::load_state_dict(own);
    for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(parts[i]);
    throw;
  }
}

void SequentialLR::split_state(const SchedulerState& state, SchedulerState& own,
                               std::vector<SchedulerState>& parts) const {
  own.clear();
  parts.assign(schedulers_.size(), {});
  for (const auto& [key, value] : state) {
    if (key.rfind("_schedulers.", 0) == 0) {
      // "_schedulers.<i>.<key>", i a decimal index below the number of schedulers.
      const std::size_t dot = key.find('.', 12);
      const std::string index = key.substr(12, dot == std::string::npos ? dot : dot - 12);
      std::size_t i = parts.size();
      if (dot != std::string::npos && !index.empty() && index.size() < 10 &&
          index.find_first_not_of("0123456789") == std::string::npos)
        i = std::stoul(index);
      check(i < parts.size(), "SequentialLR::load_state_dict: bad key '", key, "' (expected ",
            "_schedulers.<i>.<name> with i < ", parts.size(), ")");
      parts[i][key.substr(dot + 1)] = value;
    } else {
      own[key] = value;
    }
  }
}

// ---- ReduceLROnPlateau ----

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(optimizer), options_(std::move(options)) {
  check(options_.factor < 1.0, "ReduceLROnPlateau: factor should be < 1.0, got ", options_.factor);
  check(options_.mode == "min" || options_.mode == "max", "ReduceLROnPlateau: mode ", options_.mode,
        " is unknown!");
  check(options_.threshold_mode == "rel" || options_.threshold_mode == "abs",
        "ReduceLROnPlateau: threshold mode ", options_.threshold_mode, " is unknown!");
  best_ = options_.mode == "min" ? std::numeric_limits<double>::infinity()
                                 : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min")
    return rel ? a < best * (1. - options_.threshold) : a < best - options_.threshold;
  return rel ? a > best * (options_.threshold + 1.) : a > best + options_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  last_epoch_ += 1;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (cooldown_counter_ > 0) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > options_.patience) {
    for (ParamGroup& g : optimizer_.param_groups()) {
      const double old_lr = g.options->get_lr();
      const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
      if (old_lr - new_lr > options_.eps) g.options->set_lr(new_lr);
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
}

std::vector<double> ReduceLROnPlateau::get_last_lr() const {
  std::vector<double> lrs;
  for (const ParamGroup& g : optimizer_.param_groups()) lrs.push_back(g.options->get_lr());
  return lrs;
}

SchedulerState ReduceLROnPlateau::state_dict() const {
  return {{"best", {best_}},
          {"num_bad_epochs", {static_cast<double>(num_bad_epochs_)}},
          {"cooldown_counter", {static_cast<double>(cooldown_counter_)}},
          {"last_epoch", {static_cast<double>(last_epoch_)}}};
}

void ReduceLROnPlateau::load_state_dict(const SchedulerState& state) {
  const char* op = "ReduceLROnPlateau::load_state_dict";
  auto it = state.find("best");
  check(it != state.end() && it->second.size() == 1, op, ": missing 'best'");
  const int64_t bad = state_integer(state, "num_bad_epochs", op);
  const int64_t cooldown = state_integer(state, "cooldown_counter", op);
  const int64_t last = state_integer(state, "last_epoch", op);
  best_ = it->second[0];  // inf until the first metric, as PyTorch's
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  last_epoch_ = last;
}

}  // namespace ember::optim
