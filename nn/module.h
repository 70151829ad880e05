// nn::Module: the base of every layer and model. A module registers what it owns by name:
//
//   class TwoLayers : public nn::Module {
//    public:
//     TwoLayers() {
//       hidden = register_module("hidden", std::make_shared<nn::Linear>(3, 4));
//       out = register_module("out", std::make_shared<nn::Linear>(4, 2));
//       register_buffer("mask", ones({2, 2}));
//     }
//     Tensor forward(const Tensor& x) override { return out->forward(relu(hidden->forward(x))); }
//     std::shared_ptr<nn::Linear> hidden, out;
//   };
//
// and the registry gives PyTorch's answers: named_parameters() lists "hidden.weight",
// "hidden.bias", "out.weight", "out.bias"; state_dict() adds the buffer "mask"; train() and
// eval() reach every submodule; printing shows the same text as PyTorch's repr(module).
//
// Modules are held by std::shared_ptr (a submodule may be shared by several parents, and
// named_modules() hands out pointers to them). A module is not copyable. A module cannot be
// registered inside itself, directly or through its submodules (that would be a cycle).
//
// Replacing a registered tensor. A module whose tensors are members registers them by address:
//   Linear() { weight = empty({out, in}); register_parameter("weight", &weight); }
// The registry then reads the member each time, so after `lin->weight = nn::Parameter(t)`
// parameters(), state_dict(), load_state_dict() and forward all use t. Every Ember module does
// this. The by-value form `register_parameter("W", t)` keeps t in the registry itself; replace
// it with set_parameter("W", t) (a member copy of it would not follow).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/base/ordered_dict.h"
#include "core/base/repr.h"
#include "core/graph/profiler.h"
#include "core/tensor/tensor.h"
#include "nn/holder.h"
#include "nn/hooks.h"

namespace ember::nn {

class Module;

// Ordered dicts of (dotted name, tensor) in PyTorch's order: what named_parameters(),
// named_buffers() and state_dict() return. Keys look like "W_query.weight" or
// "heads.0.W_key.weight"; params["W_query.weight"], find, contains, keys(), values().
using NamedTensors = OrderedDict<std::string, Tensor>;
using StateDict = NamedTensors;
using NamedModules = OrderedDict<std::string, std::shared_ptr<Module>>;

// nn.Parameter(t): t as a leaf that requires grad (sharing t's storage), ready to register:
//   W_query = register_parameter("W_query", nn::Parameter(rand({d_in, d_out})));
Tensor Parameter(const Tensor& t, bool requires_grad = true);

// What load_state_dict found (PyTorch's _IncompatibleKeys): keys the module has that the
// state dict lacks, and keys of the state dict the module does not have.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  // type_name is the name printing shows ("Linear"); left empty, it is the C++ class name
  // without its namespaces, as PyTorch prints the Python class name.
  explicit Module(std::string type_name = "");
  // Submodules only this module holds go with it, taken apart one after another rather than by
  // nested destructor calls: a chain of 100,000 nested modules is freed in bounded stack.
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ---- running ----

  // The computation of the module on one input. Modules that take other arguments declare
  // their own forward (and operator(), through nn::call below) instead; this one then throws,
  // like PyTorch's.
  virtual Tensor forward(const Tensor& x);
  // module(x), PyTorch's module.__call__: nn::call(*this, x), forward inside an
  // nn::ForwardScope with the module's hooks around it. Modules call their submodules this
  // way, as the book's Python does.
  Tensor operator()(const Tensor& x);

  // ---- hooks (nn/hooks.h: when each kind runs, what it sees, what it may return) ----
  // Each takes a callable with the arguments of its kind (ForwardPreHook, ForwardHook,
  // BackwardPreHook, BackwardHook) returning void or std::optional of the replacement.

