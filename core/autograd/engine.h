// The backward engine: walks the graph from the outputs in topological order, each node once,
// with the sum of the gradients that reach it.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

// Accumulates d(outputs)/d(leaf) into every leaf's .grad (what Tensor::backward calls).
// grad_outputs[i] may be undefined only for a one-element output (an implicit 1).
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad (torch.autograd.grad). An input the
// outputs do not depend on gets an undefined Tensor, or an Error unless allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

// The graph behind t as Graphviz DOT text: one box per node with its name and shapes.
std::string to_dot(const Tensor& t);

}  // namespace ember::autograd
