// Optimizer: parameter groups with their own options, per-parameter state, step() under no-grad
// (parameters whose gradient is undefined are skipped), zero_grad, state_dict / load_state_dict.
// It takes tensors, not modules (optim depends on core only):
//
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Every update reproduces PyTorch 1.13's single-tensor (for-loop) implementation operation by
// operation, in the parameter's dtype.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/args.h"
#include "core/tensor/tensor.h"

namespace ember::optim {

// The options of one parameter group. Each optimizer derives its own (SGDOptions, ...).
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The options by name, numbers only (booleans 0/1, betas as beta1/beta2): what state_dict
  // stores and load_state_dict restores. set() throws on a name the options do not have.
  virtual std::map<std::string, double> to_map() const = 0;
  virtual void set(const std::string& name, double value) = 0;
  // Throws, naming the optimizer and the option, when a value is out of PyTorch's range (a
  // negative lr, momentum, eps, weight decay, a beta outside [0, 1), nan...). The optimizer
  // checks its defaults, every group's options and every loaded state dict's.
  virtual void validate() const = 0;
  // The optimizer these options are for ("SGD", ...).
  virtual const char* optimizer_name() const = 0;
};

// A parameter group. Copies (and moves) keep everything: the parameters, a clone of the
// options and the extra entries.
struct ParamGroup {
  ParamGroup(std::vector<Tensor> params_, std::unique_ptr<OptimizerOptions> options_ = nullptr)
      : params(std::move(params_)), options(std::move(options_)) {}
  ParamGroup(const ParamGroup& other)
      : params(other.params),
        options(other.options ? other.options->clone() : nullptr),
        extra(other.extra) {}
  ParamGroup& operator=(const ParamGroup& other) {
    if (this != &other) {
      params = other.params;
      options = other.options ? other.options->clone() : nullptr;
      extra = other.extra;
    }
    return *this;
  }
  ParamGroup(ParamGroup&&) noexcept = default;
  ParamGroup& operator=(ParamGroup&&) noexcept = default;
  ~ParamGroup() = default;
  std::vector<Tensor> params;
  std::unique_ptr<OptimizerOptions> options;  // null: the optimizer's defaults
  // Scheduler bookkeeping, as PyTorch stores it in the group dict (initial_lr, max_lr, ...).
  std::map<std::string, double> extra;
};

// The state of a parameter: "step", "exp_avg", "momentum_buffer", ...
using ParamState = std::map<std::string, Tensor>;

// What state_dict() returns: parameters are numbered across the groups in order, as PyTorch's.
struct OptimizerStateDict {
  std::map<int64_t, ParamState> state;  // copies of the tensors
  struct Group {
    std::map<std::string, double> options;  // to_map() plus the group's extra entries
    std::vector<int64_t> params;
  };
  std::vector<Group> param_groups;
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient. With a closure, it is called first
  // (with grad enabled) and its loss returned.
  virtual Tensor step(const std::function<Tensor()>& closure = nullptr) = 0;
  // Every gradient reset to undefined (set_to_none) or to zeros.
  void zero_grad(bool set_to_none = true);
  // Adds a group; options left null are the defaults. A parameter may be in one group only.
  // Options of another optimizer's type (AdamOptions given to SGD) are read as PyTorch reads a
  // group dict: the options this optimizer has are taken from them, the rest are its defaults
  // (and the other keys are kept in the group's extra entries).
  void add_param_group(ParamGroup group);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  // The state of one parameter (empty before its first step).
  const ParamState& state(const Tensor& param) const;

  // The options and the state, its tensors copied (a later step leaves them as they are).
  OptimizerStateDict state_dict() const;
  // The same with the state's tensors shared, not copied: they change with the next step. What a
  // save writes straight to its file (optim::save_checkpoint) without a second copy of the state.
  OptimizerStateDict state_dict_shared() const;
  // Restores state_dict() of an optimizer of the same kind over parameters of the same shapes,
  // group by group; throws (changing nothing) when they do not fit: a group or parameter count,
  // an option out of range, a state key missing or unknown, a state tensor of another shape or
  // not floating point, a step that is not a whole number >= 0. The state's tensors are copied,
  // at the parameter's dtype, except "step", kept at the dtype and shape it was saved with (as
  // PyTorch's: a float32 step of PyTorch 1.13's Adam stays float32 under a float64 default).
  void load_state_dict(const OptimizerStateDict& state);

  virtual std::string name() const = 0;

 protected:
  // Calls update(param, grad, group options, state) for every parameter with a gradient, under
  // no-grad, after checking that the gradient fits the parameter.
  void for_each_param(
      const std::function<void(Tensor& param, const Tensor& grad, const OptimizerOptions& options,
                               ParamState& state)>& update);
  Tensor run_closure(const std::function<Tensor()>& closure);
  // The state keys of a parameter under `options`: those a non-empty state must have (PyTorch
  // reads them with state[key]: a KeyError when missing), and every key the optimizer knows.
  virtual std::vector<std::string> required_state(const OptimizerOptions& options) const = 0;
  virtual std::vector<std::string> known_state() const = 0;
  // The one group of a list of parameters (the list-taking constructors): empty is an error.
  static std::vector<ParamGroup> single_group(std::vector<Tensor> params, const char* optimizer);
  // state_dict() (copy) or state_dict_shared().
  OptimizerStateDict state_dict(bool copy) const;

  std::vector<ParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

}  // namespace ember::optim
