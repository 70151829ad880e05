// The differentiable ops behind the nn layers: addmm and linear (nn.Linear), embedding
// (nn.Embedding) and layer_norm (nn.LayerNorm), with PyTorch's grad_fn names.
#pragma once

#include "core/tensor/tensor.h"

namespace ember {

// bias + a @ b, with bias broadcast to the product's shape [m, n]        (AddmmBackward0)
// (float32, float64 or int64, one dtype for all three; int64 wraps on overflow as matmul's)
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b);

// torch.nn.functional.linear: x @ weight^T + bias, weight of shape [out_features, in_features]
// and bias (optional: undefined for none) of shape [out_features]. It dispatches as PyTorch's
// at::linear does, so the printed grad_fn is PyTorch's:
//
//   x                    bias      what runs                                      grad_fn
//   2-d                  yes       addmm(bias, x, weight.t())                     AddmmBackward0
//   3-d contiguous       yes       addmm on x.view(-1, in), then .view(b, t, out) ViewBackward0
//   any other            yes       matmul(x, weight.t()) + bias                   AddBackward0
//   any                  no        matmul(x, weight.t())                          matmul's
//                                  (MmBackward0 for 2-d x, UnsafeViewBackward0 for 3-d)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// Generation's packed weights. While a RowPanelScope is open on a thread, linear() on that
// thread, given one row of float32 (x.numel() == in_features) and no gradient to record, reads
// its weight from a copy packed in row panels (kernels::pack_row_panels: one sequential stream
// instead of rows read side by side), made at the weight's first such use and made again when
// the weight has changed (its version). The same bits as without; the copies, the weights'
// size, are freed when the outermost scope closes. nn::generate and generate_text_simple open
// one when they use the KV cache.
class RowPanelScope {
 public:
  RowPanelScope();
  ~RowPanelScope();
  RowPanelScope(const RowPanelScope&) = delete;
  RowPanelScope& operator=(const RowPanelScope&) = delete;

  // Bytes of packed weights this thread's open scope holds (0 when none is open).
  static int64_t packed_bytes();

 private:
  bool outermost_;
};

// torch.nn.functional.embedding: row indices[...] of weight [num_embeddings, embedding_dim], for
// int64 indices of any shape; the result has shape indices.shape + [embedding_dim].
// The gradient of a row is the sum of the gradients of every place it was picked. An index
// outside [0, num_embeddings) is an Error.                              (EmbeddingBackward0)
Tensor embedding(const Tensor& weight, const Tensor& indices);

// torch.nn.functional.layer_norm: each slice over the trailing `normalized_shape` dims is
// normalised to mean 0 and (biased) variance 1, then scaled by weight and shifted by bias
// (both of shape normalized_shape, each optional: undefined for none):
//   y = (x - mean) / sqrt(var + eps) * weight + bias
// One op with an analytic backward for x, weight and bias.        (NativeLayerNormBackward0)
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// The book's LayerNorm (nn::GPTLayerNorm) over the last dim as one op:
//   scale * (x - x.mean(-1)) / sqrt(x.var(-1, unbiased=False) + eps) + shift
// with the composite's bits forward (kernels::layer_norm_book_forward); the backward is
// layer_norm's analytic one (last-bit differences from the composite's).  (GptLayerNormBackward0)
Tensor gpt_layer_norm(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps = 1e-5);

}  // namespace ember
