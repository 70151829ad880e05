// The optimizer machinery shared by every algorithm: groups, state, zero_grad, state_dict.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <typeinfo>

#include "core/base/error.h"
#include "core/base/grad_mode.h"

namespace ember::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  defaults_->validate();
  check(!groups.empty(), defaults_->optimizer_name(), ": optimizer got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

std::vector<ParamGroup> Optimizer::single_group(std::vector<Tensor> params, const char* optimizer) {
  check(!params.empty(), optimizer, ": optimizer got an empty parameter list");
  return {ParamGroup(std::move(params))};
}

void Optimizer::add_param_group(ParamGroup group) {
  const char* who = defaults_->optimizer_name();
  std::set<const TensorImpl*> earlier;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) earlier.insert(p.impl());
  }
  std::map<const TensorImpl*, std::size_t> here;
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    check(p.defined(), who, ": parameter ", i, " of the group is an undefined tensor");
    check(is_floating(p.dtype()), who, ": can only optimize floating point tensors, got ",
          dtype_name(p.dtype()), " of shape ", p.shape());
    check(p.is_leaf(), who, ": can't optimize a non-leaf Tensor (shape ", p.shape(), ")");
    check(!earlier.count(p.impl()), who,
          ": some parameters appear in more than one parameter group (shape ", p.shape(), ")");
    auto [it, added] = here.emplace(p.impl(), i);
    check(added, who, ": the parameter group lists the same parameter twice (at ", it->second,
          " and ", i, ", shape ", p.shape(), ")");
  }
  if (!group.options) {
    group.options = defaults_->clone();
  } else if (const OptimizerOptions& given = *group.options, &own_type = *defaults_;
             typeid(given) != typeid(own_type)) {
    // Another optimizer's options: PyTorch takes the keys it knows from the group's dict and
    // its defaults for the others; the remaining keys stay in the group.
    std::unique_ptr<OptimizerOptions> own = defaults_->clone();
    const std::map<std::string, double> known = own->to_map();
    for (const auto& [key, value] : group.options->to_map()) {
      if (known.count(key)) {
        own->set(key, value);
      } else if (!group.extra.count(key)) {
        group.extra[key] = value;
      }
    }
    group.options = std::move(own);
  }
  group.options->validate();
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) {
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        // PyTorch's set_to_none=False: a gradient with a graph (backward(create_graph=true))
        // or that requires grad is detached first (the same storage, out of the graph, which
        // later accumulations no longer extend or keep alive), then zeroed in place.
        NoGradGuard no_grad;
        Tensor grad = p.grad();
        if (grad.requires_grad()) {
          grad = grad.detach();
          p.set_grad(grad);
        }
        grad.zero_();
      }
    }
  }
}

const ParamState& Optimizer::state(const Tensor& param) const {
  static const ParamState empty_state;
  auto it = state_.find(param.impl());
  return it == state_.end() ? empty_state : it->second;
}

Tensor Optimizer::run_closure(const std::function<Tensor()>& closure) {
  if (!closure) return Tensor();
  return closure();
}

void Optimizer::for_each_param(
    const std::function<void(Tensor&, const Tensor&, const OptimizerOptions&, ParamState&)>&
        update) {
  NoGradGuard no_grad;
  // Every parameter is checked before any is updated: a step refused half-way would leave the
  // model half-stepped.
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      check(grad.shape() == p.shape() && grad.dtype() == p.dtype(), name(), ": gradient ",
            dtype_name(grad.dtype()), " ", grad.shape(), " does not fit parameter ",
            dtype_name(p.dtype()), " ", p.shape());
      check(p.is_contiguous(), name(), ": parameters must be contiguous (shape ", p.shape(),
            ", strides ", p.strides(), ")");
      const auto it = state_.find(p.impl());
      if (it == state_.end()) continue;
      // The state was made for the parameter as it was: a parameter changed in place since
      // (p.double_(), a resize) no longer fits it.
      for (const auto& [key, t] : it->second) {
        if (key == "step") continue;
        check(t.shape() == p.shape() && t.dtype() == p.dtype(), name(), ": state '", key,
              "' of a parameter is ", dtype_name(t.dtype()), " ", t.shape(),
              " but the parameter is now ", dtype_name(p.dtype()), " ", p.shape(),
              " (it changed after an optimizer step; recreate the optimizer or its state)");
      }
    }
  }
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& state = state_[p.impl()];
      update(p, grad.contiguous(), *g.options, state);
      p.storage()->bump_version();
    }
  }
}

OptimizerStateDict Optimizer::state_dict() const { return state_dict(/*copy=*/true); }
OptimizerStateDict Optimizer::state_dict_shared() const { return state_dict(/*copy=*/false); }

