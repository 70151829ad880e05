// causal_attention: the fused op, beside its derivation. Three files, one computation:
//   the composite   nn/attention.cpp, MultiHeadAttention::forward (the chapter, op by op; taken
//                   when fused_attention is false, keep_trace is on, or the mask is not causal)
//   this op         core/ops/attention.cpp (checks, dropout noise, the autograd node)
//   the kernel      core/kernels/attention.cpp (the same maths in blocks of query rows, each
//                   operation in the composite's order, so both give the same bits)
// tests/core/ops/test_attention_fused.cpp checks that fused and composite agree (values and grads).
//
// Forward, for one (batch, head): Q, K, V are [T, d], N the dropout noise ([T, T], keep-mask
// already scaled by 1 / (1 - p); all ones without dropout), c = sqrt(d):
//   S = Q K^T                      S_ij = q_i . k_j
//   A_ij = S_ij / c   for j <= i,  A_ij = -inf for j > i      (masked_fill_ then the division)
//   W_i = softmax(A_i)             W_ij = exp(A_ij - m_i) / sum_k exp(A_ik - m_i)
//                                  (m_i = max_k A_ik)
//   W~ = W * N                     (dropout)
//   O  = W~ V
// The masked W_ij are exp(-inf) = 0: row i sees keys 0..i only, so the kernel never computes the
// upper triangle. It saves m_i and 1 / sum_k exp(A_ik - m_i) per row, and recomputes W from them.
//
// Backward, from dO = dL/dO:
//   dV  = W~^T dO                  (O = W~ V)
//   dW~ = dO V^T
//   dW  = dW~ * N                  (W~ = W * N, N a constant)
//   dA_ij = W_ij (dW_ij - D_i),  D_i = sum_j dW_ij W_ij
//                                  (softmax: dW_ij/dA_ik = W_ij (delta_jk - W_ik), summed over j)
//   dS_ij = dA_ij / c for j <= i,  0 for j > i   (a masked S_ij does not reach A_ij)
//   dQ  = dS K                     (S = Q K^T)
//   dK  = dS^T Q
// The op's backward is these formulas as Ember ops on the saved inputs, W recomputed from Q and
// K and N the forward's own noise: under create_graph its gradients have a graph and can be
// differentiated again (test_higher_order_fused.cpp checks it against the composite's Hessian).
// Its fused_backward, which a first-order backward runs, is the kernel alone.
#include "core/ops/attention.h"

#include <cmath>

#include "core/base/grad_mode.h"
#include "core/graph/function.h"
#include "core/kernels/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/linalg.h"
#include "core/ops/softmax.h"

namespace ember {

namespace {

// The dropout noise travels as a non-tensor argument: it is not an input of the graph.
struct Noise {
  Tensor t;  // [batch, heads, T, T] (mask / (1 - p)), or undefined: no dropout
};

// A [batch, heads, T, head_dim] tensor with unit stride along head_dim (copied if it has not).
Tensor unit_last_stride(const Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }

template <typename T>
kernels::Heads<const T> heads_of(const Tensor& t) {
  return {t.data_ptr<T>(), t.stride(0), t.stride(1), t.stride(2)};
}

// A new [batch, heads, T, head_dim] tensor laid out as [batch, T, heads, head_dim]: what the
// chapter does next (transpose(1, 2).contiguous()) is then free. Not zeroed: the kernels write
// every element (O and dQ by their products, dK and dV zeroed per head before they collect).
Tensor new_heads(const Tensor& like) {
  return detail::empty_for_overwrite({like.size(0), like.size(2), like.size(1), like.size(3)},
                                     like.dtype())
      .transpose(1, 2);
}

template <typename T>
kernels::Heads<T> mutable_heads_of(Tensor& t) {
  return {t.data_ptr<T>(), t.stride(0), t.stride(1), t.stride(2)};
}

// q's rows are the last of k's (a KV cache's new rows) when k has more.
kernels::AttentionDims dims_of(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), q.size(3), k.size(2) - q.size(2)};
}

struct CausalAttention : autograd::OpFunction<CausalAttention> {
  static constexpr const char* name = "CausalAttentionBackward0";
  static constexpr const char* formula =
      "O = softmax(Q K^T / sqrt(d) + causal mask) V:  dV = P^T dO, dP = dO V^T, dS = P (dP - "
      "rowsum(dP P)), dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d)";
  Tensor noise;

