// The book's LayerNorm and GELU (nn::GPTLayerNorm, nn::GPTGELU) as one fused op each
// (gpt_layer_norm, gpt_gelu) against their composites (fused = false, the book's lines):
//  - forward: the same bits (each kernel does the composite's float operations in its order);
//  - GELU's backward: the same bits (the kernel replays the composite's backward nodes);
//  - LayerNorm's backward: the analytic formula in double against a dozen float nodes, so the
//    gradients agree to a few float32 roundings, checked to 1e-5 of the largest gradient (as the
//    fused attention's test; float32 epsilon is 1.2e-7). In float64 both agree to 1e-12.
// And the float64 gradcheck of both ops, and of gelu(approximate='tanh') and layer_norm, whose
// loops moved into the same kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/ember.h"
#include "nn/gpt.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using Inputs = std::vector<Tensor>;

struct Result {
  std::vector<double> out, input_grad;
  std::vector<std::vector<double>> parameter_grads;
};

// out = module(x0 * 1.5 - 0.25): x reaches the module as a non-leaf, as in the model (where a
// Linear or the residual stream makes it), so its three gradients meet in the engine's buffer.
template <typename M>
Result run(M& m, Tensor x0, const Tensor& upstream, bool fused) {
  m.fused = fused;
  m.zero_grad();
  x0.set_grad(Tensor());
  Tensor out = m.forward(x0 * 1.5 - 0.25);
  (out * upstream).sum().backward();
  Result r{test::values(out), test::values(x0.grad()), {}};
  for (const auto& [name, p] : m.named_parameters())
    r.parameter_grads.push_back(test::values(p.grad()));
  return r;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double rtol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::abs(a[i] - b[i]), rtol * scale) << what << " element " << i;
  }
}

TEST(FusedGelu, BookGeluEqualsCompositeBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{2, 7, 12}, Shape{4, 64, 512}}) {  // 168, 131072 (threads)
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << shape_str(shape));
      Generator gen(5);
      const Tensor x0 = (randn(shape, dtype, &gen) * 3.0).requires_grad_(true);
      const Tensor upstream = randn(shape, dtype, &gen);
      nn::GPTGELU gelu;
      const Result fused = run(gelu, x0, upstream, true);
      const Result composite = run(gelu, x0, upstream, false);
      EXPECT_EQ(fused.out, composite.out);
      EXPECT_EQ(fused.input_grad, composite.input_grad);
    }
  }
}

TEST(FusedGelu, LeafInputAndSpecialValues) {
  // A leaf x (its gradients summed by AccumulateGrad) and values where tanh saturates, 0, -0,
  // infinities and NaN: the same bits as the composite.
  Tensor x = tensor({0.0f, -0.0f, 1e-30f, -3.5f, 12.0f, -12.0f, 30.0f, 1e5f, -1e5f, INFINITY,
                     -INFINITY, NAN, 0.5f, -0.7f})
                 .requires_grad_(true);
  const Tensor upstream = ones_like(x);
  nn::GPTGELU gelu;
  std::vector<double> out[2], grad[2];
  for (int fused = 0; fused < 2; ++fused) {
    gelu.fused = fused == 1;
    x.set_grad(Tensor());
    Tensor y = gelu.forward(x);
    (y * upstream).sum().backward();
    out[fused] = test::values(y);
    grad[fused] = test::values(x.grad());
  }
  ASSERT_EQ(out[0].size(), out[1].size());
  for (std::size_t i = 0; i < out[0].size(); ++i) {
    EXPECT_TRUE(out[0][i] == out[1][i] || (std::isnan(out[0][i]) && std::isnan(out[1][i])))
        << "output " << i << ": " << out[0][i] << " vs " << out[1][i];
    EXPECT_TRUE(grad[0][i] == grad[1][i] || (std::isnan(grad[0][i]) && std::isnan(grad[1][i])))
        << "grad " << i << ": " << grad[0][i] << " vs " << grad[1][i];
  }
}

TEST(FusedLayerNorm, BookLayerNormMatchesComposite) {
  for (const Shape& shape : {Shape{2, 70, 12}, Shape{3, 5, 128}, Shape{4, 1}, Shape{12, 64, 128}}) {
    SCOPED_TRACE(shape_str(shape));
    Generator gen(9);
    const int64_t n = shape.back();
    // Rows with a mean far from 0 (the two-pass variance matters) and trained-looking params.
    const Tensor x0 = (randn(shape, DType::Float32, &gen) * 2.0 + 3.0).requires_grad_(true);
    const Tensor upstream = randn(shape, DType::Float32, &gen);
    nn::GPTLayerNorm norm(n);
    {
      NoGradGuard no_grad;
      norm.scale.copy_(randn({n}, DType::Float32, &gen) * 0.5 + 1.0);
      norm.shift.copy_(randn({n}, DType::Float32, &gen) * 0.1);
    }
    const Result fused = run(norm, x0, upstream, true);
    const Result composite = run(norm, x0, upstream, false);
    EXPECT_EQ(fused.out, composite.out);  // the composite's float operations: same bits
    expect_close(fused.input_grad, composite.input_grad, 1e-5, "input grad");
    ASSERT_EQ(fused.parameter_grads.size(), 2u);
    expect_close(fused.parameter_grads[0], composite.parameter_grads[0], 1e-5, "scale grad");
    expect_close(fused.parameter_grads[1], composite.parameter_grads[1], 1e-5, "shift grad");
  }
}

