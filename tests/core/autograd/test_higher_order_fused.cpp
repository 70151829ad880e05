// The fused kernels differentiated twice (issue 21, item 2): under create_graph, the fused causal
// attention and the book's LayerNorm as one op (gpt_layer_norm) compute their gradient with
// their formulas written as ops, so it can be differentiated again. Each passes a float64
// gradgradcheck, and its second derivative (the gradient of <grad, w> with respect to every
// input) equals the composite's within 1e-10 of the largest element, in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/gradcheck.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/linalg.h"
#include "core/ops/nn_ops.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"
#include "core/testing_gtest.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

Tensor input(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, DType::Float64, &gen).requires_grad_();
}

using test::expect_same_second_derivative;

// ---- causal attention ----

// The book's lines (nn/attention.cpp, MultiHeadAttention::forward) on [b, heads, T, d] q, k, v;
// noise: the dropout's scaled keep-mask, or undefined.
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& noise) {
  const int64_t tokens = q.size(2);
  Tensor scores = matmul(q, k.transpose(2, 3));
  scores = masked_fill(scores, triu(ones({tokens, tokens}), 1).to_bool(), -INFINITY);
  Tensor weights = softmax(scores / std::sqrt(static_cast<double>(q.size(3))), -1);
  if (noise.defined()) weights = weights * noise;
  return matmul(weights, v);
}

TEST(HigherOrderFused, CausalAttentionGradgradcheck) {
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return causal_attention(x[0], x[1], x[2]); },
                       {input({1, 2, 3, 2}, 1), input({1, 2, 3, 2}, 2), input({1, 2, 3, 2}, 3)});
}

TEST(HigherOrderFused, CausalAttentionWithDropoutGradgradcheck) {
  // The same noise on every call (a generator of a fixed seed): the double backward uses the
  // forward's own mask.
  EXPECT_GRADGRADCHECK(
      [](const Inputs& x) {
        Generator gen(7);
        return causal_attention(x[0], x[1], x[2], 0.4, /*training=*/true, &gen);
      },
      {input({2, 1, 4, 2}, 4), input({2, 1, 4, 2}, 5), input({2, 1, 4, 2}, 6)});
}

TEST(HigherOrderFused, CausalAttentionSecondDerivativeIsTheComposites) {
  const Inputs qkv = {input({2, 2, 5, 3}, 8), input({2, 2, 5, 3}, 9), input({2, 2, 5, 3}, 10)};
  expect_same_second_derivative(
      [](const Inputs& x) { return causal_attention(x[0], x[1], x[2]); },
      [](const Inputs& x) { return attention_composite(x[0], x[1], x[2], Tensor()); }, qkv);
  // With dropout: the composite multiplies by the noise the fused op draws (same generator).
  const Shape noise_shape{2, 2, 5, 5};
  expect_same_second_derivative(
      [](const Inputs& x) {
        Generator gen(11);
        return causal_attention(x[0], x[1], x[2], 0.3, true, &gen);
      },
      [&](const Inputs& x) {
        Generator gen(11);
        return attention_composite(x[0], x[1], x[2],
                                   dropout_noise(noise_shape, DType::Float64, 0.3, &gen));
      },
      qkv);
}

TEST(HigherOrderFused, CausalAttentionOfStridedViews) {
  // q, k, v as MultiHeadAttention makes them: transposed views of one [b, T, heads, d] tensor
  // each, and a last dim of stride 2 (copied by the op; the double backward still reaches x).
  Tensor x = input({1, 4, 2, 6}, 12);
  auto split = [](const Tensor& t) {
    return Inputs{t.transpose(1, 2).slice(3, 0, 6, 2), t.transpose(1, 2).slice(3, 1, 6, 2)};
  };
  expect_same_second_derivative(
      [&](const Inputs& in) {
        Inputs s = split(in[0]);
        return causal_attention(s[0], s[1], s[0] * 0.5);
      },
      [&](const Inputs& in) {
        Inputs s = split(in[0]);
        return attention_composite(s[0], s[1], s[0] * 0.5, Tensor());
      },
      {x});
}

// ---- the book's LayerNorm as one op ----

Tensor gpt_layer_norm_composite(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  Tensor mean = x.mean({-1}, true);
  Tensor centered = x - mean;
  Tensor var = (centered * centered).mean({-1}, true);
  return scale * (centered / sqrt(var + 1e-5)) + shift;
}

TEST(HigherOrderFused, GptLayerNorm) {
  const Inputs args = {input({2, 3, 4}, 13), input({4}, 14), input({4}, 15)};
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return gpt_layer_norm(x[0], x[1], x[2]); }, args);
  expect_same_second_derivative(
      [](const Inputs& x) { return gpt_layer_norm(x[0], x[1], x[2]); },
      [](const Inputs& x) { return gpt_layer_norm_composite(x[0], x[1], x[2]); }, args);
  // A non-contiguous input (copied by the op's kernel; the double backward reaches x itself).
  Tensor xt = input({4, 3}, 16);
  expect_same_second_derivative(
      [](const Inputs& x) { return gpt_layer_norm(x[0].t(), x[1], x[2]); },
      [](const Inputs& x) { return gpt_layer_norm_composite(x[0].t(), x[1], x[2]); },
      {xt, input({4}, 17), input({4}, 18)});
}

// ---- already twice differentiable: layer_norm, gelu, gpt_gelu ----

TEST(HigherOrderFused, LayerNormAndGelus) {
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
                       {input({3, 4}, 19), input({4}, 20), input({4}, 21)});
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return gelu(x[0]); }, {input({3, 4}, 22)});
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return gelu(x[0], "tanh"); }, {input({3, 4}, 23)});
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return gpt_gelu(x[0]); }, {input({3, 4}, 24)});
}

// ---- the first-order path is the kernel's ----

TEST(HigherOrderFused, WithoutCreateGraphTheGradientHasNoGraph) {
  Tensor q = input({1, 1, 3, 2}, 25), k = input({1, 1, 3, 2}, 26), v = input({1, 1, 3, 2}, 27);
  std::vector<Tensor> g = autograd::grad({causal_attention(q, k, v).sum()}, {q, k, v});
  for (const Tensor& t : g) EXPECT_FALSE(t.requires_grad());
}

}  // namespace
}  // namespace ember
