// Exercise (d): cross-entropy's backward. (What to derive and how to check it: README.md here.)
//
// forward (exercises.cpp) computed, for logits [N, C] and targets [N] (int64 class indices):
//   p    = softmax(logits) along the rows
//   loss = (1/N) sum_n -log p[n, targets[n]]      (a scalar: the mean over the N rows)
// and saved p and targets. backward gets dL/dloss (grad_outputs[0], a scalar tensor; 1 when
// the loss is what backward() starts from) and returns {dlogits, an undefined Tensor}: targets
// are indices and have no gradient.
//
// Check it:
//   cmake --build --preset release --target exercise_check && build/release/bin/exercise_check cross_entropy
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list CrossEntropy::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const tensor_list saved = ctx->get_saved_variables();
  const Tensor &p = saved[0], &targets = saved[1];
  const Tensor dloss = grad_outputs[0];
  (void)p, (void)targets, (void)dloss;
  // TODO: dlogits. (A one-hot of the targets, [N, C]:
  //   eq(arange(C).view({1, -1}), targets.view({-1, 1})).to(p.dtype()), with C = p.size(1).)
  return {Tensor(), Tensor()};  // not written yet
}

}  // namespace exercises
