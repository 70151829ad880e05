// One convention for fused ops (core/graph/function.h): an op states its backward in ops and,
// beside it, a fused kernel (fused_backward); FunctionNode::apply runs the kernel in a first-order
// backward and the ops under create_graph. First the dispatch itself, on ops of the test's own;
// then every fused op of core/ops, each in float32 and float64: the profiler sees the formula's
// ops inside the node under create_graph only, the create_graph gradient has a graph, and both
// backwards give the same gradients (bit for bit where the kernel does the formula's float
// operations in its order, else to float rounding). cross_entropy's: tests/nn/test_fused_dispatch_loss.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/autograd/engine.h"
#include "core/graph/function.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/nn_ops.h"
#include "core/ops/softmax.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using Inputs = std::vector<Tensor>;
using test::expect_fused_dispatch;
using test::expect_values;

// ---- the dispatch, on ops of the test's own ----

// y = x^2, dy/dx = 2x, with its formula only (in ops): it serves both kinds of backward.
struct Square : autograd::OpFunction<Square> {
  static constexpr const char* name = "SquareBackward0";
  static constexpr const char* formula = "y = x^2:  dy/dx = 2 x";
  static inline int formula_calls = 0;
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return x * x;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    ++formula_calls;
    return {grad * (2.0 * saved(0))};
  }
};

// The same op with a "kernel" beside its formula (a loop over the values), counting its calls.
struct FusedSquare : Square {
  static constexpr const char* name = "FusedSquareBackward0";
  static inline int kernel_calls = 0;
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    ++kernel_calls;
    const Tensor x = saved(0);
    const std::vector<double> xs = x.to_vector<double>(), gs = grad.to_vector<double>();
    std::vector<double> dx(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) dx[i] = gs[i] * (2.0 * xs[i]);
    return {from_vector(dx, x.shape(), x.dtype())};
  }
};

static_assert(!autograd::detail::has_fused_backward<Square>());
static_assert(autograd::detail::has_fused_backward<FusedSquare>());

std::vector<Tensor> grad_of(const Tensor& out, const Tensor& x, bool create_graph) {
  return autograd::grad({out.sum()}, {x}, {}, std::nullopt, create_graph);
}

TEST(FusedDispatch, FirstOrderRunsTheKernelCreateGraphTheFormula) {
  Square::formula_calls = FusedSquare::kernel_calls = 0;
  const Tensor x = from_vector(std::vector<double>{1, -2, 3}, {3}, DType::Float64).requires_grad_();

  const Tensor first = grad_of(autograd::apply<FusedSquare>(x), x, false)[0];
  EXPECT_EQ(FusedSquare::kernel_calls, 1);
  EXPECT_EQ(Square::formula_calls, 0);
  EXPECT_FALSE(first.requires_grad());
  expect_values(first, {2, -4, 6});

  const Tensor second = grad_of(autograd::apply<FusedSquare>(x), x, true)[0];
  EXPECT_EQ(FusedSquare::kernel_calls, 1);
  EXPECT_EQ(Square::formula_calls, 1);
  EXPECT_EQ(test::grad_fn_name(second), "MulBackward0");  // grad * (2 x), recorded
  expect_values(second, {2, -4, 6});
  // d/dx sum(2x) = 2: the formula's graph differentiates again.
  expect_values(autograd::grad({second.sum()}, {x})[0], {2, 2, 2});

  // Tensor::backward without create_graph: the kernel.
  autograd::apply<FusedSquare>(x).sum().backward();
  EXPECT_EQ(FusedSquare::kernel_calls, 2);
  EXPECT_EQ(Square::formula_calls, 1);
  expect_values(x.grad(), {2, -4, 6});
}

TEST(FusedDispatch, AnOpWithoutAKernelRunsItsFormulaEitherWay) {
  Square::formula_calls = 0;
  const Tensor x = from_vector(std::vector<double>{1, -2, 3}, {3}, DType::Float64).requires_grad_();
  const Tensor first = grad_of(autograd::apply<Square>(x), x, false)[0];
  EXPECT_EQ(Square::formula_calls, 1);
  EXPECT_FALSE(first.requires_grad());
  const Tensor second = grad_of(autograd::apply<Square>(x), x, true)[0];
  EXPECT_EQ(Square::formula_calls, 2);
  EXPECT_TRUE(second.requires_grad());
  EXPECT_TRUE(equal(first, second.detach()));
}

// ---- every fused op of core/ops ----

Tensor leaf(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  return randn(shape, dtype, &gen).requires_grad_();
}

Tensor upstream(const Shape& shape, DType dtype) {
  Generator gen(1234);
  return randn(shape, dtype, &gen);
}

// Float rounding, relative to the largest gradient element: a few ulps of each dtype (the kernel
// and the formula round in different orders, and some kernels sum in double).
double rounding(DType dtype) { return dtype == DType::Float32 ? 1e-5 : 1e-12; }

class FusedOps : public ::testing::TestWithParam<DType> {};

TEST_P(FusedOps, Gelu) {
  const DType d = GetParam();
  const Inputs leaves = {leaf({4, 33}, 1, d)};
  // The exact form's kernel computes Phi(x) + x phi(x) with the formula's operations, in its
  // order: the same bits.
  expect_fused_dispatch([](const Inputs& in) { return gelu(in[0]); }, leaves, upstream({4, 33}, d),
                        "GeluBackward0", "ember::normal_cdf", 0);
  expect_fused_dispatch([](const Inputs& in) { return gelu(in[0], "tanh"); }, leaves,
                        upstream({4, 33}, d), "GeluBackward0", "ember::tanh", rounding(d));
  expect_fused_dispatch([](const Inputs& in) { return gpt_gelu(in[0]); }, leaves,
                        upstream({4, 33}, d), "GptGeluBackward0", "ember::tanh", rounding(d));
}

TEST_P(FusedOps, WhereAndMaskedFill) {
  // The kernel is the forward's own selection: the same bits.
  const DType d = GetParam();
  const Tensor mask = gt(randn({5, 6}), 0.0);
  expect_fused_dispatch([&](const Inputs& in) { return where(mask, in[0], in[1]); },
                        {leaf({5, 6}, 2, d), leaf({6}, 3, d)}, upstream({5, 6}, d),
                        "WhereBackward0", "ember::where", 0);
  expect_fused_dispatch([&](const Inputs& in) { return masked_fill(in[0], mask, -1.5); },
                        {leaf({5, 6}, 4, d)}, upstream({5, 6}, d), "MaskedFillBackward0",
                        "ember::masked_fill", 0);
}

TEST_P(FusedOps, SoftmaxAndLogSoftmax) {
  const DType d = GetParam();
  expect_fused_dispatch([](const Inputs& in) { return softmax(in[0], -1); },
                        {leaf({3, 4, 9}, 5, d)}, upstream({3, 4, 9}, d), "SoftmaxBackward0",
                        "ember::sum", rounding(d));
  expect_fused_dispatch([](const Inputs& in) { return log_softmax(in[0], 2); },
                        {leaf({3, 4, 9}, 6, d)}, upstream({3, 4, 9}, d), "LogSoftmaxBackward0",
                        "ember::exp", rounding(d));
}

TEST_P(FusedOps, LayerNorms) {
  const DType d = GetParam();
  expect_fused_dispatch([](const Inputs& in) { return layer_norm(in[0], {8}, in[1], in[2]); },
                        {leaf({2, 5, 8}, 7, d), leaf({8}, 8, d), leaf({8}, 9, d)},
                        upstream({2, 5, 8}, d), "NativeLayerNormBackward0", "ember::sqrt",
                        rounding(d));
  expect_fused_dispatch([](const Inputs& in) { return gpt_layer_norm(in[0], in[1], in[2]); },
                        {leaf({2, 5, 8}, 10, d), leaf({8}, 11, d), leaf({8}, 12, d)},
                        upstream({2, 5, 8}, d), "GptLayerNormBackward0", "ember::sqrt",
                        rounding(d));
}

TEST_P(FusedOps, CausalAttention) {
  const DType d = GetParam();
  const Shape shape{2, 2, 7, 4};
  const Inputs qkv = {leaf(shape, 13, d), leaf(shape, 14, d), leaf(shape, 15, d)};
  expect_fused_dispatch([](const Inputs& in) { return causal_attention(in[0], in[1], in[2]); }, qkv,
                        upstream(shape, d), "CausalAttentionBackward0", "ember::softmax",
                        rounding(d));
  // With dropout: both backwards use the forward's own noise (one generator seed per call).
  expect_fused_dispatch(
      [](const Inputs& in) {
        Generator gen(16);
        return causal_attention(in[0], in[1], in[2], 0.25, /*training=*/true, &gen);
      },
      qkv, upstream(shape, d), "CausalAttentionBackward0", "ember::softmax", rounding(d));
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, FusedOps, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) { return dtype_name(info.param); });

// ---- where the kernel does not apply, the formula runs in first order too ----

TEST(FusedDispatch, SoftmaxAlongAnotherDimRunsTheFormula) {
  // The kernel takes rows of the last dim; along dim 0 the formula serves both backwards.
  const Tensor x = leaf({4, 3}, 17, DType::Float32);
  autograd::profiler::Profile prof;
  const Tensor dx = autograd::grad({softmax(x, 0)}, {x}, {upstream({4, 3}, DType::Float32)})[0];
  prof.stop();
  EXPECT_EQ(test::ops_inside_backward(prof, "SoftmaxBackward0").count("ember::sum"), 1u);
  EXPECT_FALSE(dx.requires_grad());
}

}  // namespace
}  // namespace ember