TEST(FusedLayerNorm, Float64AgreesWithCompositeTo1e12) {
  Generator gen(3);
  const Tensor x0 = (randn({6, 40}, DType::Float64, &gen) * 2.0 + 3.0).requires_grad_(true);
  const Tensor upstream = randn({6, 40}, DType::Float64, &gen);
  nn::GPTLayerNorm norm(40);
  norm.to(DType::Float64);
  {
    NoGradGuard no_grad;
    norm.scale.copy_(randn({40}, DType::Float64, &gen));
  }
  const Result fused = run(norm, x0, upstream, true);
  const Result composite = run(norm, x0, upstream, false);
  expect_close(fused.out, composite.out, 1e-12, "output");
  expect_close(fused.input_grad, composite.input_grad, 1e-12, "input grad");
  expect_close(fused.parameter_grads[0], composite.parameter_grads[0], 1e-12, "scale grad");
}

TEST(FusedNormGelu, Gradcheck) {
  Generator gen(17);
  auto input = [&](const Shape& shape) {
    return randn(shape, DType::Float64, &gen).requires_grad_(true);
  };
  auto expect_ok = [](const autograd::GradcheckResult& r, const char* what) {
    EXPECT_TRUE(r.ok) << what << "\n" << r.report;
  };
  expect_ok(
      autograd::gradcheck([](const Inputs& v) { return gpt_gelu(v[0]); }, {input({3, 5}) * 2.0}),
      "gpt_gelu");
  expect_ok(autograd::gradcheck([](const Inputs& v) { return gelu(v[0], "tanh"); },
                                {input({3, 5}) * 2.0}),
            "gelu tanh");
  expect_ok(
      autograd::gradcheck([](const Inputs& v) { return gpt_layer_norm(v[0], v[1], v[2], 1e-5); },
                          {input({2, 3, 6}), input({6}), input({6})}),
      "gpt_layer_norm");
  expect_ok(autograd::gradcheck(
                [](const Inputs& v) {
                  return layer_norm(v[0], {2, 3}, v[1], v[2], 1e-5);
                },
                {input({4, 2, 3}), input({2, 3}), input({2, 3})}),
            "layer_norm");
}

TEST(FusedNormGelu, GradFnNamesAndErrors) {
  const Tensor x = randn({2, 4}).requires_grad_(true);
  EXPECT_EQ(gpt_gelu(x).grad_fn()->name(), "GptGeluBackward0");
  const Tensor scale = ones({4}).requires_grad_(true), shift = zeros({4}).requires_grad_(true);
  EXPECT_EQ(gpt_layer_norm(x, scale, shift).grad_fn()->name(), "GptLayerNormBackward0");
  auto expect_error_naming = [](auto fn, std::vector<std::string> fragments) {
    const std::string message = test::error_of(fn);
    for (const std::string& f : fragments)
      EXPECT_NE(message.find(f), std::string::npos) << message << "\nexpected to contain: " << f;
  };
  expect_error_naming([&] { gpt_layer_norm(x, ones({3}), zeros({3})); },
                      {"gpt_layer_norm", "last dim 3", "[2, 4]"});
  expect_error_naming([&] { gpt_layer_norm(x, ones({4}), zeros({3})); },
                      {"gpt_layer_norm", "[4]", "[3]"});
  expect_error_naming([&] { gpt_layer_norm(x, ones({4}, DType::Float64), zeros({4})); },
                      {"gpt_layer_norm", "float32", "float64"});
  expect_error_naming(
      [&] {
        gpt_layer_norm(tensor({1, 2}).to(DType::Int64), ones({2}), zeros({2}));
      },
      {"gpt_layer_norm", "floating point", "int64"});
  expect_error_naming([&] { gpt_gelu(Tensor()); }, {"gpt_gelu", "undefined"});
}

TEST(FusedNormGelu, ModelOutputTheSameWithEitherPath) {
  // A small GPT: every GPTLayerNorm and GPTGELU switched to the composite gives the same logits.
  manual_seed(123);
  nn::GPTConfig cfg{65, 16, 32, 2, 2, 0.0, false};
  nn::GPTModel model(cfg);
  model.eval();
  const Tensor idx = randint(0, 65, {2, 16});
  auto logits_with = [&](bool fused) {
    for (const auto& [name, m] : model.named_modules()) {
      if (auto* ln = dynamic_cast<nn::GPTLayerNorm*>(m.get())) ln->fused = fused;
      if (auto* g = dynamic_cast<nn::GPTGELU*>(m.get())) g->fused = fused;
    }
    NoGradGuard no_grad;
    return test::values(model.forward(idx));
  };
  EXPECT_EQ(logits_with(true), logits_with(false));
}

}  // namespace
}  // namespace ember
