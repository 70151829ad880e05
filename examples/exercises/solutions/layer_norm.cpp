// Exercise (c), a reference answer: LayerNorm's backward.
//
// With dxhat = dy * gamma, x reaches xhat = (x - mean) * rstd three ways:
//   directly:            rstd * dxhat
//   through the mean:    - rstd * mean(dxhat)             (d mean / dx_i = 1/n)
//   through the variance: - rstd * xhat * mean(dxhat * xhat)   (d var / dx_i = 2 (x_i - mean) / n)
// so dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list LayerNorm::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const tensor_list saved = ctx->get_saved_variables();
  const Tensor &xhat = saved[0], &rstd = saved[1], &gamma = saved[2];
  const Tensor dy = grad_outputs[0];
  // y = gamma * xhat + beta; gamma and beta are shared by the rows, so their gradients are
  // summed over them (every dim but the last).
  const int64_t n = dy.size(-1);
  const Tensor dbeta = dy.reshape({-1, n}).sum(0);
  const Tensor dgamma = (dy * xhat).reshape({-1, n}).sum(0);
  const Tensor dxhat = dy * gamma;
  const Tensor dx = rstd * (dxhat - dxhat.mean(-1, true) - xhat * (dxhat * xhat).mean(-1, true));
  return {dx, dgamma, dbeta};
}

}  // namespace exercises
