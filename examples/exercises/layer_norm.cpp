// Exercise (c): LayerNorm's backward. (What to derive and how to check it: README.md here.)
//
// forward (exercises.cpp) computed, over the last dim of x (each row on its own, n elements):
//   mean = sum(x) / n
//   var  = sum((x - mean)^2) / n          (biased, as the book's LayerNorm)
//   rstd = 1 / sqrt(var + 1e-5)
//   xhat = (x - mean) * rstd
//   y    = gamma * xhat + beta            (gamma, beta: [n], shared by the rows)
// and saved xhat, rstd and gamma. backward gets dL/dy (grad_outputs[0]) and returns
// {dx, dgamma, dbeta}. x reaches y by three paths: directly, through mean, through var.
//
// Check it:
//   cmake --build --preset release --target exercise_check && build/release/bin/exercise_check layer_norm
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list LayerNorm::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const tensor_list saved = ctx->get_saved_variables();
  const Tensor &xhat = saved[0], &rstd = saved[1], &gamma = saved[2];
  const Tensor dy = grad_outputs[0];
  (void)xhat, (void)rstd, (void)gamma, (void)dy;
  // TODO: dbeta, dgamma, then dx (start from dxhat = dy * gamma)
  return {Tensor(), Tensor(), Tensor()};  // not written yet
}

}  // namespace exercises
