// The optimizer machinery shared by every algorithm: groups, state, zero_grad, state_dict.
#include "optim/optimizer.h"

#include <set>

#include "core/autograd/grad_mode.h"
#include "core/error.h"

namespace ember::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  check(!groups.empty(), "optimizer got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  std::set<const TensorImpl*> seen;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) seen.insert(p.impl());
  }
  for (const Tensor& p : group.params) {
    check(p.defined(), "optimizer: a parameter is an undefined tensor");
    check(is_floating(p.dtype()), "optimizer can only optimize floating point tensors, got ",
          dtype_name(p.dtype()), " of shape ", p.shape());
    check(p.is_leaf(), "optimizer can't optimize a non-leaf Tensor (shape ", p.shape(), ")");
    check(seen.insert(p.impl()).second,
          "some parameters appear in more than one parameter group (shape ", p.shape(), ")");
  }
  if (!group.options) group.options = defaults_->clone();
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) {
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        NoGradGuard no_grad;
        p.grad().zero_();
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
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      check(grad.shape() == p.shape() && grad.dtype() == p.dtype(), name(), ": gradient ",
            dtype_name(grad.dtype()), " ", grad.shape(), " does not fit parameter ",
            dtype_name(p.dtype()), " ", p.shape());
      check(p.is_contiguous(), name(), ": parameters must be contiguous (shape ", p.shape(),
            ", strides ", p.strides(), ")");
      update(p, grad.contiguous(), *g.options, state_[p.impl()]);
      p.storage()->bump_version();
    }
  }
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict out;
  int64_t index = 0;
  for (const ParamGroup& g : groups_) {
    OptimizerStateDict::Group group;
    group.options = g.options->to_map();
    for (const auto& [key, value] : g.extra) group.options[key] = value;
    for (const Tensor& p : g.params) {
      auto it = state_.find(p.impl());
      if (it != state_.end() && !it->second.empty()) {
        ParamState copy;
        for (const auto& [key, t] : it->second) copy[key] = t.detach().clone();
        out.state[index] = std::move(copy);
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
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    const auto& saved = dict.param_groups[i];
    check(saved.params.size() == groups_[i].params.size(), op, ": group ", i,
          " of the state dict has ", saved.params.size(), " parameters, the optimizer's has ",
          groups_[i].params.size());
    std::unique_ptr<OptimizerOptions> probe = groups_[i].options->clone();
    for (const auto& [key, value] : saved.options) {
      if (probe->to_map().count(key)) probe->set(key, value);
    }
    for (std::size_t j = 0; j < saved.params.size(); ++j)
      params[saved.params[j]] = &groups_[i].params[j];
  }
  for (const auto& [index, entries] : dict.state) {
    auto it = params.find(index);
    check(it != params.end(), op, ": state for parameter ", index, ", which no group lists");
    for (const auto& [key, t] : entries) {
      check(t.defined(), op, ": state '", key, "' of parameter ", index, " is undefined");
      if (key == "step") continue;
      check(t.shape() == it->second->shape(), op, ": state '", key, "' of parameter ", index,
            " has shape ", t.shape(), ", the parameter ", it->second->shape());
    }
  }
  // Everything fits: apply.
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    const auto& saved = dict.param_groups[i];
    std::map<std::string, double> known = groups_[i].options->to_map();
    groups_[i].extra.clear();
    for (const auto& [key, value] : saved.options) {
      if (known.count(key)) {
        groups_[i].options->set(key, value);
      } else {
        groups_[i].extra[key] = value;
      }
    }
  }
  state_.clear();
  for (const auto& [index, entries] : dict.state) {
    const Tensor& p = *params.at(index);
    ParamState copy;
    for (const auto& [key, t] : entries) {
      Tensor value = t.detach().clone();
      if (key != "step" && value.dtype() != p.dtype()) value = value.to(p.dtype());
      copy[key] = value;
    }
    state_[p.impl()] = std::move(copy);
  }
}

}  // namespace ember::optim
