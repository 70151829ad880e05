// The backward engine: walks the graph from the outputs in topological order, each node once,
// with the sum of the gradients that reach it.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

// Accumulates d(outputs)/d(leaf) into every leaf's .grad (what Tensor::backward calls).
// grad_outputs[i] may be undefined only for a one-element output (an implicit 1).
//
// libtorch's signatures. retain_graph keeps the saved tensors for another backward; it defaults
// to create_graph. create_graph runs the backward in grad mode, so the gradients it computes
// have a graph of their own and can be differentiated again (a leaf's .grad then has a grad_fn).
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad (torch.autograd.grad). An input the
// outputs do not depend on gets an undefined Tensor, or an Error unless allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

// The graph behind t as Graphviz DOT text: one box per node with its name and shapes.
std::string to_dot(const Tensor& t);

}  // namespace ember::autograd
