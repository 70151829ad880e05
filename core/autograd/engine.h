// The backward engine: walks the graph from the outputs in topological order, each node once,
// with the sum of the gradients that reach it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/graph/pass.h"
#include "core/tensor/tensor.h"

namespace ember::autograd {

// Accumulates d(outputs)/d(leaf) into every leaf's .grad (what Tensor::backward calls).
// grad_outputs is empty or has one entry per output ("got 2 tensors and 1 gradients" otherwise,
// as libtorch); grad_outputs[i] may be undefined only for a one-element output (an implicit 1).
//
// libtorch's signatures. retain_graph keeps the saved tensors for another backward; it defaults
// to create_graph. create_graph runs the backward in grad mode, so the gradients it computes
// have a graph of their own and can be differentiated again (a leaf's .grad then has a grad_fn).
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad (torch.autograd.grad). An input the
// outputs do not depend on gets an undefined Tensor, or an Error unless allow_unused. Only the
// nodes that lead to one of the inputs run, as PyTorch's (exec_info): the hooks of the others
// (tensor hooks, modules' backward hooks, the nodes below a non-leaf input) do not.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

class Node;

// Whether the backward pass running on this thread needs the gradient `node` sends to its input
// `edge` (libtorch's Node::task_should_compute_output): false where the input needs none; in
// autograd::grad, also false where the input does not lead to any of grad's inputs (grad({y},
// {x0}) of y = f(x0, x1) needs nothing for x1). Outside a pass, and in a backward(), every input
// that requires grad is needed. A node's backward may ask, to skip work nobody will use.
bool task_should_compute_output(const Node& node, std::size_t edge);

// The pass running on this thread (current_pass_id) and a node's per-pass store of gradients
// (PassDeliveries): core/graph/pass.h.

// Sees a backward pass node by node (autograd::explore records one to replay it).
class BackwardObserver {
 public:
  virtual ~BackwardObserver() = default;
  // Called after `node` ran, in the engine's order: `grad` is the summed gradient of its output
  // (undefined if none reached it), `sent[i]` what it sent to input i (summed back to the
  // input's shape and dtype; undefined where it sent nothing).
  virtual void on_node(Node& node, const Tensor& grad, const std::vector<Tensor>& sent) = 0;
};

// A backward pass that only reports: retain_graph semantics, no AccumulateGrad runs (no .grad
// changes, retain_grad tensors are left alone), every node reported to `observer` in order.
// Hooks on non-leaf tensors still run (they may replace gradients, as in a real pass).
void observe_backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                      BackwardObserver& observer);

// The graph behind t as Graphviz DOT text: one box per node with its name and shapes.
std::string to_dot(const Tensor& t);

}  // namespace ember::autograd
