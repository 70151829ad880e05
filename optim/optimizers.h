// SGD, Adam, AdamW, RMSprop and Adagrad, with PyTorch's defaults and libtorch's option names.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "optim/optimizer.h"

namespace ember::optim {

using Betas = std::tuple<double, double>;

// Defines clone/get_lr/set_lr/optimizer_name for an options class.
#define EMBER_OPTIONS_BASICS(Self, Name)                     \
  std::unique_ptr<OptimizerOptions> clone() const override { \
    return std::make_unique<Self>(*this);                    \
  }                                                          \
  double get_lr() const override { return lr_; }             \
  void set_lr(double value) override { lr_ = value; }        \
  std::map<std::string, double> to_map() const override;     \
  void set(const std::string& name, double value) override;  \
  void validate() const override;                            \
  const char* optimizer_name() const override { return Name; }

class SGDOptions : public OptimizerOptions {
 public:
  explicit SGDOptions(double lr) : lr_(lr) {}
  EMBER_OPTIONS_BASICS(SGDOptions, "SGD")
  EMBER_ARG(double, lr);
  EMBER_ARG(double, momentum) = 0;
  EMBER_ARG(double, dampening) = 0;
  EMBER_ARG(double, weight_decay) = 0;
  EMBER_ARG(bool, nesterov) = false;
  EMBER_ARG(bool, maximize) = false;
};

class AdamOptions : public OptimizerOptions {
 public:
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  EMBER_OPTIONS_BASICS(AdamOptions, "Adam")
  EMBER_ARG(double, lr);
  EMBER_ARG(Betas, betas) = {0.9, 0.999};
  EMBER_ARG(double, eps) = 1e-8;
  EMBER_ARG(double, weight_decay) = 0;
  EMBER_ARG(bool, amsgrad) = false;
  EMBER_ARG(bool, maximize) = false;
};

class AdamWOptions : public OptimizerOptions {
 public:
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  EMBER_OPTIONS_BASICS(AdamWOptions, "AdamW")
  EMBER_ARG(double, lr);
  EMBER_ARG(Betas, betas) = {0.9, 0.999};
  EMBER_ARG(double, eps) = 1e-8;
  EMBER_ARG(double, weight_decay) = 1e-2;
  EMBER_ARG(bool, amsgrad) = false;
  EMBER_ARG(bool, maximize) = false;
};

class RMSpropOptions : public OptimizerOptions {
 public:
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  EMBER_OPTIONS_BASICS(RMSpropOptions, "RMSprop")
  EMBER_ARG(double, lr);
  EMBER_ARG(double, alpha) = 0.99;
  EMBER_ARG(double, eps) = 1e-8;
  EMBER_ARG(double, weight_decay) = 0;
  EMBER_ARG(double, momentum) = 0;
  EMBER_ARG(bool, centered) = false;
  EMBER_ARG(bool, maximize) = false;
};

class AdagradOptions : public OptimizerOptions {
 public:
  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  EMBER_OPTIONS_BASICS(AdagradOptions, "Adagrad")
  EMBER_ARG(double, lr);
  EMBER_ARG(double, lr_decay) = 0;
  EMBER_ARG(double, weight_decay) = 0;
  EMBER_ARG(double, initial_accumulator_value) = 0;
  EMBER_ARG(double, eps) = 1e-10;
  EMBER_ARG(bool, maximize) = false;
};

#undef EMBER_OPTIONS_BASICS

// Each optimizer takes either a list of parameters (one group with the given options; an empty
// list is an error, as PyTorch's) or groups (each group's options, or the given ones where a
// group has none). Every option is checked as PyTorch checks its arguments (validate()).
#define EMBER_OPTIMIZER(Name)                                                                \
  class Name : public Optimizer {                                                            \
   public:                                                                                   \
    Name(std::vector<Tensor> params, const Name##Options& options)                           \
        : Name(single_group(std::move(params), #Name), options) {}                           \
    Name(std::vector<ParamGroup> groups, const Name##Options& options);                      \
    Tensor step(const std::function<Tensor()>& closure = nullptr) override;                  \
    std::string name() const override { return #Name; }                                      \
                                                                                             \
   protected:                                                                                \
    std::vector<std::string> required_state(const OptimizerOptions& options) const override; \
    std::vector<std::string> known_state() const override;                                   \
  };

EMBER_OPTIMIZER(SGD)
EMBER_OPTIMIZER(Adam)
EMBER_OPTIMIZER(AdamW)
EMBER_OPTIMIZER(RMSprop)
EMBER_OPTIMIZER(Adagrad)

#undef EMBER_OPTIMIZER

}  // namespace ember::optim
