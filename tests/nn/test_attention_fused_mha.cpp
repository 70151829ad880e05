// MultiHeadAttention's fused path (causal_attention) against its composite path
// (fused_attention = false, the book's lines): the same output and the same gradient of every
// parameter and of the input, in eval mode and in training with dropout (the same mask drawn
// from the same generator state), to 1e-5 relative (float32; the float64 comparison of the op
// itself is in tests/core/ops/test_attention_fused.cpp).
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

// The fused kernel is causal by construction, so forward() takes it only for a mask whose used
// block [:n, :n] is exactly the causal one (0 on and below the diagonal, 1 above), contiguous
// or strided; any other mask runs the composite, which applies it as the book does. Each
// mask below gives the same bits with fused_attention on and off, and the changed ones give
// something else than the causal mask.
TEST(MultiHeadAttentionFused, OnlyTheCausalMaskTakesTheFusedKernel) {
  constexpr int64_t context = 9, n = 7;
  manual_seed(123);
  nn::MultiHeadAttention m(4, 4, context, 0.0, 2);
  m.eval();
  Generator gen(5);
  const Tensor x = randn({2, n, 4}, DType::Float32, &gen);
  auto output = [&](const Tensor& mask, bool fused) {
    m.mask = mask;
    m.fused_attention = fused;
    NoGradGuard no_grad;
    return test::values(m.forward(x));
  };
  const Tensor causal = triu(ones({context, context}), 1);
  const std::vector<double> expected = output(causal, false);
  auto with = [&](int64_t i, int64_t j, double value) {
    Tensor mask = causal.clone();
    mask.index({i, j}).fill_(value);
    return mask;
  };
  struct Case {
    std::string name;
    Tensor mask;
    bool same_as_causal;
  };
  const std::vector<Case> cases = {
      {"causal", causal, true},
      {"causal, stored transposed", tril(ones({context, context}), -1).t(), true},
      {"changed past the used block", with(n, 0, 1.0), true},
      {"first row sees none", with(0, 0, 1.0), false},
      {"first row sees the second token", with(0, 1, 0.0), false},
      {"last row hides itself", with(n - 1, n - 1, 1.0), false},
      {"last row hides the first token", with(n - 1, 0, 1.0), false},
      {"a row sees the next token", with(3, 4, 0.0), false},
      {"2 instead of 1 above the diagonal", with(2, 5, 2.0), true},
      {"looser: each token sees the next", triu(ones({context, context}), 2), false},
      {"strided and looser", tril(ones({context, context}), -2).t(), false},
  };
  // Equal values, NaN matching NaN (a row that sees no token is NaN, as in PyTorch).
  auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](double u, double v) {
      return u == v || (std::isnan(u) && std::isnan(v));
    });
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<double> fused = output(c.mask, true), composite = output(c.mask, false);
    EXPECT_TRUE(same(fused, composite));
    EXPECT_EQ(same(composite, expected), c.same_as_causal);
  }
}

}  // namespace
}  // namespace ember
