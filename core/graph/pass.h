// Backward passes, as the graph's nodes see them: which pass is running on this thread, and the
// per-pass store of a node that gathers gradients from several output nodes. The engine
// (core/autograd/engine.h) opens a PassScope for each pass it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::autograd {

// The backward pass running on this thread: a number no other pass of the process has (0 outside
// a pass). A node that gathers gradients from several places (a custom Function's outputs, a
// split's pieces) keeps them per pass (PassDeliveries), so that a pass aborted by an error
// leaves nothing for the next one.
uint64_t current_pass_id();

// A new pass on this thread for the scope's lifetime, listed as running (a backward inside a
// backward opens its own, then returns to the outer one).
class PassScope {
 public:
  PassScope();
  ~PassScope();
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  uint64_t outer_;
};

// The gradients that the output nodes of a node with several outputs (a custom Function's,
// split's) hand it during a backward pass, kept per pass: passes through one graph may run at
// once in several threads (retain_graph), and each takes only its own. What a pass delivered
// before an error aborted it is dropped once that pass has ended. (Each output node runs once in
// a pass, with the sum of its gradients, so it delivers once.)
class PassDeliveries {
 public:
  explicit PassDeliveries(std::size_t outputs) : outputs_(outputs) {}
  // Output `index`'s gradient in this thread's pass.
  void deliver(std::size_t index, const Tensor& grad);
  // This thread's pass's gradients, one per output (undefined where none came), removed.
  std::vector<Tensor> take();

 private:
  std::mutex mutex_;
  std::size_t outputs_;
  std::vector<std::pair<uint64_t, std::vector<Tensor>>> passes_;  // (pass, its gradients)
};

}  // namespace ember::autograd
