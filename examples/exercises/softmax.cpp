// Exercise (a): softmax's backward. (What to derive and how to check it: README.md here.)
//
// forward (exercises.cpp) computed y = softmax(x) along the last dim,
//   y_i = e^{x_i} / sum_j e^{x_j}   (each row on its own),
// and saved y. backward gets dL/dy (grad_outputs[0], the shape of y) and returns dL/dx.
//
// Write it with Ember's ops (*, -, .sum(-1, true), matmul, ...), as the solution does: then it is
// differentiable again. Check it:
//   cmake --build --preset release --target exercise_check && build/release/bin/exercise_check softmax
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list Softmax::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const Tensor y = ctx->get_saved_variables()[0];
  const Tensor dy = grad_outputs[0];
  (void)y;
  (void)dy;
  // TODO: dx = ... (one line)
  return {Tensor()};  // not written yet: an undefined gradient
}

}  // namespace exercises
