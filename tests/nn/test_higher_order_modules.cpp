// Second derivatives through the modules (issue 21): gradgradcheck, in float64, of every nn
// layer, the losses, the chapter's attention modules and the GPT blocks, with respect to their
// input (and the losses' targets where differentiable). The fused cross-entropy and the fused
// attention of MultiHeadAttention give the composite's second derivatives (the fused attention op
// itself: tests/core/autograd/test_higher_order_fused.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/gradcheck.h"
#include "core/ops/nn_ops.h"
#include "core/ops/softmax.h"
#include "core/tensor/random.h"
#include "core/testing_gtest.h"
#include "nn/attention.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using Inputs = std::vector<Tensor>;
using namespace nn::functional;  // the losses

Tensor input(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, DType::Float64, &gen).requires_grad_();
}

// fn of a module on its input, float64 parameters, a fixed seed for its initialization.
template <typename M>
std::function<Tensor(const Inputs&)> of(std::shared_ptr<M> m) {
  m->to(DType::Float64);
  return [m](const Inputs& x) { return m->forward(x[0]); };
}

TEST(HigherOrderModules, Linear) {
  manual_seed(1);
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::Linear>(3, 2)), {input({2, 3}, 1)});
}

TEST(HigherOrderModules, LayerNormAndGELUs) {
  manual_seed(2);
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::LayerNorm>(4)), {input({2, 4}, 2)});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::GPTLayerNorm>(4)), {input({2, 4}, 3)});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::GELU>()), {input({2, 3}, 4)});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::GELU>("tanh")), {input({2, 3}, 5)});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::GPTGELU>()), {input({2, 3}, 6)});
}

TEST(HigherOrderModules, EmbeddingWeight) {
  Tensor weight = input({5, 3}, 7);
  Tensor ids = from_vector(std::vector<double>{1, 4, 1, 0}, {2, 2}, DType::Int64);
  EXPECT_GRADGRADCHECK([ids](const Inputs& x) { return embedding(x[0], ids) * x[0].sum(); },
                       {weight});
}

TEST(HigherOrderModules, DropoutWithoutNoiseAndInEval) {
  auto zero = std::make_shared<nn::Dropout>(0.0);
  EXPECT_GRADGRADCHECK([zero](const Inputs& x) { return zero->forward(x[0]) * x[0]; },
                       {input({2, 3}, 8)});
  auto half = std::make_shared<nn::Dropout>(0.5);
  half->eval();
  EXPECT_GRADGRADCHECK([half](const Inputs& x) { return half->forward(x[0]) * x[0]; },
                       {input({2, 3}, 9)});
  // p > 0 in training: the mask is fixed by reseeding before each call (PyTorch's double
  // backward of dropout is mask * grad).
  auto train = std::make_shared<nn::Dropout>(0.5);
  EXPECT_GRADGRADCHECK(
      [train](const Inputs& x) {
        manual_seed(10);
        return train->forward(x[0]) * x[0];
      },
      {input({2, 3}, 10)});
}

TEST(HigherOrderModules, Losses) {
  Tensor logits = input({3, 4}, 11);
  Tensor classes = from_vector(std::vector<double>{1, 0, 3}, {3}, DType::Int64);
  // Cross-entropy, composite (log_softmax + nll_loss), and nll_loss.
  EXPECT_GRADGRADCHECK(
      [classes](const Inputs& x) { return nll_loss(log_softmax(x[0], 1), classes); }, {logits});
  Tensor target = input({3, 4}, 12);
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return mse_loss(x[0], x[1]); },
                       {input({3, 4}, 13), target});
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return l1_loss(x[0], x[1]); },
                       {input({3, 4}, 14), input({3, 4}, 15)});
  Generator gen(16);
  Tensor probs = (rand({3, 4}, DType::Float64, &gen) * 0.8 + 0.1).requires_grad_();
  Tensor labels = rand({3, 4}, DType::Float64, &gen);
  EXPECT_GRADGRADCHECK([labels](const Inputs& x) { return binary_cross_entropy(x[0], labels); },
                       {probs});
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1]); },
                       {input({3, 4}, 17), input({3, 4}, 18)});
}

using test::expect_same_second_derivative;

