// Exercise (a), a reference answer: softmax's backward.
//
// y_i = e^{x_i} / Z with Z = sum_j e^{x_j}, so dy_j/dx_i = y_j (delta_ij - y_i): every y_j of the
// row depends on every x_i of it. Then
//   dx_i = sum_j dy_j dy_j/dx_i = y_i dy_i - y_i sum_j dy_j y_j = y_i (dy_i - sum_j dy_j y_j).
// The row sum sum_j dy_j y_j is the term that comes from the normalisation Z.
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list Softmax::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const Tensor y = ctx->get_saved_variables()[0];
  const Tensor dy = grad_outputs[0];
  return {y * (dy - (dy * y).sum(-1, true))};
}

}  // namespace exercises
