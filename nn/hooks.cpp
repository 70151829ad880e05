// Module hooks: the call (forward pre-hooks, forward, forward hooks) and the backward wiring, as
// torch/nn/modules/module.py (_call_impl) and torch/utils/hooks.py (BackwardHook) of PyTorch
// 1.13, with the backward pre-hooks of PyTorch 2.0.
//
// The backward wiring. PyTorch puts the module's tensor inputs through one identity Function with
// several outputs (BackwardHookFunction), so one node receives every grad_input at once, after
// the module's own backward, and calls the hooks there. An Ember node has one output, so the same
// node is built from three kinds:
//
//   x_1 ─┐                                               ┌─ InputHook(1) ─ x_1' ─┐
//   x_2 ─┴─ JoinInputs ── token (0-d, no value of use) ──┴─ InputHook(2) ─ x_2' ─┴─ forward ─ y
//   y ── OutputHook ── y'  (what the caller gets)
//
// Backward: OutputHook gets grad_output (the backward pre-hooks may replace it) and passes it on.
// Each InputHook stores the gradient of its input and sends a zero to the token; JoinInputs runs
// once every InputHook has (the engine counts the edges), calls the backward hooks with all of
// grad_input, and sends the (replaced) gradients on to x_1, x_2. The gradients themselves are
// never touched, so a hooked module computes the same bits as an unhooked one.
#include "nn/hooks.h"

#include <atomic>
#include <string>

#include "core/base/grad_mode.h"
#include "core/graph/function.h"
#include "nn/module.h"

namespace ember::nn {

namespace hooks {

void HookTables::remove(uint64_t id) {
  auto drop = [id](auto& table) {
    std::erase_if(table, [id](const auto& entry) { return entry.first == id; });
  };
  drop(forward_pre);
  drop(forward);
  drop(backward_pre);
  drop(backward);
}

uint64_t next_hook_id() {
  static std::atomic<uint64_t> next{0};
  return next++;
}

}  // namespace hooks

namespace {

// What one call's backward hooks share: the module, the hooks as they were at the call, and the
// gradients gathered during backward.
struct BackwardHookState {
  // The module, not owned: a module that keeps a tensor of its own forward (a trace, an
  // activation a hook stores) would own the graph, which would own the module (a leak). Its hook
  // table, which dies with it, tells whether it still exists.
  Module* module = nullptr;
  std::weak_ptr<const hooks::HookTables> tables;
  std::string type_name;  // for the error when it does not
  std::vector<BackwardPreHook> pre_hooks;
  std::vector<BackwardHook> hooks;
  std::size_t n_inputs = 0;
  std::vector<std::size_t> wrapped;    // which inputs went through an InputHook (they require grad)
  std::vector<Tensor> wrapped_inputs;  // those inputs, detached (for zeros of their shape)
  TensorList grad_inputs;              // per wrapped input, what its InputHook received
  std::optional<TensorList> grad_outputs;

  // torch/utils/hooks.py's _pack_with_none: one entry per input, undefined where none.
  TensorList packed_grad_inputs() const {
    TensorList out(n_inputs);
    for (std::size_t k = 0; k < wrapped.size(); ++k) out[wrapped[k]] = grad_inputs[k];
    return out;
  }

  // The module the hooks are given, or an Error if it was destroyed after the call.
  Module& live_module() const {
    check(!tables.expired(), type_name,
          ": the module was destroyed before the backward pass reached its backward hooks; keep "
          "it alive until backward");
    return *module;
  }

  // OutputHook's backward: the pre-hooks, then (when no input requires grad) the hooks.
  Tensor on_grad_output(const Tensor& grad) {
    grad_outputs = TensorList{grad};
    for (const BackwardPreHook& hook : pre_hooks) {
      std::optional<TensorList> replaced = call_client(type_name, "a full backward pre-hook", [&] {
        return hook(live_module(), *grad_outputs);
      });
      if (!replaced) continue;
      check(replaced->size() == grad_outputs->size(),
            "Backward pre hook returned an invalid number of grad_output, got ", replaced->size(),
            ", but expected ", grad_outputs->size());
      grad_outputs = std::move(*replaced);
    }
    const Tensor out = (*grad_outputs)[0];
    if (wrapped.empty()) {
      const TensorList none(n_inputs);
      for (const BackwardHook& hook : hooks) {
        std::optional<TensorList> result = call_client(type_name, "a full backward hook", [&] {
          return hook(live_module(), none, *grad_outputs);
        });
        bool all_undefined = true;
        if (result) {
          for (const Tensor& t : *result) all_undefined = all_undefined && !t.defined();
        }
        check(all_undefined,
              "Backward hook for Modules where no input requires gradient should always return "
              "None or None for all gradients.");
      }
      grad_outputs.reset();
    }
    return out;
  }

  // JoinInputs' backward: the hooks, with every grad_input; returns the wrapped inputs' gradients.
  std::vector<Tensor> on_grad_inputs() {
    // An input that requires grad but whose gradient did not come back gets zeros (PyTorch's
    // BackwardHookFunction materialises the gradients of its unused outputs).
    for (std::size_t k = 0; k < wrapped.size(); ++k) {
      if (!grad_inputs[k].defined()) grad_inputs[k] = zeros_like(wrapped_inputs[k]);
    }
    if (!grad_outputs) {
      // The gradient reached the inputs without passing through the output (PyTorch: "e.g.
      // when you're doing double backward"): no hook runs.
      return std::exchange(grad_inputs, TensorList(wrapped.size()));
    }
    TensorList result = packed_grad_inputs();
    for (const BackwardHook& hook : hooks) {
      std::optional<TensorList> replaced = call_client(type_name, "a full backward hook", [&] {
        return hook(live_module(), result, *grad_outputs);
      });
      if (!replaced) continue;
      check(replaced->size() == result.size(),
            "Backward hook returned an invalid number of grad_input, got ", replaced->size(),
            ", but expected ", result.size());
      result = std::move(*replaced);
    }
    grad_outputs.reset();
    grad_inputs.assign(wrapped.size(), Tensor());
    std::vector<Tensor> out;
    for (std::size_t i : wrapped) out.push_back(result[i]);
    return out;
  }
};

using State = std::shared_ptr<BackwardHookState>;

// The inputs' side: one node that receives every grad_input (through the token) and calls the
// hooks. Its forward makes the token.
struct JoinInputs : autograd::OpFunction<JoinInputs> {
  static constexpr const char* name = "BackwardHookFunctionBackward";
  static constexpr const char* formula =
      "identity on the module's inputs: dx_i/dx_i = 1; calls the module's backward hooks with "
      "grad_input";
  State state;
  Tensor forward(const std::vector<Tensor>& /*inputs*/, const State& s) {
    state = s;
    return zeros({});
  }
  std::vector<Tensor> backward(const Tensor& /*token_grad*/) { return state->on_grad_inputs(); }
};

// One input: the module sees x' (x's storage); the gradient reaching x' is kept for JoinInputs.
struct InputHook : autograd::OpFunction<InputHook> {
  static constexpr const char* name = "BackwardHookFunctionBackward";
  static constexpr const char* formula = "identity on a module input: dx'/dx = 1";
  static constexpr bool has_constant_gradients = true;  // the token's zero
  State state;
  std::size_t index = 0;
  Tensor forward(const Tensor& /*token*/, const Tensor& x, const State& s, std::size_t k) {
    state = s;
    index = k;
    return x.detach();
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    state->grad_inputs[index] = grad;
    return {zeros({}), Tensor()};
  }
};

// The output: the gradient reaching y' is grad_output.
struct OutputHook : autograd::OpFunction<OutputHook> {
  static constexpr const char* name = "BackwardHookFunctionBackward";
  static constexpr const char* formula = "identity on the module's output: dy'/dy = 1";
  State state;
  Tensor forward(const Tensor& y, const State& s) {
    state = s;
    return y.detach();
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {state->on_grad_output(grad)}; }
};

// Wires the inputs that require grad through the InputHooks (torch/utils/hooks.py's
// setup_input_hook); returns the inputs the forward gets.
TensorList setup_input_hook(BackwardHookState& s, const State& shared, TensorList inputs) {
  s.n_inputs = inputs.size();
  if (!GradMode::is_enabled()) return inputs;
  std::vector<Tensor> requiring;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      s.wrapped.push_back(i);
      requiring.push_back(inputs[i]);
      s.wrapped_inputs.push_back(inputs[i].detach());
    }
  }
  if (requiring.empty()) return inputs;
  s.grad_inputs.assign(requiring.size(), Tensor());
  const Tensor token = autograd::apply<JoinInputs>(requiring, shared);
  for (std::size_t k = 0; k < s.wrapped.size(); ++k) {
    const std::size_t i = s.wrapped[k];
    inputs[i] = autograd::apply<InputHook>(token, inputs[i].detach(), shared, k);
  }
  return inputs;
}

}  // namespace

namespace hooks {

Tensor call_with_hooks(Module& module, const std::shared_ptr<HookTables>& hooks, TensorList inputs,
                       const std::function<Tensor(const TensorList&)>& forward) {
  // The hooks as they are now: one that registers or removes another changes the next call.
  const HookTables now = *hooks;
  const std::size_t arity = inputs.size();
  for (const auto& entry : now.forward_pre) {
    // (entry.second, not a structured binding: clang before 16 cannot capture one in a lambda.)
    const auto& hook = entry.second;
    std::optional<TensorList> replaced =
        call_client(module.type_name(), "a forward pre-hook", [&] { return hook(module, inputs); });
    if (!replaced) continue;
    check(replaced->size() == arity, module.type_name(), ": a forward pre-hook returned ",
          replaced->size(), " inputs, but forward takes ", arity);
    inputs = std::move(*replaced);
  }

  State state;
  std::vector<int64_t> versions;
  if (!now.backward.empty() || !now.backward_pre.empty()) {
    state = std::make_shared<BackwardHookState>();
    state->module = &module;
    state->tables = hooks;
    state->type_name = module.type_name();
    for (const auto& [id, hook] : now.backward_pre) state->pre_hooks.push_back(hook);
    for (const auto& [id, hook] : now.backward) state->hooks.push_back(hook);
    inputs = setup_input_hook(*state, state, std::move(inputs));
    for (std::size_t i : state->wrapped) versions.push_back(inputs[i].version());
  }

  Tensor output = forward(inputs);

  if (state) {
    // An input modified in place would leave the caller's tensor with its new values and its old
    // history; PyTorch refuses it (in-place on a view made by a custom Function).
    for (std::size_t k = 0; k < state->wrapped.size(); ++k) {
      check(inputs[state->wrapped[k]].version() == versions[k], "Output ", k,
            " of BackwardHookFunctionBackward is a view and is being modified inplace. This view "
            "was created inside a custom Function (or because an input was returned as-is) and "
            "the autograd logic to handle view+inplace would override the custom backward "
            "associated with the custom Function, leading to incorrect gradients. This behavior "
            "is forbidden. You can fix this by cloning the output of the custom Function.");
    }
  }
  for (const auto& entry : now.forward) {
    const auto& hook = entry.second;
    std::optional<Tensor> replaced = call_client(module.type_name(), "a forward hook",
                                                 [&] { return hook(module, inputs, output); });
    if (replaced) output = std::move(*replaced);
  }
  // torch/utils/hooks.py's setup_output_hook: only an output that requires grad is wired.
  if (state && GradMode::is_enabled() && output.defined() && output.requires_grad()) {
    output = autograd::apply<OutputHook>(output, state);
  }
  return output;
}

}  // namespace hooks

}  // namespace ember::nn
