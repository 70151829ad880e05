// Node: one step of the backward graph. Each differentiable op's output points to the Node that
// made it (grad_fn); the Node points to the Nodes of its inputs (next_functions).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/graph/record.h"
#include "core/tensor/tensor.h"

namespace ember::autograd {

class Node {
 public:
  // Frees a chain of nodes iteratively (a 100,000-op chain would overflow the stack if each
  // node destroyed the next from inside its own destructor).
  virtual ~Node();

  // PyTorch's name for the node, e.g. "MmBackward0", used in reprs, errors and graphs.
  virtual std::string name() const = 0;
  // The forward op that made the node, as errors and anomaly mode name it: "mm" for
  // "MmBackward0" (detail::op_name of name()); a custom Function's own name ("MySquare").
  virtual std::string forward_name() const;

  // The chain rule for this op: from the gradient of its output, the gradients of its inputs
  // (one per input, undefined where an input needs none). Shapes may still be broadcast; the
  // engine sums them back to the input shapes.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;

  // Frees the tensors saved for backward (after a backward without retain_graph).
  virtual void release_saved() {}

  // The op's derivative formula as data, the line beside its backward ("y = e^x:  dy/dx = e^x =
  // y"): Op::formula. For autograd::explore, which shows it beside the node.
  virtual const char* formula() const { return ""; }
  // The tensors the op saved for backward (undefined entries where it saved none), and whether
  // a backward without retain_graph has freed them.
  virtual std::vector<Tensor> saved_tensors() const { return {}; }
  virtual bool saved_released() const { return false; }

  // This node as the sink of a leaf, or null (what dynamic_cast would say, at a virtual call's
  // cost: the engine asks it of every node it runs).
  virtual class AccumulateGrad* as_accumulate_grad() { return nullptr; }

  // One entry per input: the Node its gradient flows to (null where none is needed).
  // (Vectors whose memory comes from core/base/allocator.h's per-thread lists, as the node's own.)
  ember::detail::ObjectVector<std::shared_ptr<Node>> next_functions;
  ember::detail::ObjectVector<Shape> input_shapes;
  ember::detail::ObjectVector<DType> input_dtypes;
  // Hooks registered on the tensor this node produced (register_hook on a non-leaf): they see,
  // and may replace, the gradient of that output before apply(). They stay with the node, as in
  // PyTorch: after an in-place op rebases the tensor, they still see the old version's gradient.
  // Tensor::remove_hook erases its entry; a backward runs a snapshot of the list, so a hook may
  // register or remove hooks (itself included) while it runs.
  // A backward without retain_graph releases them once this node has run (a hook capturing its
  // own tensor would otherwise keep tensor -> grad_fn -> hook -> tensor alive forever), and a
  // later backward through this node is then an error, as for its saved tensors.
  std::vector<GradHookEntry> pre_hooks;
  bool hooks_released = false;
  // The tensor this node produced, for retain_grad (weak: no ownership cycle).
  std::weak_ptr<TensorImpl> output;
  Shape output_shape;
  // The output's value (a detached handle), kept only when the forward ran under
  // autograd::KeepValuesGuard: what autograd::explore shows of intermediates nobody holds.
  Tensor kept_value;
  // Where the forward ran (module path, labels), kept only when the node was made while anomaly
  // mode or the profiler recorded (core/graph/record.h); null otherwise.
  std::shared_ptr<const ForwardContext> forward_context;
};

// The sink at a leaf: adds the incoming gradient into leaf.grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  AccumulateGrad* as_accumulate_grad() override { return this; }
  const char* formula() const override { return "leaf:  x.grad += dx"; }
  // The leaf, or an undefined tensor once no one holds it.
  Tensor leaf() const {
    auto impl = leaf_.lock();
    return impl ? Tensor(impl) : Tensor();
  }

 private:
  // Weak both ways (the leaf holds its AccumulateGrad weakly too). PyTorch holds the leaf
  // strongly here, so `x.grad.copy_(f(x))` makes a cycle x -> x.grad -> its grad_fn -> ... ->
  // AccumulateGrad(x) -> x that leaks x (it does in PyTorch 1.13). Ember's does not: a leaf no
  // one holds any more has no .grad anyone can read, so its gradient is simply dropped.
  std::weak_ptr<TensorImpl> leaf_;
  std::mutex mutex_;  // serializes accumulation from concurrent backward passes
};

// The Node a gradient for `t` must be sent to: its grad_fn, its AccumulateGrad if it is a leaf
// that requires grad, or null.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

}  // namespace ember::autograd