  template <typename F>
  RemovableHandle register_forward_pre_hook(F hook) {
    return add_hook(&hooks::HookTables::forward_pre,
                    ForwardPreHook(hooks::returning_optional<TensorList>(std::move(hook))));
  }
  template <typename F>
  RemovableHandle register_forward_hook(F hook) {
    return add_hook(&hooks::HookTables::forward,
                    ForwardHook(hooks::returning_optional<Tensor>(std::move(hook))));
  }
  // PyTorch 2.0's (1.13 has no backward pre-hooks): runs when grad_output is known.
  template <typename F>
  RemovableHandle register_full_backward_pre_hook(F hook) {
    return add_hook(&hooks::HookTables::backward_pre,
                    BackwardPreHook(hooks::returning_optional<TensorList>(std::move(hook))));
  }
  template <typename F>
  RemovableHandle register_full_backward_hook(F hook) {
    return add_hook(&hooks::HookTables::backward,
                    BackwardHook(hooks::returning_optional<TensorList>(std::move(hook))));
  }
  bool has_hooks() const { return hooks_ != nullptr && !hooks_->empty(); }
  // Runs forward(inputs) with this module's hooks around it: what operator() and a
  // ModuleHolder's call do when the module has hooks.
  Tensor call_with_hooks(TensorList inputs,
                         const std::function<Tensor(const TensorList&)>& forward) {
    return hooks::call_with_hooks(*this, hooks_, std::move(inputs), forward);
  }

  // ---- registering what the module owns ----
  // Names must be non-empty, hold no dot, and be new to this module (among its parameters,
  // buffers and submodules); each call returns what it registered.