TEST(HigherOrderModules, FusedCrossEntropyIsTwiceDifferentiable) {
  // The fused op against its composite nll_loss(log_softmax(x)): class indices, with weights,
  // ignore_index, every reduction, [N, C], [N, C, d] and [C].
  Tensor classes = from_vector(std::vector<double>{1, 0, 3}, {3}, DType::Int64);
  EXPECT_GRADGRADCHECK([classes](const Inputs& x) { return cross_entropy(x[0], classes); },
                       {input({3, 4}, 19)});
  Tensor weight = from_vector(std::vector<double>{0.5, 2.0, 1.0, 1.5}, {4}, DType::Float64);
  for (nn::Reduction r : {nn::kMean, nn::kSum, nn::kNone}) {
    const auto ce = CrossEntropyFuncOptions().weight(weight).ignore_index(0).reduction(r);
    const auto nll = NLLLossFuncOptions().weight(weight).ignore_index(0).reduction(r);
    EXPECT_GRADGRADCHECK([&](const Inputs& x) { return cross_entropy(x[0], classes, ce); },
                         {input({3, 4}, 20)});
    expect_same_second_derivative(
        [&](const Inputs& x) { return cross_entropy(x[0], classes, ce); },
        [&](const Inputs& x) { return nll_loss(log_softmax(x[0], 1), classes, nll); },
        {input({3, 4}, 21)});
  }
  Tensor spatial = from_vector(std::vector<double>{1, 0, 2, 2, 1, 0}, {2, 3}, DType::Int64);
  expect_same_second_derivative(
      [&](const Inputs& x) { return cross_entropy(x[0], spatial); },
      [&](const Inputs& x) { return nll_loss(log_softmax(x[0], 1), spatial); },
      {input({2, 3, 3}, 22)});
  Tensor one = from_vector(std::vector<double>{2}, {}, DType::Int64);
  expect_same_second_derivative(
      [&](const Inputs& x) { return cross_entropy(x[0], one); },
      [&](const Inputs& x) { return nll_loss(log_softmax(x[0], 0), one); }, {input({4}, 23)});
}

TEST(HigherOrderModules, FusedCrossEntropyWithSmoothingAndProbabilities) {
  // Label smoothing eps: (1 - eps) nll + eps / C * mean over rows of -sum_c log p_c.
  Tensor classes = from_vector(std::vector<double>{1, 0, 3}, {3}, DType::Int64);
  const auto smooth = CrossEntropyFuncOptions().label_smoothing(0.2);
  EXPECT_GRADGRADCHECK([&](const Inputs& x) { return cross_entropy(x[0], classes, smooth); },
                       {input({3, 4}, 24)});
  expect_same_second_derivative(
      [&](const Inputs& x) { return cross_entropy(x[0], classes, smooth); },
      [&](const Inputs& x) {
        Tensor logp = log_softmax(x[0], 1);
        return 0.8 * nll_loss(logp, classes) + (0.2 / 4) * (-logp.sum({1})).mean();
      },
      {input({3, 4}, 25)});
  // Probabilities as target (differentiable too): -(y log p).sum(1).mean().
  Generator gen(26);
  Tensor y = rand({3, 4}, DType::Float64, &gen).requires_grad_();
  EXPECT_GRADGRADCHECK([](const Inputs& x) { return cross_entropy(x[0], x[1]); },
                       {input({3, 4}, 27), y});
  expect_same_second_derivative(
      [](const Inputs& x) { return cross_entropy(x[0], x[1]); },
      [](const Inputs& x) { return (-(x[1] * log_softmax(x[0], 1)).sum({1})).mean(); },
      {input({3, 4}, 28), y});
}

TEST(HigherOrderModules, FusedMultiHeadAttentionHasTheCompositesHessian) {
  // nn::MultiHeadAttention on its default fused path and with fused_attention = false: the same
  // Hessian-vector products with respect to the input and every parameter, without dropout and
  // with it (the same draws on both paths, reseeded before each forward).
  for (double p : {0.0, 0.25}) {
    manual_seed(29);
    auto mha = std::make_shared<nn::MultiHeadAttention>(4, 4, 5, p, 2);
    mha->to(DType::Float64);
    Inputs args = {input({2, 5, 4}, 30)};
    for (const Tensor& param : mha->parameters()) args.push_back(param);
    auto run = [mha](bool fused) {
      return [mha, fused](const Inputs& x) {
        mha->fused_attention = fused;
        manual_seed(31);
        return mha->forward(x[0]);
      };
    };
    ASSERT_TRUE(mha->fused_attention);
    expect_same_second_derivative(run(true), run(false), args);
  }
}

TEST(HigherOrderModules, TheChaptersAttentionModules) {
  manual_seed(20);
  Tensor x = input({1, 3, 4}, 20);
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::SelfAttentionV1>(4, 2)), {input({3, 4}, 21)});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::SelfAttentionV2>(4, 2)), {input({3, 4}, 22)});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::CausalAttention>(4, 2, 3, 0.0)), {x});
  EXPECT_GRADGRADCHECK(of(std::make_shared<nn::MultiHeadAttentionWrapper>(4, 2, 3, 0.0, 2)),
                       {input({1, 3, 4}, 23)});
  auto mha = std::make_shared<nn::MultiHeadAttention>(4, 4, 3, 0.0, 2);
  mha->fused_attention = false;
  EXPECT_GRADGRADCHECK(of(mha), {input({1, 3, 4}, 24)});
}

TEST(HigherOrderModules, GPTBlocks) {
  manual_seed(25);
  nn::GPTConfig cfg{11, 4, 4, 2, 2, 0.0, false};
  auto model = std::make_shared<nn::GPTModel>(cfg);
  model->to(DType::Float64);
  for (auto& block : model->trf_blocks->children()) {
    std::dynamic_pointer_cast<nn::TransformerBlock>(block)->att->fused_attention = false;
  }
  // The blocks, the final norm and the head, from the embeddings on.
  EXPECT_GRADGRADCHECK(
      [model](const Inputs& x) {
        return model->out_head->forward(
            model->final_norm->forward(model->trf_blocks->forward(x[0])));
      },
      {input({1, 3, 4}, 26)});
}

}  // namespace
}  // namespace ember