  Tensor forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Noise& n) {
    const Tensor q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
    noise = n.t;
    Tensor out = new_heads(q);
    Tensor row_max = empty({q.size(0), q.size(1), q.size(2)}, q.dtype());
    Tensor row_inverse = empty({q.size(0), q.size(1), q.size(2)}, q.dtype());
    // q_in, k_in, v_in (the same tensors as q, k, v unless copied above): the create_graph
    // backward differentiates through the inputs themselves.
    save_for_backward({q, k, v, row_max, row_inverse, q_in, k_in, v_in});
    // Nothing to compute for no rows (and an empty tensor's other dims may be huge).
    if (out.numel() == 0 || row_max.numel() == 0) return out;
    dispatch_floating(q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T divisor = static_cast<T>(std::sqrt(static_cast<double>(q.size(3))));
      kernels::causal_attention_forward<T>(
          dims_of(q, k), heads_of<T>(q), heads_of<T>(k), heads_of<T>(v),
          noise.defined() ? noise.data_ptr<T>() : nullptr, divisor, mutable_heads_of<T>(out),
          row_max.data_ptr<T>(), row_inverse.data_ptr<T>());
    });
    return out;
  }

  // The derivation above written with ops: W recomputed from q and k.
  std::vector<Tensor> backward(const Tensor& d_out) const {
    const Tensor q = saved(5), k = saved(6), v = saved(7);
    const int64_t tokens = q.size(2);
    const double c = std::sqrt(static_cast<double>(q.size(3)));
    const Tensor above = triu(ones({tokens, tokens}), 1).to_bool();  // the masked j > i
    const Tensor a = masked_fill(matmul(q, k.transpose(2, 3)), above, -INFINITY) / c;
    const Tensor w = softmax(a, -1);
    const Tensor w_tilde = noise.defined() ? w * noise : w;
    const Tensor dv = matmul(w_tilde.transpose(2, 3), d_out);
    const Tensor dw_tilde = matmul(d_out, v.transpose(2, 3));
    const Tensor dw = noise.defined() ? dw_tilde * noise : dw_tilde;
    const Tensor da = w * (dw - (dw * w).sum({-1}, /*keepdim=*/true));
    // masked_fill_'s backward: dS_ij = 0 for j > i. (dA_ij = W_ij (...) is 0 there but where
    // D_i is nan: the composite's dS keeps that nan off the masked half.)
    const Tensor ds = masked_fill(da / c, above, 0.0);
    return {matmul(ds, k), matmul(ds.transpose(2, 3), q), dv};
  }

  // The same, by the kernel: W recomputed block by block from the saved m_i and row inverses.
  std::vector<Tensor> fused_backward(const Tensor& grad) const {
    const Tensor q = saved(0), k = saved(1), v = saved(2), row_max = saved(3),
                 row_inverse = saved(4);
    const Tensor g = unit_last_stride(grad);
    Tensor dq = new_heads(q), dk = new_heads(q), dv = new_heads(q);
    if (dq.numel() == 0) return {dq, dk, dv};  // as in forward
    dispatch_floating(q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T divisor = static_cast<T>(std::sqrt(static_cast<double>(q.size(3))));
      kernels::causal_attention_backward<T>(
          dims_of(q, k), heads_of<T>(q), heads_of<T>(k), heads_of<T>(v),
          noise.defined() ? noise.data_ptr<T>() : nullptr, divisor, row_max.data_ptr<T>(),
          row_inverse.data_ptr<T>(), heads_of<T>(g), mutable_heads_of<T>(dq),
          mutable_heads_of<T>(dk), mutable_heads_of<T>(dv));
    });
    return {dq, dk, dv};
  }
};

}  // namespace

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p,
                        bool training, Generator* gen) {
  check(q.defined() && k.defined() && v.defined(),
        "causal_attention: called with an undefined tensor");
  check(q.dim() == 4,
        "causal_attention: expected q of shape [batch, heads, tokens, head_dim], got ", q.shape());
  check(v.shape() == k.shape() && k.dim() == 4 && k.size(0) == q.size(0) &&
            k.size(1) == q.size(1) && k.size(2) >= q.size(2) && k.size(3) == q.size(3),
        "causal_attention: expected q, k and v of one shape (or k and v of more tokens than q: a ",
        "KV cache), got ", q.shape(), ", ", k.shape(), " and ", v.shape());
  check(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
        "causal_attention: expected q, k and v of one floating point dtype, got ",
        dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), " and ", dtype_name(v.dtype()));
  check(dropout_p >= 0 && dropout_p <= 1,
        "causal_attention: dropout probability has to be between 0 and 1, but got ", dropout_p);
  const bool cached = k.size(2) > q.size(2);
  check(!cached || !((training && dropout_p > 0) ||
                     (GradMode::is_enabled() &&
                      (q.requires_grad() || k.requires_grad() || v.requires_grad()))),
        "causal_attention: with more keys than queries (", k.size(2), " and ", q.size(2),
        ", a KV cache) it runs forward only: no dropout, no gradient");
  Noise noise;
  // As dropout: a noise for weights with elements (the sizes' product may overflow int64 when
  // head_dim is 0, q then empty).
  if (training && dropout_p > 0 && q.size(0) > 0 && q.size(1) > 0 && q.size(2) > 0) {
    noise.t =
        dropout_noise({q.size(0), q.size(1), q.size(2), q.size(2)}, q.dtype(), dropout_p, gen);
  }
  return autograd::apply<CausalAttention>(q, k, v, noise);
}

}  // namespace ember