  // A parameter: a leaf tensor (set to require grad unless requires_grad is false). An
  // undefined tensor reserves the name without a parameter, as PyTorch's
  // register_parameter("bias", None) does; such entries are skipped everywhere.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // The same for a member tensor, registered by address: the registry reads *member whenever
  // it is asked, so assigning the member replaces the parameter.
  Tensor register_parameter(const std::string& name, Tensor* member, bool requires_grad = true);
  // A buffer: state that is not trained (a mask, running statistics). A persistent buffer is
  // part of state_dict(). By value or, for a member, by address as above.
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  Tensor register_buffer(const std::string& name, Tensor* member, bool persistent = true);
  // Replaces the value of a registered parameter or buffer (in the member, for one registered
  // by address); a parameter gets requires_grad as at registration.
  void set_parameter(const std::string& name, const Tensor& tensor);
  void set_buffer(const std::string& name, const Tensor& tensor);
  // A submodule; its parameters appear under "name.". Registering this module itself or one of
  // its ancestors (a module that has this one below it) throws: the tree would be a cycle.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> register_module(const std::string& name,
                                              std::shared_ptr<ModuleType> module) {
    add_submodule(name, module);
    return module;
  }
  // The same for a module handle (ModuleHolder or an EMBER_MODULE class); returns the handle.
  template <typename Holder>
  requires std::derived_from<Holder, ModuleHolder<typename Holder::ContainedType>> Holder
  register_module(const std::string& name, Holder holder) {
    add_submodule(name, holder.ptr());
    return holder;
  }

  // Replaces the registered submodule `name` (libtorch's replace_module): the registry, and so
  // parameters(), state_dict(), train() and printing, then see the new module. A submodule
  // member is a plain shared_ptr, so assign it too, from the return value:
  //   mha->W_query = mha->replace_module("W_query", std::make_shared<nn::Linear>(3, 2, false));
  // (Assigning the member alone leaves the registry on the old module, as in libtorch.)
  template <typename ModuleType>
  std::shared_ptr<ModuleType> replace_module(const std::string& name,
                                             std::shared_ptr<ModuleType> module) {
    swap_submodule(name, module);
    return module;
  }
  template <typename Holder>
  requires std::derived_from<Holder, ModuleHolder<typename Holder::ContainedType>> Holder
  replace_module(const std::string& name, Holder holder) {
    swap_submodule(name, holder.ptr());
    return holder;
  }

  // ---- what the module holds ----
  // recurse=false: only this module's own entries. With recurse, every module is visited once,
  // in PyTorch's order: this module's own entries first, then each submodule's (depth first,
  // in registration order). A tensor or module reachable twice is listed once.

  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;  // direct submodules
  NamedModules named_children() const;
  // This module (named "") and every module below it ("W_query", "heads.0.W_key", ...).
  NamedModules named_modules();

  // ---- training mode and gradients ----

  // Sets training mode on this module and every module below it; Dropout reads it.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // Resets the gradient of every parameter to undefined (PyTorch's set_to_none=True).
  void zero_grad();
  // Converts every floating point parameter and buffer (and gradient) to `dtype`, in place:
  // the tensors stay the same objects, so handles such as Linear::weight see the new values
  // (PyTorch's module.to(dtype), which assigns param.data). Integer and bool buffers are kept.
  Module& to(DType dtype);
  Module& double_() { return to(DType::Float64); }  // PyTorch's module.double()
  Module& float_() { return to(DType::Float32); }   // PyTorch's module.float()

  // ---- saving and loading ----

  // Every parameter and persistent buffer, detached (sharing storage), keyed by dotted name:
  // each module's own parameters, then its buffers, then its submodules' entries.
  StateDict state_dict() const;
  // Copies the values of `state` into this module's parameters and buffers (under no-grad).
  // Throws, before copying anything, on shape mismatches and, when strict, on missing or
  // unexpected keys, with PyTorch's message:
  //   Error(s) in loading state_dict for Linear:
  //   	Missing key(s) in state_dict: "bias".
  LoadResult load_state_dict(const StateDict& state, bool strict = true);
  // state_dict() to a safetensors file (with `metadata`), and back through load_state_dict
  // (nn/serialize.cpp; the file format lives in core/io/safetensors.h).
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  LoadResult load(const std::string& path, bool strict = true);

  // ---- printing, as PyTorch's repr(module) ----

  std::string type_name() const;
  // The text inside the parentheses, e.g. "in_features=3, out_features=2, bias=True".
  virtual std::string extra_repr() const { return ""; }
  // "Linear(in_features=3, out_features=2, bias=True)", or the submodules one per line.
  std::string to_string() const;

 private:
  friend class ForwardScope;
  // The dotted name of `module` below this one ("1.att"), or "" when it is not below it.
  std::string path_to(const Module* module) const;
  void add_submodule(const std::string& name, std::shared_ptr<Module> module);
  void swap_submodule(const std::string& name, std::shared_ptr<Module> module);
  void check_acyclic(const std::string& name, const Module* module, const char* op) const;
  void check_new_name(const std::string& name, const char* what) const;
  // Calls visit(prefix, module) on this module and every module below it, each once, in
  // PyTorch's order (pre-order, submodules in registration order); iterative, so the depth of
  // the nesting needs no stack.
  template <typename Visit>
  void visit_modules(const std::string& prefix, std::unordered_set<const Module*>& seen,
                     Visit&& visit) const;
  void append_state(const std::string& prefix, StateDict& out) const;
  // A registered tensor: its name and where it lives (a member of the derived module, or an
  // element of owned_tensors_ for those registered by value).
  struct Slot {
    std::string name;
    Tensor* tensor;
    bool requires_grad = true;  // parameters: what set_parameter gives a new tensor
  };
  using Slots = std::vector<Slot>;
  Tensor add_tensor(Slots& table, const std::string& name, Tensor* slot, bool requires_grad,
                    const char* what);
  Slot& find_slot(Slots& table, const std::string& name, const char* what);
  bool is_ancestor_of(const Module* module) const;  // this module is `module` or holds it below
  // What named_parameters() and named_buffers() list, from the table `table` of each module.
  NamedTensors named_tensors(Slots Module::*table, bool recurse) const;

  template <typename Hook>
  RemovableHandle add_hook(std::vector<std::pair<uint64_t, Hook>> hooks::HookTables::*table,
                           Hook hook) {
    if (!hooks_) hooks_ = std::make_shared<hooks::HookTables>();
    const uint64_t id = hooks::next_hook_id();
    ((*hooks_).*table).emplace_back(id, std::move(hook));
    return RemovableHandle(hooks_, id);
  }

  std::string type_name_;
  bool training_ = true;
  std::shared_ptr<hooks::HookTables> hooks_;  // null until a hook is registered
  Slots parameters_;
  Slots buffers_;
  std::deque<Tensor> owned_tensors_;  // tensors registered by value (a deque: stable addresses)
  std::vector<std::string> non_persistent_buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> submodules_;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

