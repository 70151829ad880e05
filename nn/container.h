// Containers of modules: Sequential runs its modules one after the other; ModuleList only holds
// them (its owner decides how to call them). Both name their modules "0", "1", ... so that
// parameters appear as "0.weight" or "heads.1.W_query.weight", as in PyTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

// Holds modules in a list, registered as "0", "1", ...:
//   auto heads = register_module("heads", std::make_shared<nn::ModuleList>());
//   for (int i = 0; i < num_heads; ++i) heads->push_back(std::make_shared<CausalAttention>(...));
//   for (const auto& head : *heads) outputs.push_back((*head)(x));
class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  // ModuleList(a, b, c) with shared_ptrs to modules of any types.
  template <typename... ModuleTypes>
  explicit ModuleList(std::shared_ptr<ModuleTypes>... modules)
      : ModuleList({std::shared_ptr<Module>(std::move(modules))...}) {}

  void push_back(std::shared_ptr<Module> module);
  // The i-th module; a negative i counts from the end, as in Python.
  std::shared_ptr<Module> operator[](int64_t i) const;
  // The i-th module as the class it is (heads->at<CausalAttention>(0)); throws if it is not one.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> at(int64_t i) const {
    auto module = std::dynamic_pointer_cast<ModuleType>((*this)[i]);
    check(module != nullptr, "ModuleList::at: module ", i, " is a ", (*this)[i]->type_name(),
          ", not the type asked for");
    return module;
  }
  int64_t size() const { return static_cast<int64_t>(modules_.size()); }
  bool empty() const { return modules_.empty(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Runs its modules in order, each on the output of the previous one:
//   auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4),
//                                               std::make_shared<nn::ReLU>(),
//                                               std::make_shared<nn::Linear>(4, 2));
//   Tensor y = (*mlp)(x);
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // Sequential(a, b, c) with shared_ptrs to modules of any types.
  template <typename... ModuleTypes>
  explicit Sequential(std::shared_ptr<ModuleTypes>... modules)
      : Sequential({std::shared_ptr<Module>(std::move(modules))...}) {}

  Tensor forward(const Tensor& x) override;

  void push_back(std::shared_ptr<Module> module);
  std::shared_ptr<Module> operator[](int64_t i) const;  // negative i counts from the end
  int64_t size() const { return static_cast<int64_t>(modules_.size()); }
  bool empty() const { return modules_.empty(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace ember::nn
