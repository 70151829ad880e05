// Elementwise ops with full broadcasting: arithmetic, unary math, activations, comparisons.
#pragma once

#include <string>

#include "core/tensor.h"

namespace ember {

// Arithmetic (differentiable). Scalars act as 0-d tensors of the tensor's dtype.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

// Unary math (differentiable).
Tensor neg(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor pow(const Tensor& t, double exponent);
Tensor abs(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
// approximate: "none" (exact, with erf) or "tanh", as torch.nn.functional.gelu.
Tensor gelu(const Tensor& t, const std::string& approximate = "none");

// Binary selections (differentiable).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// t with value wherever mask (bool, broadcast to t) is true.
Tensor masked_fill(const Tensor& t, const Tensor& mask, double value);
// In place; on a non-leaf it rebases the history (MaskedFillBackward0 becomes its grad_fn).
Tensor& masked_fill_(Tensor& t, const Tensor& mask, double value);

// Comparisons (not differentiable): bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

}  // namespace ember
