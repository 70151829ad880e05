// Elementwise ops with full broadcasting: arithmetic, unary math, activations, comparisons.
#pragma once

#include <optional>
#include <string>

#include "core/tensor/tensor.h"

namespace ember {

// Arithmetic (differentiable). A Scalar acts as a 0-d tensor: an integer one of the tensor's
// dtype, a floating one of the tensor's dtype if floating, else float32 (as in PyTorch).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
// torch.add(a, b, alpha=...), torch.sub(a, b, alpha=...): a + alpha b, a - alpha b (one fused
// multiply-add for floats, as PyTorch's kernel). An integer result takes an integral alpha only.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha);
// self + value * tensor1 * tensor2 and self + value * tensor1 / tensor2 (optimizers' updates).
Tensor addcmul(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double value = 1);
// start + weight * (end - start), with PyTorch's formula (exact at weight 0 and 1).
Tensor lerp(const Tensor& start, const Tensor& end, double weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
// Elements below min become min, above max become max (either may be None); NaN stays NaN.
Tensor clamp(const Tensor& t, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

// Unary math (differentiable).
Tensor neg(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor pow(const Tensor& t, Scalar exponent);
Tensor abs(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
// approximate: "none" (exact, with erf) or "tanh", as torch.nn.functional.gelu.
Tensor gelu(const Tensor& t, const std::string& approximate = "none");
// The book's GELU (nn::GPTGELU), 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with its
// float32 sqrt(2/pi), as one fused op: the composite's bits, forward and backward
// (kernels::gelu_tanh_forward / gelu_tanh_backward).                        (GptGeluBackward0)
Tensor gpt_gelu(const Tensor& x);

// Binary selections (differentiable).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// t with value wherever mask (bool, broadcast to t) is true.
Tensor masked_fill(const Tensor& t, const Tensor& mask, Scalar value);
// In place; on a non-leaf it rebases the history (MaskedFillBackward0 becomes its grad_fn).
Tensor& masked_fill_(Tensor& t, const Tensor& mask, Scalar value);

// Comparisons (not differentiable): bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);

}  // namespace ember
