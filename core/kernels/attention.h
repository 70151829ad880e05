// Fused causal scaled-dot-product attention: the chapter's masked attention in one kernel per
// direction, forward and backward side by side (the blocked derivation in
// core/kernels/attention.cpp; the maths of the op in core/ops/attention.cpp).
//
// For every (batch, head), with Q, K, V of shape [T, d] and the dropout noise N ([T, T], the
// mask already scaled by 1 / (1 - p), or none):
//
//   S = Q K^T                              scores
//   S_ij = -inf where j > i                the causal mask (masked_fill_)
//   A = S / divisor                        divisor = sqrt(d) in the chapter
//   W = softmax(A) along j
//   W~ = W * N                             dropout
//   O = W~ V                               the context vectors
//
// computed as the composite path (nn/attention.cpp, with keep_trace or fused_attention off)
// computes it, operation for operation, so both give the same numbers (the same bits, but for
// the sign of zeros); the masked half of S, W and of every product with them is never touched,
// but for its terms that are not 0, which both directions take in as the composite does: a
// masked weight or gradient times an inf or a nan (0 * inf is nan), and the masked weights of a
// row whose weights are nan.
#pragma once

#include <cstdint>

namespace ember::kernels {

// Q, K, V, O and their gradients: [batch, heads, tokens, head_dim] with unit stride along
// head_dim and any other strides (the heads of a [batch, tokens, heads * head_dim] projection).
template <typename T>
struct Heads {
  T* data;
  int64_t batch_stride, head_stride, row_stride;
  T* at(int64_t b, int64_t h) const { return data + b * batch_stride + h * head_stride; }
};

// tokens counts the query rows. With a KV cache (offset > 0) the queries are the newest rows of
// a longer sequence: query row i is position offset + i and sees keys 0 .. offset + i, and K and
// V hold offset + tokens rows. Each row is computed exactly as the same row of the whole
// sequence's attention (rows of at least 8 keys; see vec_lane_sum for the shorter ones).
// The backward takes offset 0 only.
struct AttentionDims {
  int64_t batch, heads, tokens, head_dim;
  int64_t offset = 0;
};

// O = attention(Q, K, V). Saves, per row i of every head, the row's max m_i of A and the inverse
// 1 / sum_j exp(A_ij - m_i) of its softmax denominator (row_max, row_inverse: [batch, heads,
// tokens] contiguous), from which the backward recomputes W exactly. noise is [batch, heads,
// tokens, tokens] contiguous, or null for no dropout.
template <typename T>
void causal_attention_forward(const AttentionDims& dims, Heads<const T> q, Heads<const T> k,
                              Heads<const T> v, const T* noise, T divisor, Heads<T> out, T* row_max,
                              T* row_inverse);

// dQ, dK, dV from dO (grad_out) and what the forward saved. Overwrites grad_q/k/v.
template <typename T>
void causal_attention_backward(const AttentionDims& dims, Heads<const T> q, Heads<const T> k,
                               Heads<const T> v, const T* noise, T divisor, const T* row_max,
                               const T* row_inverse, Heads<const T> grad_out, Heads<T> grad_q,
                               Heads<T> grad_k, Heads<T> grad_v);

// y[j] = a[j] * b[j] for j in [0, n), one rounding each (y == a allowed): the dropout mask's
// product of a row, on vectors (Highway), and its plain loop, which it equals bit for bit on
// every target (tests/core/kernels/test_attention_kernels.cpp).
template <typename T>
void multiply_row(const T* a, const T* b, T* y, int64_t n);
template <typename T>
void multiply_row_plain(const T* a, const T* b, T* y, int64_t n);

}  // namespace ember::kernels
