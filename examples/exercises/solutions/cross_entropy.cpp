// Exercise (d), a reference answer: cross-entropy's backward.
//
// For one row, -log p[t] = -z_t + log sum_j e^{z_j}, so d/dz_j = p_j - [j == t]. The loss is
// the mean over the N rows: each row's gradient is divided by N. Then times dL/dloss.
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list CrossEntropy::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const tensor_list saved = ctx->get_saved_variables();
  const Tensor &p = saved[0], &targets = saved[1];
  const Tensor dloss = grad_outputs[0];
  const Tensor one_hot = eq(arange(p.size(1)).view({1, -1}), targets.view({-1, 1})).to(p.dtype());
  const Tensor dlogits = (p - one_hot) / static_cast<double>(p.size(0)) * dloss;
  return {dlogits, Tensor()};  // targets are indices: no gradient
}

}  // namespace exercises
