// Module hooks, PyTorch's: functions a module calls around its forward and its backward, to watch
// (or replace) what flows through it without changing its code.
//
//   auto handle = block->register_forward_hook(
//       [](nn::Module& m, const nn::TensorList& input, const Tensor& output) {
//         std::cout << m.type_name() << " gave " << output.shape() << "\n";
//       });
//   block->register_full_backward_hook(
//       [](nn::Module&, const nn::TensorList& grad_input, const nn::TensorList& grad_output) {
//         std::cout << "|dL/d out| = " << grad_output[0].norm().item<double>() << "\n";
//       });
//   ...
//   handle.remove();
//
// When they run (torch.nn.Module._call_impl of PyTorch 1.13), for a call of the module, whatever
// its arguments (module(x), a ModuleHolder's call, mha(x, use_cache), criterion(input, target):
// every call goes through nn::call, nn/module.h; module.forward(...) called directly runs none,
// as in PyTorch):
//   1. forward pre-hooks (module, input): may return replacement inputs;
//   2. forward (on the inputs the pre-hooks left);
//   3. forward hooks (module, input, output): may return a replacement output;
//   then, during backward, once the gradient reaches the module's output:
//   4. full backward pre-hooks (module, grad_output): may return replacement gradients (PyTorch
//      2.0's register_full_backward_pre_hook; PyTorch 1.13 has none);
//   and once it has gone through the module to its inputs:
//   5. full backward hooks (module, grad_input, grad_output): may return replacement grad_input.
// Hooks of one kind run in the order they were registered. `input` lists the forward's tensor
// arguments in order (its other arguments, such as use_cache, are not in it); grad_input has one entry per input, the gradient of the loss with respect
// to that input (undefined for one that does not require grad; zeros for one that requires grad
// but did not reach the output, as PyTorch materialises them); grad_output has one entry, the
// gradient with respect to the output. A module none of whose inputs requires grad (the first
// layer of a network) calls its backward hooks as soon as grad_output is known, with grad_input
// all undefined; such a hook must not return a replacement. autograd::grad runs only the nodes
// that lead to its inputs (PyTorch's engine too): grad with respect to a module's input (or
// anything before it) runs its backward hooks, grad with respect to its parameters alone runs
// none when an input requires grad (torch.autograd.grad(y, lin.weight) calls no hook of lin).
//
// Order among independent branches. A module's backward hooks run after those of every module
// called on its output; between modules on branches that do not depend on each other, the
// engine's order decides, and Ember's is not PyTorch's. PyTorch's engine runs, of the nodes
// ready, the one created last (a priority queue on sequence_nr): such hooks run in the reverse
// order of the modules' calls. Ember's runs the node made ready last (a stack: depth first, a
// node's later inputs first): the order follows the shape of the graph. With ua = a(x),
// ub = b(x), uc = c(x) (called in that order):
//   (ua + ub + uc).sum().backward()   PyTorch: c, b, a   Ember: c, b, a
//   (uc + ua + ub).sum().backward()   PyTorch: c, b, a   Ember: b, a, c
//   (uc + b(a(x))).sum().backward()   PyTorch: c, b, a   Ember: b, a, c
// (scripts/fixtures/hook_order.py prints PyTorch's; tests/nn/test_hooks.cpp checks Ember's.)
// Ember keeps its order: the order nodes run is also the order in which the gradients reaching
// one tensor by several paths are summed (x's in attention, from W_query, W_key and W_value), so
// another order may change the last bits of gradients, which Ember's bit-exact tests and recorded
// outputs pin.
//
// Like PyTorch, the backward hooks put an identity node, BackwardHookFunctionBackward, on each
// input that requires grad and on the output (the graph shows them); a forward that modifies one
// of these inputs in place is then refused with PyTorch's error. Unlike PyTorch 1.13, an in-place
// op on the module's output after the call is allowed: the output's history is rebased as usual
// and the hooks see the gradient of the output as the module returned it.
//
// Each register_* returns a RemovableHandle; handle.remove() takes the hook out (a no-op the
// second time, or once the module is gone). Hooks are per module, not per thread: register and
// remove them while no other thread calls the module. A graph through a hooked module does not
// own the module (a module keeping a tensor of its own forward, as attention's keep_trace does,
// would then own itself and never be freed): keep the module until backward. Destroyed before the
// backward pass reaches its backward hooks, they raise an Error naming the module instead of
// running.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::nn {

class Module;

using TensorList = std::vector<Tensor>;

// What each kind of hook is given, and may return (std::nullopt: keep what it was given). The
// register_* functions also take a callable returning void.
using ForwardPreHook = std::function<std::optional<TensorList>(Module&, const TensorList& input)>;
using ForwardHook =
    std::function<std::optional<Tensor>(Module&, const TensorList& input, const Tensor& output)>;
using BackwardPreHook =
    std::function<std::optional<TensorList>(Module&, const TensorList& grad_output)>;
using BackwardHook = std::function<std::optional<TensorList>(Module&, const TensorList& grad_input,
                                                             const TensorList& grad_output)>;

namespace hooks {

// A module's hooks, by kind, each with its handle's id, in registration order.
struct HookTables {
  std::vector<std::pair<uint64_t, ForwardPreHook>> forward_pre;
  std::vector<std::pair<uint64_t, ForwardHook>> forward;
  std::vector<std::pair<uint64_t, BackwardPreHook>> backward_pre;
  std::vector<std::pair<uint64_t, BackwardHook>> backward;
  bool empty() const {
    return forward_pre.empty() && forward.empty() && backward_pre.empty() && backward.empty();
  }
  void remove(uint64_t id);
};

// A fresh id for a hook (one counter for all modules, as PyTorch's RemovableHandle.next_id).
uint64_t next_hook_id();

// The hook as the table stores it: a callable returning void becomes one returning nullopt.
template <typename Result, typename F>
auto returning_optional(F hook) {
  return [hook = std::move(hook)](auto&&... args) mutable -> std::optional<Result> {
    if constexpr (std::is_void_v<decltype(hook(args...))>) {
      hook(args...);
      return std::nullopt;
    } else {
      return hook(args...);
    }
  };
}

// The call with hooks: pre-hooks, backward-hook wiring of the inputs, `forward`, forward hooks,
// backward-hook wiring of the output (nn/hooks.cpp). `hooks` is the module's own table: the
// backward hooks hold it weakly, to know whether the module still exists when they run.
Tensor call_with_hooks(Module& module, const std::shared_ptr<HookTables>& hooks, TensorList inputs,
                       const std::function<Tensor(const TensorList&)>& forward);

}  // namespace hooks

// What register_*_hook returns: remove() takes the hook out of its module.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<hooks::HookTables> tables, uint64_t id)
      : tables_(std::move(tables)), id_(id) {}
  void remove() {
    if (auto tables = tables_.lock()) tables->remove(id_);
  }
  uint64_t id() const { return id_; }

 private:
  std::weak_ptr<hooks::HookTables> tables_;
  uint64_t id_ = 0;
};

}  // namespace ember::nn
