// cross_entropy's two backwards (core/graph/function.h's convention; the other fused ops are in
// tests/core/graph/test_fused_dispatch.cpp). Class indices without label smoothing over [N, C] take
// PyTorch's road: its kernel in a first-order backward, the formula (with softmax) under
// create_graph, the same gradients to float rounding. Any other target runs the formula in both.
#include <gtest/gtest.h>

#include <vector>

#include "core/ember.h"
#include "nn/loss.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

namespace F = nn::functional;
using Inputs = std::vector<Tensor>;

Tensor logits(DType dtype) {
  Generator gen(21);
  return (randn({6, 11}, dtype, &gen) * 3.0).detach().requires_grad_();
}

const Tensor& targets() {
  static const Tensor t = from_vector({3, 0, 10, -100, 7, 3}, {6}, DType::Int64);
  return t;
}

double rounding(DType dtype) { return dtype == DType::Float32 ? 1e-5 : 1e-12; }

TEST(FusedDispatch, CrossEntropyTakesItsKernelInFirstOrder) {
  for (DType d : {DType::Float32, DType::Float64}) {
    const Tensor w = from_vector({1.0, 0.5, 2.0, 1.0, 1.5, 1.0, 0.25, 1.0, 1.0, 3.0, 1.0}, {11}, d);
    for (nn::Reduction r : {nn::kMean, nn::kSum}) {
      test::expect_fused_dispatch(
          [&](const Inputs& in) {
            return F::cross_entropy(in[0], targets(),
                                    F::CrossEntropyFuncOptions().weight(w).reduction(r));
          },
          {logits(d)}, scalar_tensor(0.75, d), "CrossEntropyLossBackward0", "ember::softmax",
          rounding(d));
    }
    Generator gen(22);
    test::expect_fused_dispatch(
        [](const Inputs& in) {
          return F::cross_entropy(in[0], targets(),
                                  F::CrossEntropyFuncOptions().reduction(nn::kNone));
        },
        {logits(d)}, randn({6}, d, &gen), "CrossEntropyLossBackward0", "ember::softmax",
        rounding(d));
  }
}

TEST(FusedDispatch, CrossEntropyOffPyTorchsRoadRunsTheFormula) {
  // Label smoothing, probabilities, [N, C, d]: the formula (with softmax) in first order too.
  Generator gen(23);
  const Tensor x = logits(DType::Float32);
  const Tensor probabilities = softmax(randn({6, 11}, DType::Float32, &gen), 1);
  const Tensor x3 = randn({2, 11, 3}, DType::Float32, &gen).requires_grad_();
  const Tensor t3 = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int64);
  const std::vector<std::pair<Tensor, Tensor>> losses = {
      {x, F::cross_entropy(x, targets(), F::CrossEntropyFuncOptions().label_smoothing(0.1))},
      {x, F::cross_entropy(x, probabilities)},
      {x3, F::cross_entropy(x3, t3)},
  };
  for (const auto& [input, loss] : losses) {
    autograd::profiler::Profile prof;
    const Tensor dx = autograd::grad({loss}, {input})[0];
    prof.stop();
    EXPECT_EQ(test::ops_inside_backward(prof, "CrossEntropyLossBackward0").count("ember::softmax"),
              1u);
    EXPECT_FALSE(dx.requires_grad());
  }
}

}  // namespace
}  // namespace ember