OptimizerStateDict Optimizer::state_dict(bool copy) const {
  OptimizerStateDict out;
  int64_t index = 0;
  for (const ParamGroup& g : groups_) {
    OptimizerStateDict::Group group;
    group.options = g.options->to_map();
    for (const auto& [key, value] : g.extra) group.options[key] = value;
    for (const Tensor& p : g.params) {
      auto it = state_.find(p.impl());
      if (it != state_.end() && !it->second.empty()) {
        ParamState state;
        for (const auto& [key, t] : it->second) state[key] = copy ? t.detach().clone() : t.detach();
        out.state[index] = std::move(state);
      }
      group.params.push_back(index++);
    }
    out.param_groups.push_back(std::move(group));
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerStateDict& dict) {
  const char* op = "Optimizer::load_state_dict";
  check(dict.param_groups.size() == groups_.size(), op, ": the state dict has ",
        dict.param_groups.size(), " parameter groups, the ", name(), " optimizer ", groups_.size());
  std::map<int64_t, const Tensor*> params;
  std::vector<std::unique_ptr<OptimizerOptions>> new_options;
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    const auto& saved = dict.param_groups[i];
    check(saved.params.size() == groups_[i].params.size(), op, ": group ", i,
          " of the state dict has ", saved.params.size(), " parameters, the optimizer's has ",
          groups_[i].params.size());
    std::unique_ptr<OptimizerOptions> probe = groups_[i].options->clone();
    const std::map<std::string, double> known = probe->to_map();
    for (const auto& [key, value] : saved.options) {
      if (known.count(key)) probe->set(key, value);
    }
    try {
      probe->validate();
    } catch (const Error& e) {
      fail(op, ": group ", i, " of the state dict: ", e.what());
    }
    new_options.push_back(std::move(probe));
    for (std::size_t j = 0; j < saved.params.size(); ++j) {
      check(params.emplace(saved.params[j], &groups_[i].params[j]).second, op,
            ": the state dict lists parameter ", saved.params[j], " twice");
    }
  }
  const std::vector<std::string> known_keys = known_state();
  std::map<int64_t, const OptimizerOptions*> options_of;
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    for (int64_t index : dict.param_groups[i].params) options_of[index] = new_options[i].get();
  }
  for (const auto& [index, entries] : dict.state) {
    auto it = params.find(index);
    check(it != params.end(), op, ": state for parameter ", index, ", which no group lists");
    const Tensor& p = *it->second;
    for (const auto& [key, t] : entries) {
      check(std::find(known_keys.begin(), known_keys.end(), key) != known_keys.end(), op,
            ": unexpected state '", key, "' of parameter ", index, " for ", name());
      check(t.defined(), op, ": state '", key, "' of parameter ", index, " is undefined");
      check(is_floating(t.dtype()), op, ": state '", key, "' of parameter ", index, " is ",
            dtype_name(t.dtype()), "; expected a floating point tensor");
      if (key == "step") {
        check(t.numel() == 1, op, ": state 'step' of parameter ", index,
              " must hold one number, got shape ", t.shape());
        const double step = t.item();
        check(std::isfinite(step) && step >= 0 && step == std::trunc(step) && step <= 0x1p53, op,
              ": state 'step' of parameter ", index, " must be a whole number >= 0, got ", step);
        continue;
      }
      check(t.shape() == p.shape(), op, ": state '", key, "' of parameter ", index, " has shape ",
            t.shape(), ", the parameter ", p.shape());
    }
    if (entries.empty()) continue;
    for (const std::string& key : required_state(*options_of.at(index))) {
      check(entries.count(key), op, ": the state of parameter ", index, " has no '", key,
            "', which ", name(), " needs (with these options)");
    }
  }
  // Everything fits: apply.
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    const auto& saved = dict.param_groups[i];
    const std::map<std::string, double> known = groups_[i].options->to_map();
    groups_[i].options = std::move(new_options[i]);
    groups_[i].extra.clear();
    for (const auto& [key, value] : saved.options) {
      if (!known.count(key)) groups_[i].extra[key] = value;
    }
  }
  state_.clear();
  for (const auto& [index, entries] : dict.state) {
    const Tensor& p = *params.at(index);
    ParamState copy;
    for (const auto& [key, t] : entries) {
      if (key == "step") {
        // Kept as it was saved, dtype and shape (PyTorch's load_state_dict casts every state
        // tensor to its parameter's dtype but "step"): a float32 step of PyTorch 1.13's Adam
        // stays float32, and counts on in float32.
        copy[key] = t.detach().clone();
        continue;
      }
      Tensor value = t.detach().to(p.dtype()).contiguous().clone();
      copy[key] = value;
    }
    state_[p.impl()] = std::move(copy);
  }
}

}  // namespace ember::optim
