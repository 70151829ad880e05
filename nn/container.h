// Containers of modules: Sequential runs its modules one after the other; ModuleList only holds
// them (its owner decides how to call them). Both name their modules "0", "1", ... so that
// parameters appear as "0.weight" or "heads.1.W_query.weight", as in PyTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <utility>
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
  // ModuleList(a, b, c) with named shared_ptrs to modules of any types (built beforehand, in
  // an order the caller chose). Modules made in the argument list are refused at compile time:
  // C++ leaves the order of function arguments unspecified (GCC builds the last one first), so
  // their random weights would not be PyTorch's. Write ModuleList{...} (braces: in order).
  template <typename... ModuleTypes>
  requires(sizeof...(ModuleTypes) > 0 &&
           (std::is_convertible_v<ModuleTypes, std::shared_ptr<Module>> &&
            ...)) explicit ModuleList(ModuleTypes&&... modules)
      : ModuleList({std::shared_ptr<Module>(modules)...}) {
    static_assert((std::is_lvalue_reference_v<ModuleTypes> && ...),
                  "ModuleList(make_shared<A>(), make_shared<B>()) would build B before A under "
                  "GCC: write ModuleList{make_shared<A>(), ...} (braces run in order) or "
                  "push_back one module at a time");
  }

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

// Runs its modules in order, each on the output of the previous one. The modules are built in
// the order they are written, so the same seed gives PyTorch's weights:
//   auto mlp = nn::make_sequential({std::make_shared<nn::Linear>(3, 4),
//                                   std::make_shared<nn::ReLU>(),
//                                   std::make_shared<nn::Linear>(4, 2)});
//   auto mlp = std::make_shared<nn::Sequential>();           // or one layer at a time
//   mlp->add<nn::Linear>(3, 4).add<nn::ReLU>().add<nn::Linear>(4, 2);
//   Tensor y = mlp->forward(x);
// Not std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4), ...): C++ leaves the
// order of function arguments unspecified and GCC builds the last layer first, so the weights
// would silently differ from PyTorch's. That form does not compile (see below).
class Sequential : public Module {
 public:
  Sequential() = default;
  // Sequential{a, b, c}: the braced list is evaluated left to right.
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // Sequential(a, b, c) with named shared_ptrs to modules of any types (built beforehand).
  // Modules made in the argument list itself are refused at compile time (see above).
  template <typename... ModuleTypes>
  requires(sizeof...(ModuleTypes) > 0 &&
           (std::is_convertible_v<ModuleTypes, std::shared_ptr<Module>> &&
            ...)) explicit Sequential(ModuleTypes&&... modules)
      : Sequential({std::shared_ptr<Module>(modules)...}) {
    static_assert((std::is_lvalue_reference_v<ModuleTypes> && ...),
                  "Sequential(make_shared<A>(), make_shared<B>()) would build B before A under "
                  "GCC: write nn::make_sequential({make_shared<A>(), make_shared<B>()}) (braces "
                  "run in order) or seq->add<A>(...).add<B>(...)");
  }

  Tensor forward(const Tensor& x) override;

  void push_back(std::shared_ptr<Module> module);
  // Builds a ModuleType from args, appends it and returns this Sequential, so calls chain and
  // the layers are built in the order written: seq->add<Linear>(3, 4).add<ReLU>().
  template <typename ModuleType, typename... Args>
  Sequential& add(Args&&... args) {
    push_back(std::make_shared<ModuleType>(std::forward<Args>(args)...));
    return *this;
  }
  std::shared_ptr<Module> operator[](int64_t i) const;  // negative i counts from the end
  int64_t size() const { return static_cast<int64_t>(modules_.size()); }
  bool empty() const { return modules_.empty(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// A Sequential of the modules in the braced list, built in the order written.
inline std::shared_ptr<Sequential> make_sequential(
    std::initializer_list<std::shared_ptr<Module>> modules) {
  return std::make_shared<Sequential>(modules);
}

}  // namespace ember::nn
