// GELU with the tanh approximation, forward and backward, each in one pass over memory.
//
//   y = 0.5 x (1 + tanh(u)),   u = k (x + c x^3),   k = sqrt(2 / pi), c = 0.044715
//
// The book's GELU (nn::GPTGELU) writes this as eight tensor ops, each a pass over the
// [batch, tokens, 4 emb_dim] activations (x^3, c x^3, x + .., k (..), tanh, 1 + .., 0.5 x, the
// product), and its backward runs the chain rule through each of them (another dozen passes).
// The kernels here do every element's arithmetic in registers, a block of elements at a time
// (the tanh of a block through kernels::tanh_row, glibc's tanhf on vector registers), with the
// same float operations in the same order as the composite, so the forward gives the composite's
// bits exactly; see gelu_tanh_backward for the backward.
//
// Derivative, with t = tanh(u):
//   dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
// (the product rule on 0.5 x times (1 + t), and d tanh(u)/du = 1 - t^2, du/dx = k (1 + 3 c x^2)).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

#include "core/base/dtype.h"

namespace ember::kernels {

// The constants, written once for the kernels, the ops (core/ops/activations.cpp) and the book's
// composite (nn/gpt.cpp).
inline constexpr double kGeluTanhCubic = 0.044715;  // c
// k as PyTorch's gelu(approximate='tanh') has it: sqrt(2/pi) in double, rounded once to T.
inline double sqrt_2_over_pi() { return std::sqrt(2.0 / std::numbers::pi); }
// k as the book computes it at each call, torch.sqrt(torch.tensor(2.0 / torch.pi)): 2/pi as a
// 0-d tensor of the default dtype (get_default_dtype()), then its square root in that dtype.
// Under float32 (the default): 2/pi rounded to float32 first, then its square root rounded again
// (0.7978845, one ulp below PyTorch's 0.7978846), also when the input is float64. Under float64:
// sqrt(2/pi) in double, which is sqrt_2_over_pi().
inline double book_sqrt_2_over_pi() {
  if (get_default_dtype() == DType::Float64) return sqrt_2_over_pi();
  return std::sqrt(static_cast<float>(2.0 / std::numbers::pi));
}

// y[i] = 0.5 x (1 + tanh(k (x + c (x x x)))) for i in [0, n), each product and sum rounded to T
// in the order written (x == y allowed). PyTorch's gelu(approximate='tanh') and the book's
// composite differ only in k: sqrt_2_over_pi() for the first, book_sqrt_2_over_pi() for the book.
// With `t` non-null, tanh(u) of every element is also written there, for gelu_tanh_backward.
template <typename T>
void gelu_tanh_forward(const T* x, T* y, int64_t n, T k, T* t = nullptr);

// How the backward rounds.
//  kSlope: dx = dy * slope, the slope as written above, in T (nn::GELU's GeluBackward0).
//  kBookChain: the float operations the composite's backward does (MulBackward0, AddBackward0,
//    TanhBackward0, MulBackward0, AddBackward0, MulBackward0, PowBackward0, MulBackward0), node
//    by node, and its three contributions to dx summed in the order the autograd engine sums
//    them; so dx has the composite's bits (tests/nn/test_fused_norm_gelu.cpp checks it).
enum class GeluBackward { kSlope, kBookChain };

// dx[i] = dL/dx for dy[i] = dL/dy at x[i], for i in [0, n), with t[i] = tanh(u) as the forward
// wrote it (gelu_tanh_forward's t: kept, not computed again, as the composite's TanhBackward0
// keeps its output). n elements are split among threads.
template <typename T>
void gelu_tanh_backward(const T* x, const T* t, const T* dy, T* dx, int64_t n, T k,
                        GeluBackward form);

// The same two as plain loops, one element at a time: the reference that the vector kernels
// (Highway, gelu.cpp) equal bit for bit on every target (tests/core/kernels/test_gelu.cpp).
template <typename T>
void gelu_tanh_forward_plain(const T* x, T* y, int64_t n, T k, T* t = nullptr);
template <typename T>
void gelu_tanh_backward_plain(const T* x, const T* t, const T* dy, T* dx, int64_t n, T k,
                              GeluBackward form);

}  // namespace ember::kernels
