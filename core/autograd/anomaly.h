// Anomaly mode (torch.autograd.set_detect_anomaly, libtorch's DetectAnomalyGuard): while on,
// every backward node's results are checked, and the first NaN or infinity stops the backward
// with an ember::Error that names the node, which of its outputs went bad, and where its
// forward ran:
//
//   autograd::DetectAnomalyGuard anomaly;   // on for this scope (or set_detect_anomaly(true))
//   loss.backward();
//   // ember::Error: Function 'SqrtBackward0' returned nan values in its 0th output (the
//   //   gradient for input 0 of sqrt, of shape [2, 3]).
//   //   forward: sqrt(inputs of shapes [2, 3]) -> [2, 3]
//   //   in: module trf_blocks.1.att (MultiHeadAttention), label "gradient penalty"
//
// The module path and the labels are those open when the forward made the node (see
// core/graph/record.h): only nodes made while anomaly mode (or the profiler) is on have
// them. Off by default; off, it costs one branch per op and one per backward pass.
#pragma once

#include <vector>

#include "core/tensor/tensor.h"

namespace ember::autograd {

class Node;

// Turns anomaly mode on or off for the whole process (as PyTorch's, which is global).
void set_detect_anomaly(bool enabled);
bool is_anomaly_enabled();

// RAII: anomaly mode on while alive; the previous state back at the end of the scope.
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

namespace detail {
// The engine's check of what `node` returned: throws the anomaly Error at the first gradient
// holding a NaN or an infinity.
void check_backward_results(const Node& node, const std::vector<Tensor>& input_grads);
// "sqrt(inputs of shapes [2, 3]) -> [2, 3]\n  in: module ...": what anomaly mode says of where
// `node`'s forward ran (also for other errors raised in a backward).
std::string describe_forward(const Node& node);
}  // namespace detail

}  // namespace ember::autograd