// The call point that anomaly mode and the profiler need (core/graph/record.h): while alive,
// the ops run are recorded as made in this module, under its dotted path from the outermost
// module being run ("trf_blocks.1.att"). Every Ember module's forward opens one first thing,
// and so do Module::operator() and ModuleHolder's call; a module of your own that is called
// through forward() directly may open one too:
//   Tensor forward(const Tensor& x) override { nn::ForwardScope scope(*this); ... }
// When no one records it costs one branch; a module already innermost is not pushed twice.
class ForwardScope {
 public:
  explicit ForwardScope(const Module& module) {
    if (autograd::is_recording()) enter(module);
  }
  ~ForwardScope() {
    event_.reset();  // closes the profiler's event (if any) before the scope it names
    if (pushed_) autograd::detail::pop_scope();
  }
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

 private:
  void enter(const Module& module);
  bool pushed_ = false;
  // While the profiler records: the module's event "nn.Module: Linear", carrying its own path.
  std::optional<autograd::profiler::RecordEvent> event_;
};

namespace hooks {

// For each argument of a call, its place among the call's Tensor arguments (the hooks' input).
template <typename... Args>
constexpr std::array<std::size_t, sizeof...(Args)> tensor_places() {
  constexpr std::array<bool, sizeof...(Args)> is_tensor = {
      std::is_same_v<std::decay_t<Args>, Tensor>...};
  std::array<std::size_t, sizeof...(Args)> places{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < sizeof...(Args); ++i) {
    places[i] = k;
    if (is_tensor[i]) ++k;
  }
  return places;
}

// Argument I as forward gets it under hooks: a Tensor argument is the one the pre-hooks left.
template <std::size_t I, typename... Args, typename A>
decltype(auto) hooked_argument(const TensorList& inputs, A& arg) {
  if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) {
    return static_cast<const Tensor&>(inputs[tensor_places<Args...>()[I]]);
  } else {
    return static_cast<A&>(arg);
  }
}

// The call with hooks: the Tensor arguments are the hooks' input, and forward gets what the
// pre-hooks left in their places, the other arguments as they came.
template <typename M, std::size_t... I, typename... Args>
Tensor call_hooked(M& module, std::index_sequence<I...>, Args&... args) {
  TensorList inputs;
  auto add_tensor = [&inputs](const auto& arg) {
    if constexpr (std::is_same_v<std::decay_t<decltype(arg)>, Tensor>) inputs.push_back(arg);
  };
  (add_tensor(args), ...);
  return module.call_with_hooks(std::move(inputs), [&](const TensorList& in) -> Tensor {
    return module.forward(hooked_argument<I, Args...>(in, args)...);
  });
}

}  // namespace hooks

// module(args...) for a forward of any arguments, PyTorch's module.__call__: the forward inside
// an nn::ForwardScope, with the module's hooks around it (nn/hooks.h) when it returns a Tensor
// and takes at least one. The hooks' `input` lists the Tensor arguments in order; the others
// (use_cache, a GPTForward) go to forward as they are, as the book's keyword arguments
// (`self.att(x, use_cache=use_cache)`) are not part of PyTorch's hook input. Every call of a
// module in Ember goes through here: Module::operator(), ModuleHolder's call, and the
// operator() of modules whose forward takes more (a loss's (input, target),
// MultiHeadAttention's (x, use_cache)), so no way of calling a module skips its hooks.
template <typename M, typename... Args>
decltype(auto) call(M& module, Args&&... args) {
  ForwardScope scope(module);
  using Output = decltype(module.forward(std::forward<Args>(args)...));
  if constexpr (std::is_same_v<Output, Tensor> &&
                (std::is_same_v<std::decay_t<Args>, Tensor> || ...)) {
    if (module.has_hooks()) {
      return hooks::call_hooked(module, std::index_sequence_for<Args...>{}, args...);
    }
  }
  return module.forward(std::forward<Args>(args)...);
}

// Python's repr of a float, for extra_repr: 0.5 -> "0.5", 0.0 -> "0.0", 1e-5 -> "1e-05".
using ember::float_repr;  // core/base/repr.h

}  // namespace ember::nn
