// MultiHeadAttention's fused path (causal_attention) against its composite path
// (fused_attention = false, the book's lines): the same output and the same gradient of every
// parameter and of the input, in eval mode and in training with dropout (the same mask drawn
// from the same generator state), to 1e-5 relative (float32; the float64 comparison of the op
// itself is in tests/core/test_attention_fused.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/ember.h"
#include "nn/attention.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

struct Result {
  std::vector<double> out, input_grad;
  std::vector<std::vector<double>> parameter_grads;
};

Result run(nn::MultiHeadAttention& m, Tensor x, const Tensor& upstream, bool fused) {
  m.fused_attention = fused;
  m.zero_grad();
  x.set_grad(Tensor());
  manual_seed(321);  // the dropout mask
  Tensor out = m.forward(x);
  (out * upstream).sum().backward();
  Result r{test::values(out), test::values(x.grad()), {}};
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
    ASSERT_LE(std::abs(a[i] - b[i]), rtol * (std::abs(b[i]) + scale)) << what << " element " << i;
  }
}

void expect_paths_agree(double dropout, bool training, double rtol) {
  SCOPED_TRACE(::testing::Message() << "dropout=" << dropout << " training=" << training);
  manual_seed(123);
  nn::MultiHeadAttention m(12, 8, 80, dropout, 2);
  m.train(training);
  Generator gen(11);
  const Tensor x = randn({2, 70, 12}, DType::Float32, &gen).requires_grad_(true);
  const Tensor upstream = randn({2, 70, 8}, DType::Float32, &gen);
  const Result fused = run(m, x, upstream, true);
  const Result composite = run(m, x, upstream, false);
  expect_close(fused.out, composite.out, rtol, "output");
  EXPECT_EQ(fused.out, composite.out);  // the forward is the composite's operations: same bits
  expect_close(fused.input_grad, composite.input_grad, rtol, "input grad");
  ASSERT_EQ(fused.parameter_grads.size(), composite.parameter_grads.size());
  for (std::size_t i = 0; i < fused.parameter_grads.size(); ++i) {
    expect_close(fused.parameter_grads[i], composite.parameter_grads[i], rtol,
                 "parameter grad " + std::to_string(i));
  }
}

TEST(MultiHeadAttentionFused, EvalEqualsComposite) {
  expect_paths_agree(0.5, /*training=*/false, 1e-5);
}

TEST(MultiHeadAttentionFused, TrainingWithDropoutEqualsComposite) {
  expect_paths_agree(0.5, /*training=*/true, 1e-5);
}

TEST(MultiHeadAttentionFused, KeepTraceUsesTheComposite) {
  manual_seed(123);
  nn::MultiHeadAttention m(3, 2, 6, 0.0, 2);
  m.keep_trace = true;
  const Tensor x = test::book_inputs().to(DType::Float32);
  m.forward(stack({x, x}));
  EXPECT_TRUE(m.trace.attn_weights.defined());
  EXPECT_EQ(m.trace.attn_weights.shape(), (Shape{2, 2, 6, 6}));
}

}  // namespace
}  // namespace ember
