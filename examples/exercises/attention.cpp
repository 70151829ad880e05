// Exercise (b): causal self-attention's backward. (What to derive and how to check it:
// README.md here.) Do exercise (a) first: the middle of this one is softmax's backward.
//
// forward (exercises.cpp) computed, for queries, keys and values of shape [..., T, d_k]
// (one head: [T, d_k]; several: [heads, T, d_k]):
//   S = q k^T / sqrt(d_k)          the scores
//   S[i][j] = -inf for j > i       the causal mask: token i sees tokens 0..i
//   A = softmax(S) along the rows  the attention weights
//   out = A v                      the context vectors
// and saved q, k, v and A, and ctx->saved_data["scale"] = 1 / sqrt(d_k).
// backward gets dL/dout (grad_outputs[0]) and returns {dq, dk, dv}. Walk the four lines
// backwards: dA and dv from out = A v, dS from A = softmax(S), then dq and dk from S.
// Use .transpose(-2, -1) (not .t()): the same code must work for one head and for several.
//
// Check it (one head, then two):
//   cmake --build --preset release --target exercise_check
//   build/release/bin/exercise_check attention && build/release/bin/exercise_check multihead_attention
#include "examples/exercises/exercises.h"

namespace exercises {

tensor_list CausalAttention::backward(AutogradContext* ctx, tensor_list grad_outputs) {
  const tensor_list saved = ctx->get_saved_variables();
  const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &a = saved[3];
  const double scale = ctx->saved_data["scale"].toDouble();
  const Tensor dout = grad_outputs[0];
  (void)q, (void)k, (void)v, (void)a, (void)scale, (void)dout;
  // TODO: dv, dA, dS, dq, dk
  return {Tensor(), Tensor(), Tensor()};  // not written yet
}

}  // namespace exercises
