// ModuleHolder<Impl>: libtorch's module handle. It owns a module through a shared_ptr and is
// called like a function, so user code never writes (*m)(x):
//   nn::ModuleHolder<nn::Linear> lin(3, 2);      // builds the Linear
//   Tensor y = lin(x);                           // lin->forward(x)
//   lin->weight, lin->parameters(), *lin         // the module itself
//   register_module("proj", lin);                // registers it (returns the holder)
// It converts to std::shared_ptr<Impl> (or to a base such as std::shared_ptr<nn::Module>), so
// every API taking a module pointer takes a holder. Every Ember module works in one, the
// attention modules included: nn::ModuleHolder<nn::MultiHeadAttention> mha(3, 2, 6, 0.0, 2).
//
// For your own modules, EMBER_MODULE is libtorch's TORCH_MODULE:
//   class BlockImpl : public nn::Module { ... Tensor forward(const Tensor& x) override; };
//   EMBER_MODULE(Block);                         // Block is ModuleHolder<BlockImpl>
//   Block block(args...);  Tensor y = block(x);
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/base/error.h"
#include "core/tensor/tensor.h"

namespace ember::nn {

// module(args...) with the module's hooks (nn/module.h, which includes this file).
template <typename M, typename... Args>
decltype(auto) call(M& module, Args&&... args);

template <typename Impl>
class ModuleHolder {
 public:
  using ContainedType = Impl;

  // Builds the module: ModuleHolder<Linear>(3, 2) is std::make_shared<Linear>(3, 2). Without
  // arguments, the module's default constructor (when it has one).
  template <typename... Args>
  requires std::constructible_from<Impl, Args...>
  explicit ModuleHolder(Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  // Holds an existing module (shared, not copied).
  ModuleHolder(std::shared_ptr<Impl> module) : impl_(std::move(module)) {}  // NOLINT: implicit
  // An empty holder, to be assigned later (libtorch's `Linear lin{nullptr}`).
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    check(impl_ != nullptr, "ModuleHolder: accessing an empty holder (built from nullptr)");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  // std::shared_ptr<Impl>, or a pointer to one of its bases (std::shared_ptr<nn::Module>).
  template <typename T>
  requires std::is_convertible_v<Impl*, T*>
  operator std::shared_ptr<T>() const {  // NOLINT: implicit
    return impl_;
  }

  // The module's forward: lin(x) is lin->forward(x), whatever arguments forward takes, called
  // as PyTorch's module(...) calls it: through nn::call (nn/module.h), inside an
  // nn::ForwardScope (for anomaly mode and the profiler) and with the module's hooks around it.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) const {
    return ::ember::nn::call(*get(), std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ember::nn

// EMBER_MODULE(Name): declares Name as the holder of the module class NameImpl (libtorch's
// TORCH_MODULE).
#define EMBER_MODULE(Name)                                     \
  class Name : public ::ember::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::ember::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }
