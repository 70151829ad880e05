// OpFunction<Op>: how a differentiable op of Ember is written. One struct per op holds its forward
// and its backward side by side, plus the members its backward needs. (A user's own op is written
// with ember::autograd::Function<T>, libtorch's spelling, in core/autograd/function.h; it is
// wired into the same graph by the same Node machinery.)
//
//   struct Exp : OpFunction<Exp> {
//     static constexpr const char* name = "ExpBackward0";
//     static constexpr const char* formula = "y = e^x:  dy/dx = e^x = y";  // shown by explore
//     Tensor forward(const Tensor& x) {
//       Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return std::exp(v); });
//       save_for_backward({y});  // d(e^x)/dx = e^x: keep the output
//       return y;
//     }
//     std::vector<Tensor> backward(const Tensor& grad) { return {grad * saved(0)}; }
//   };
//   Tensor exp(const Tensor& x) { return apply<Exp>(x); }
//
// (as written in core/ops/arithmetic.cpp, where unary_kernel maps a function over a tensor).
//
// apply<Op>(args...) runs forward without recording, and if any tensor argument requires grad,
// wires a Node holding the Op into the graph. Backward runs in no-grad mode, on plain tensors,
// except under create_graph (see SavedTensors and core/autograd/engine.cpp).
// apply is also the recording hook's (core/graph/record.h): autograd::profiler times every
// op's forward there, and anomaly mode gives each node the module path and labels of its forward.
//
// A fused op (a kernel doing in one pass what a chain of ops would) states its backward twice,
// side by side:
//
//   struct LayerNorm : OpFunction<LayerNorm> {
//     Tensor forward(...);                                     // the kernel
//     std::vector<Tensor> backward(const Tensor& grad);        // the formula, in Ember ops
//     std::vector<Tensor> fused_backward(const Tensor& grad);  // the same formula, one kernel
//   };
//
// `backward` is the definition: written with ops, it records its own graph under create_graph,
// so the gradient can be differentiated again. `fused_backward` computes the same values (to
// float rounding, or bit for bit) in one pass and records nothing. The choice is made in one
// place, FunctionNode::apply below: a first-order backward (grad mode off) runs fused_backward,
// a backward with create_graph runs backward (tests/core/graph/test_fused_dispatch.cpp).
#pragma once

#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/grad_mode.h"
#include "core/graph/node.h"
#include "core/graph/profiler.h"

namespace ember::autograd {

// Saved tensors: detached handles (no ownership cycle with the output) plus the storage version
// they were saved at, so an in-place change before backward is caught.
//
// Higher-order gradients (PyTorch's SavedVariable): a backward run with create_graph records its
// own graph, so what it reads from here must keep its autograd identity. After forward, `bind`
// tells which saved tensors are inputs of the op (their gradient edge is kept: the same Node the
// op's next_functions already hold, so no new ownership) and which is the op's own output (a weak
// pointer to the node: the output's grad_fn is this node, and a strong one would be a cycle).
// `get` in grad mode (only inside a create_graph backward) hands out a handle with that identity;
// in no-grad mode (every first-order backward) it returns the detached handle, as before.
// Anything else saved (an intermediate such as layer_norm's rstd, or a mask) is a constant.
class Node;
class SavedTensors {
 public:
  void save(const std::vector<Tensor>& tensors);
  // After forward and connect: finds the saved tensors that are the op's inputs or its output.
  void bind(const std::shared_ptr<Node>& node, const ember::detail::ObjectVector<Tensor>& inputs,
            const Tensor& output);
  // Before bind, for an op with several outputs (a custom Function, core/autograd/function.h):
  // a saved tensor that is outputs[k] gets nodes[k] (the node its gradient flows to) as its
  // grad_fn under create_graph; bind then leaves it alone.
  void bind_outputs(const std::vector<Tensor>& outputs,
                    const std::vector<std::shared_ptr<Node>>& nodes);
  // The i-th saved tensor; throws if freed by an earlier backward or modified in place.
  Tensor get(std::size_t i, const std::string& node_name) const;
  void release() {
    tensors_.clear();
    originals_.clear();
    edges_.clear();
    output_nodes_.clear();
    released_ = true;
  }
  bool released() const { return released_; }
  bool empty() const { return tensors_.empty(); }
  const std::vector<Tensor>& all() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  std::vector<uint64_t> versions_;
  // Per saved tensor, only between save and bind: the TensorImpl it was (for matching).
  std::vector<const TensorImpl*> originals_;
  // Per saved tensor, after bind (empty when nothing saved requires grad): the gradient edge of
  // a saved input that requires grad; null otherwise.
  std::vector<std::shared_ptr<Node>> edges_;
  int output_index_ = -1;     // which saved tensor is the op's output, or -1
  std::weak_ptr<Node> self_;  // the node, for the saved output's grad_fn
  // Per saved tensor, after bind_outputs (empty otherwise): the node of the output it is.
  std::vector<std::weak_ptr<Node>> output_nodes_;
  bool released_ = false;
};

template <typename Derived>
struct OpFunction {
  void save_for_backward(const std::vector<Tensor>& tensors) {
    if (recording_) saved_.save(tensors);
  }
  Tensor saved(std::size_t i) const { return saved_.get(i, node_name_); }
  SavedTensors saved_;
  // The name its errors give: Op::name of the op apply ran (set by apply), which may derive from
  // Derived (Minimum from MaxMin) and so have a name of its own.
  const char* node_name_ = Derived::name;
  // Set by apply: false when the call is not recorded (no-grad mode, or no input requires grad),
  // so no backward will ever read what forward saves, and save_for_backward keeps nothing.
  bool recording_ = true;
};

namespace detail {
// An op whose backward may return a constant (zeros_like(grad): copy_'s old self, pow(x, 0))
// says so with `static constexpr bool has_constant_gradients = true;`: check_differentiable
// then lets such a gradient through without a graph, as PyTorch does.
template <typename Op>
constexpr bool has_constant_gradients() {
  if constexpr (requires { Op::has_constant_gradients; }) {
    return Op::has_constant_gradients;
  } else {
    return false;
  }
}
// An op with a kernel for its first-order backward defines `fused_backward` beside `backward`.
template <typename Op>
constexpr bool has_fused_backward() {
  return requires(Op & op, const Tensor& grad) { op.fused_backward(grad); };
}
// An op whose backward is a raw kernel with no double backward yet says so with
// `static constexpr bool twice_differentiable = false;`: under create_graph every gradient it
// returns gets the NotImplemented node below, even when the incoming gradient has no graph.
template <typename Op>
constexpr bool twice_differentiable() {
  if constexpr (requires { Op::twice_differentiable; }) {
    return Op::twice_differentiable;
  } else {
    return true;
  }
}
// Under create_graph: a gradient that does not require grad although the incoming one does was
// computed by a raw kernel, not by ops, so it has no graph and its derivative would silently be
// zero. Such a gradient is handed on with a NotImplemented node as its grad_fn, which raises an
// Error naming `op` if anything differentiates through it (PyTorch's "the derivative for ... is
// not implemented"). Every op of Ember is twice differentiable; this is the safety net.
// `once_differentiable`: the op declared it (a custom Function's raw backward), and the error is
// PyTorch's for @once_differentiable.
void check_differentiable(const std::string& op, std::vector<Tensor>& grads,
                          const Tensor& grad_output, const Node& node, bool always,
                          bool once_differentiable = false);
}  // namespace detail

template <typename Op>
class FunctionNode : public Node {
 public:
  Op op;
  std::string name() const override { return Op::name; }
  std::vector<Tensor> apply(const Tensor& grad_output) override {
    if (op.saved_.released()) {
      fail("Trying to backward through the graph a second time (", Op::name,
           " has freed its saved tensors). Saved intermediate values of the graph are freed "
           "when you call backward() or autograd::grad(); specify retain_graph=true if you "
           "need to backward through the graph a second time.");
    }
    // Runs in the engine's grad mode: off in a first-order backward, where a fused op's kernel
    // computes the gradients; on in a backward with create_graph, where the formula's ops record
    // the graph of the gradient (so it can be differentiated again).
    std::vector<Tensor> grads;
    if constexpr (detail::has_fused_backward<Op>()) {
      grads = GradMode::is_enabled() ? op.backward(grad_output) : op.fused_backward(grad_output);
    } else {
      grads = op.backward(grad_output);
    }
    if constexpr (!detail::has_constant_gradients<Op>()) {
      if (GradMode::is_enabled()) {
        detail::check_differentiable(Op::name, grads, grad_output, *this,
                                     !detail::twice_differentiable<Op>());
      }
    }
    return grads;
  }
  void release_saved() override {
    if (!op.saved_.empty()) op.saved_.release();
  }
  // Op::formula; "" for an op that has none (a test's own op): every op of core/ops and nn/ has
  // one (tests/core/autograd/test_gradcheck.cpp, GradcheckTable.EveryOpHasAFormula).
  const char* formula() const override {
    if constexpr (requires { Op::formula; }) {
      return Op::formula;
    } else {
      return "";
    }
  }
  std::vector<Tensor> saved_tensors() const override { return op.saved_.all(); }
  bool saved_released() const override { return op.saved_.released(); }
};

// RAII: while alive, every node recorded keeps its output's value (Node::kept_value, a detached
// handle sharing the output's storage), so autograd::explore can show intermediate values that
// no variable holds. Off by default: a graph normally keeps only what backward needs.
class KeepValuesGuard {
 public:
  KeepValuesGuard() : previous_(is_enabled()) { set_enabled(true); }
  ~KeepValuesGuard() { set_enabled(previous_); }
  KeepValuesGuard(const KeepValuesGuard&) = delete;
  KeepValuesGuard& operator=(const KeepValuesGuard&) = delete;
  static bool is_enabled();
  static void set_enabled(bool enabled);

 private:
  bool previous_;
};

namespace detail {
inline void collect_tensors(ember::detail::ObjectVector<Tensor>&) {}
template <typename First, typename... Rest>
void collect_tensors(ember::detail::ObjectVector<Tensor>& out, const First& first,
                     const Rest&... rest) {
  if constexpr (std::is_same_v<std::decay_t<First>, Tensor>) {
    out.push_back(first);
  } else if constexpr (std::is_same_v<std::decay_t<First>, std::vector<Tensor>>) {
    out.insert(out.end(), first.begin(), first.end());
  }
  collect_tensors(out, rest...);
}
// f(t) for every tensor argument, in order (as collect_tensors lists them), without copying.
template <typename F, typename... Args>
void for_each_tensor(F&& f, const Args&... args) {
  auto visit = [&f](const auto& arg) {
    using A = std::decay_t<decltype(arg)>;
    if constexpr (std::is_same_v<A, Tensor>) {
      f(arg);
    } else if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
      for (const Tensor& t : arg) f(t);
    }
  };
  (visit(args), ...);
}
// The op's name from its node's name: "NativeLayerNormBackward0" -> "native_layer_norm".
std::string op_name(const std::string& node_name);
// An undefined tensor passed to an op: "sum: expected a defined tensor, got an undefined one ...".
[[noreturn]] void fail_undefined_input(const char* node_name);
// A view older than the history of its base (ember::detail::view_is_stale) passed to an op
// with grad mode on.
[[noreturn]] void fail_stale_input(const char* node_name, const Tensor& t);
// An op's std::bad_alloc (a kernel's scratch memory: the tensors' own is an Error already) as an
// Error naming the op and its inputs' shapes.
[[noreturn]] void fail_out_of_memory(const char* node_name, const std::vector<Shape>& shapes);
// Ops whose tensor arguments may be undefined (optional weight/bias) say so with
// `static constexpr bool allows_undefined_inputs = true;` and check their other inputs.
template <typename Op>
constexpr bool allows_undefined_inputs() {
  if constexpr (requires { Op::allows_undefined_inputs; }) {
    return Op::allows_undefined_inputs;
  } else {
    return false;
  }
}
// The profiler's name for Op's forward: "ember::mm" for MmBackward0 (as PyTorch's "aten::mm").
template <typename Op>
const std::string& forward_event_name() {
  static const std::string name = "ember::" + op_name(Op::name);
  return name;
}
// The op's name for errors, made once: "mm" for MmBackward0.
template <typename Op>
const char* error_name() {
  static const std::string name = op_name(Op::name);
  return name.c_str();
}
// The shapes of the tensor arguments, in order ([] for an undefined one), for the profiler.
template <typename... Args>
std::vector<Shape> tensor_shapes(const Args&... args) {
  std::vector<Shape> shapes;
  for_each_tensor(
      [&shapes](const Tensor& t) { shapes.push_back(t.defined() ? t.shape() : Shape{}); }, args...);
  return shapes;
}
// Hooks the node into the graph: edges to the inputs, grad_fn of the output.
void connect(const std::shared_ptr<Node>& node, const ember::detail::ObjectVector<Tensor>& inputs,
             Tensor& output);
}  // namespace detail

// Runs Op on the arguments (Tensors, vectors of Tensors, and plain values, in Op::forward's
// order) and records it in the graph when a tensor argument requires grad.
template <typename Op, typename... Args>
Tensor apply(const Args&... args) {
  OpScope scope(detail::error_name<Op>());  // names the size errors of the buffers it allocates
  // The recording hook (record.h): who records, read once; when no one does, this load and a
  // branch are all it costs.
  const unsigned recording = recorders();
  std::optional<profiler::RecordEvent> record;
  if (recording != 0) [[unlikely]] {
    if (recording & static_cast<unsigned>(Recorder::Profiler)) {
      record.emplace(detail::forward_event_name<Op>(), profiler::EventKind::kOp,
                     detail::tensor_shapes(args...));
    }
  }
  // Grad mode read once: a stale view (a view older than its base's history, tensor.h) matters
  // only to a pass that records, so under NoGradGuard the check costs nothing.
  const bool grad_mode = GradMode::is_enabled();
  bool any_undefined = false, any_requires_grad = false;
  const Tensor* stale = nullptr;
  detail::for_each_tensor(
      [&](const Tensor& t) {
        if (!t.defined()) {
          any_undefined = true;
          return;
        }
        if (t.requires_grad()) any_requires_grad = true;
        if (grad_mode && ember::detail::view_is_stale(t)) [[unlikely]]
          stale = &t;
      },
      args...);
  if constexpr (!detail::allows_undefined_inputs<Op>()) {
    if (any_undefined) detail::fail_undefined_input(Op::name);
  }
  if (stale != nullptr) [[unlikely]]
    detail::fail_stale_input(Op::name, *stale);
  if (!grad_mode || !any_requires_grad) {
    // Nothing to record: the op runs on the stack, with no graph node allocated and nothing
    // saved for a backward that will never come (the common case under NoGradGuard).
    Op op;
    op.recording_ = false;
    NoGradGuard no_grad;
    try {
      return op.forward(args...);
    } catch (const std::bad_alloc&) {
      detail::fail_out_of_memory(Op::name, detail::tensor_shapes(args...));
    }
  }
  auto node =
      std::allocate_shared<FunctionNode<Op>>(ember::detail::ObjectAllocator<FunctionNode<Op>>());
  node->op.node_name_ = Op::name;
  Tensor output;
  {
    NoGradGuard no_grad;
    try {
      output = node->op.forward(args...);
    } catch (const std::bad_alloc&) {
      detail::fail_out_of_memory(Op::name, detail::tensor_shapes(args...));
    }
  }
  ember::detail::ObjectVector<Tensor> inputs;
  std::size_t tensors = 0;
  detail::for_each_tensor([&tensors](const Tensor&) { ++tensors; }, args...);
  inputs.reserve(tensors);  // one allocation, not one per push_back that outgrows the last
  detail::collect_tensors(inputs, args...);
  detail::connect(node, inputs, output);
  if (!node->op.saved_.empty()) node->op.saved_.bind(node, inputs, output);
  if (KeepValuesGuard::is_enabled()) node->kept_value = output.detach();
  // Anomaly mode: where the forward ran (the innermost module's path, the open labels).
  if (recording & static_cast<unsigned>(Recorder::Anomaly)) [[unlikely]] {
    node->forward_context = capture_forward_context();
  }
  return output;
}

// A backward that is linear in the incoming gradient and reads no input values (the backward of
// select, slice, index_select, gather, embedding, where, masked_fill, max along a dim: it puts
// grad's elements somewhere in zeros). The raw `compute(grad)` serves first-order backward as
// before; under create_graph it runs as an op whose own backward is `adjoint(gg)` (the forward
// op applied to gg, e.g. gg.index_select(dim, index) for index_select's scatter), so the
// gradient is differentiable again, any number of times. Name: its node's name, as
// "IndexSelectBackwardBackward0" (a struct with `static constexpr const char* name`).
template <typename Name>
struct LinearInGrad : OpFunction<LinearInGrad<Name>> {
  static constexpr const char* name = Name::name;
  static constexpr const char* formula =
      "y = A g (A linear: puts g's elements in zeros):  dg = A^T dy (adjoint: the forward op on "
      "dy)";
  std::function<Tensor(const Tensor&)> adjoint;
  Tensor forward(const Tensor& grad, const std::function<Tensor(const Tensor&)>& compute,
                 const std::function<Tensor(const Tensor&)>& adjoint_) {
    adjoint = adjoint_;
    return compute(grad);
  }
  std::vector<Tensor> backward(const Tensor& gg) { return {adjoint(gg)}; }
};
template <typename Name, typename Compute, typename Adjoint>
Tensor linear_in_grad(const Tensor& grad, Compute&& compute, Adjoint&& adjoint) {
  if (!GradMode::is_enabled() || !grad.requires_grad()) return compute(grad);
  return apply<LinearInGrad<Name>>(grad, std::function<Tensor(const Tensor&)>(compute),
                                   std::function<Tensor(const Tensor&)>(adjoint));
}

}  // namespace ember::autograd
