// Backward passes, as the graph's nodes see them: which pass is running on this thread, and the
// per-pass store of a node that gathers gradients from several output nodes. The engine
// (core/autograd/engine.h) opens a PassScope for each pass it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "core/graph/node.h"
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

// The grad_fn of output `index` of a node with several outputs (a custom Function's, split's).
// The engine gives a node one gradient, so each output has a node of its own: it hands its
// gradient to the owner's `deliveries` and sends the owner a 0-d token, so the engine runs the
// owner once, after every output node of the pass has delivered. The caller wires its one edge,
// to the owner (which therefore outlives it).
class OutputNode : public Node {
 public:
  OutputNode(const Node* owner, PassDeliveries* deliveries, std::size_t index, const char* formula)
      : owner_(owner), deliveries_(deliveries), index_(index), formula_(formula) {}
  std::string name() const override { return owner_->name(); }
  std::string forward_name() const override { return owner_->forward_name(); }
  const char* formula() const override { return formula_; }
  std::vector<Tensor> apply(const Tensor& grad_output) override;

 private:
  const Node* owner_;
  PassDeliveries* deliveries_;  // the owner's
  std::size_t index_;
  const char* formula_;  // a string literal
};

}  // namespace ember::autograd
