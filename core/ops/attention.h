// Fused causal scaled-dot-product attention, a differentiable op (derivation in
// core/ops/attention.cpp, kernels in core/kernels/attention.cpp). It computes exactly what the
// chapter's composite computes:
//
//   s = q @ k.transpose(-2, -1)
//   s.masked_fill_(triu(ones({T, T}), 1).to_bool(), -INFINITY)
//   w = dropout(softmax(s / sqrt(head_dim), -1), dropout_p, training, gen)
//   return w @ v
//
// for q, k, v of shape [batch, heads, T, head_dim], with the same numbers (the same dropout
// mask from the same generator), in a fraction of the time and memory: the [T, T] matrices are
// never stored. nn::MultiHeadAttention uses it unless told otherwise (fused_attention = false).
//
// With a KV cache, k and v may hold more rows than q ([batch, heads, T_k, head_dim], T_k >= T):
// q's rows are then the last T positions of the sequence, row i seeing keys 0 .. T_k - T + i
// (the book's mask[T_k - T : T_k, :T_k]). Forward only: no dropout, no graph.
#pragma once

#include "core/tensor/tensor.h"

namespace ember {

class Generator;

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p = 0.0,
                        bool training = false, Generator* gen = nullptr);

}  // namespace ember
