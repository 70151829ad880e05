// Exercise (b), a reference answer: causal self-attention's backward, the forward's four lines
// walked backwards.
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list CausalAttention::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const tensor_list saved = ctx->get_saved_variables();
  const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &a = saved[3];
  const double scale = ctx->saved_data["scale"].toDouble();
  const Tensor dout = grad_outputs[0];
  // out = A v: a matrix product, so dA = dout v^T and dv = A^T dout.
  const Tensor da = matmul(dout, v.transpose(-2, -1));
  const Tensor dv = matmul(a.transpose(-2, -1), dout);
  // A = softmax(S) row by row: exercise (a). Masked positions have A = 0, so dS = 0 there: the
  // mask needs no code of its own once the saved (masked) A is used.
  const Tensor ds = a * (da - (da * a).sum(-1, true));
  // S = q k^T * scale: dq = dS k * scale, dk = dS^T q * scale.
  const Tensor dq = matmul(ds, k) * scale;
  const Tensor dk = matmul(ds.transpose(-2, -1), q) * scale;
  return {dq, dk, dv};
}

}  // namespace exercises
