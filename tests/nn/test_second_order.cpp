// Second derivatives equal PyTorch's (tests/fixtures/second_order.txt, from
// scripts/fixtures/gen_second_order.py: PyTorch 1.13, float64), to 1e-10 relative:
// - single ops: out = f(x...), g = grad(out, xs, w, create_graph), then the gradient of
//   s = sum_i (g_i . v_i) with respect to every x_i (w^T H v) and to w (J v);
// - the chapter's MultiHeadAttention: the Hessian of an MSE loss w.r.t. W_query.weight, by rows
//   and by autograd::functional::hessian;
// - a gradient penalty || d loss / d x ||^2 through it: every parameter's gradient;
// - a tiny GPTModel's cross-entropy: the Hessian-vector product for every parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/functional.h"
#include "core/ember.h"
#include "nn/attention.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "tests/fixtures.h"
#include "tests/nn/gpt_test_util.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

namespace F = ember::nn::functional;

const test::Fixture& fx() { return test::fixture_file("second_order.txt"); }

// `actual` equals the fixture tensor `name` to 1e-10 relative: per element
// |a - e| <= 1e-10 * max(|e|, 1e-3 * max_j |e_j|). (The floor keeps elements that cancel to
// near zero, whose rounding is relative to the tensor's scale, from failing on 1e-17.)
// `floor` (absolute) is for a tensor that is zero in exact arithmetic (a key bias's gradient:
// softmax ignores a constant added to a row of scores), whose elements are rounding noise of
// sums at the model's scale: the caller passes 1e-3 * the largest element of the whole model.
void expect_close(const Tensor& actual, const std::string& name, double rtol = 1e-10,
                  double floor = 0) {
  const Tensor expected = fx().tensor(name);
  ASSERT_TRUE(actual.defined()) << name;
  ASSERT_EQ(actual.shape(), expected.shape()) << name;
  const std::vector<double> a = actual.contiguous().to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  int bad = 0;
  for (std::size_t i = 0; i < e.size(); ++i) {
    const double tol = rtol * std::max({std::abs(e[i]), 1e-3 * scale, floor});
    if (!(std::abs(a[i] - e[i]) <= tol) && bad++ < 5) {
      ADD_FAILURE() << name << " element " << i << ": " << a[i] << " vs PyTorch " << e[i]
                    << " (diff " << a[i] - e[i] << ", tolerance " << tol << ")";
    }
  }
}

// ---- single ops ----

using OpFn = std::function<Tensor(const std::vector<Tensor>& xs, const std::vector<Tensor>& ts)>;

void check_op(const std::string& name, int inputs, const OpFn& fn, int integer_inputs = 0) {
  SCOPED_TRACE(name);
  const std::string p = "op/" + name + "/";
  std::vector<Tensor> xs, ts, vs;
  for (int i = 0; i < inputs; ++i) {
    xs.push_back(fx().tensor(p + "x" + std::to_string(i)).requires_grad_());
    vs.push_back(fx().tensor(p + "v" + std::to_string(i)));
  }
  for (int i = 0; i < integer_inputs; ++i) ts.push_back(fx().tensor(p + "t" + std::to_string(i)));
  const Tensor w = fx().tensor(p + "w").requires_grad_();
  const Tensor out = fn(xs, ts);
  expect_close(out, p + "out");
  const std::vector<Tensor> g = autograd::grad({out}, xs, {w}, std::nullopt, /*create_graph=*/true);
  Tensor s;
  for (int i = 0; i < inputs; ++i) {
    expect_close(g[i], p + "grad" + std::to_string(i));
    const Tensor term = (g[i] * vs[i]).sum();
    s = s.defined() ? s + term : term;
  }
  std::vector<Tensor> wrt = xs;
  wrt.push_back(w);
  const std::vector<Tensor> second =
      autograd::grad({s}, wrt, {}, std::nullopt, false, /*allow_unused=*/true);
  for (int i = 0; i < inputs; ++i) {
    const std::string h = p + "hvp" + std::to_string(i);
    if (fx().has(h)) {
      expect_close(second[i], h);
    } else {  // PyTorch: None (the gradient does not depend on this input); Ember: none or 0
      ASSERT_TRUE(fx().has(h + "_none")) << h;
      if (second[i].defined()) expect_close(second[i], h + "_none");
    }
  }
  expect_close(second[inputs], p + "jvp");
}

Tensor causal_mask(int64_t n) { return triu(ones({n, n}), 1).to(DType::Bool); }

TEST(SecondOrderOps, SoftmaxFamily) {
  check_op("softmax", 1, [](auto& x, auto&) { return softmax(x[0], -1); });
  check_op("softmax_dim0", 1, [](auto& x, auto&) { return softmax(x[0], 0); });
  check_op("log_softmax", 1, [](auto& x, auto&) { return log_softmax(x[0], -1); });
  // The chapter's causal attention: masked_fill with -inf, scale, softmax (the fused kernel
  // is checked through the MultiHeadAttention cases below).
  check_op("masked_softmax", 1, [](auto& x, auto&) {
    return softmax(masked_fill(x[0], causal_mask(4), -INFINITY) / std::sqrt(2.0), -1);
  });
}

TEST(SecondOrderOps, LayerNormAndGELU) {
  check_op("layer_norm", 3, [](auto& x, auto&) { return layer_norm(x[0], {4}, x[1], x[2], 1e-5); });
  check_op("book_layer_norm", 3, [](auto& x, auto&) {
    Tensor mean = x[0].mean(-1, true);
    Tensor var = x[0].var(-1, false, true);
    return x[1] * (x[0] - mean) / sqrt(var + 1e-5) + x[2];
  });
  check_op("gelu_tanh", 1, [](auto& x, auto&) { return gelu(x[0], "tanh"); });
  check_op("gelu", 1, [](auto& x, auto&) { return gelu(x[0]); });
  check_op("book_gelu", 1, [](auto& x, auto&) { return nn::GPTGELU().forward(x[0]); });
}

TEST(SecondOrderOps, Elementwise) {
  check_op("tanh", 1, [](auto& x, auto&) { return tanh(x[0]); });
  check_op("exp", 1, [](auto& x, auto&) { return exp(x[0]); });
  check_op("sqrt", 1, [](auto& x, auto&) { return sqrt(x[0]); });
  check_op("log", 1, [](auto& x, auto&) { return log(x[0]); });
  check_op("sigmoid", 1, [](auto& x, auto&) { return sigmoid(x[0]); });
  check_op("div", 2, [](auto& x, auto&) { return div(x[0], x[1]); });
  check_op("div_broadcast", 2, [](auto& x, auto&) { return div(x[0], x[1]); });
  check_op("mul", 2, [](auto& x, auto&) { return mul(x[0], x[1]); });
  check_op("pow3", 1, [](auto& x, auto&) { return pow(x[0], 3); });
  check_op("pow2_5", 1, [](auto& x, auto&) { return pow(x[0], 2.5); });
  check_op("pow_neg1_5", 1, [](auto& x, auto&) { return pow(x[0], -1.5); });
}

TEST(SecondOrderOps, ReductionsMatmulAndLosses) {
  check_op("var_dim", 1, [](auto& x, auto&) { return var(x[0], 1); });
  check_op("var_all", 1, [](auto& x, auto&) { return var(x[0]); });
  check_op("var_ln", 1, [](auto& x, auto&) { return x[0].var(-1, false, true); });
  check_op("mean", 1, [](auto& x, auto&) { return mean(x[0], {0}); });
  check_op("matmul", 2, [](auto& x, auto&) { return matmul(x[0], x[1]); });
  check_op(
      "cross_entropy", 1, [](auto& x, auto& t) { return F::cross_entropy(x[0], t[0]); }, 1);
  check_op("mse_loss", 2, [](auto& x, auto&) { return F::mse_loss(x[0], x[1]); });
}

// ---- the chapter's MultiHeadAttention ----

std::shared_ptr<nn::MultiHeadAttention> book_mha() {
  manual_seed(123);
  auto mha = std::make_shared<nn::MultiHeadAttention>(3, 2, 6, 0.0, 2);
  mha->to(DType::Float64);
  return mha;
}

Tensor book_batch() {
  const Tensor inputs = test::book_inputs();
  return stack({inputs, inputs}, 0).to(DType::Float64);
}

TEST(SecondOrderModules, MultiHeadAttentionHessianWrtWQuery) {
  auto mha = book_mha();
  const Tensor batch = book_batch();
  fx().expect_exact(batch, "mha/batch");
  const Tensor target = test::pattern({2, 6, 2}, 1);
  fx().expect_exact(target, "mha/target");
  Tensor& wq = mha->W_query->weight;
  const Tensor out = mha->forward(batch);
  expect_close(out, "mha/out");
  const Tensor loss = F::mse_loss(out, target);
  expect_close(loss, "mha/loss");
  const Tensor g = autograd::grad({loss}, {wq}, {}, std::nullopt, /*create_graph=*/true)[0];
  expect_close(g, "mha/grad");
  // Row by row: each element of the gradient, differentiated.
  const Tensor flat = g.reshape({6});
  std::vector<Tensor> rows;
  for (int64_t k = 0; k < 6; ++k) {
    rows.push_back(autograd::grad({flat.select(0, k)}, {wq}, {}, true)[0]);
  }
  expect_close(stack(rows, 0).reshape({2, 3, 2, 3}), "mha/hessian");
  // autograd::functional::hessian of the loss as a function of the weight.
  auto loss_of = [&](const Tensor& w) {
    const Tensor saved = wq;
    wq = w;
    Tensor l = F::mse_loss(mha->forward(batch), target);
    wq = saved;
    return l;
  };
  expect_close(autograd::functional::hessian(loss_of, wq), "mha/hessian");
}

TEST(SecondOrderModules, GradientPenaltyThroughMultiHeadAttention) {
  auto mha = book_mha();
  const Tensor x = book_batch().requires_grad_();
  const Tensor loss = F::mse_loss(mha->forward(x), test::pattern({2, 6, 2}, 1));
  expect_close(loss, "penalty/loss");
  const Tensor gx = autograd::grad({loss}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  expect_close(gx, "penalty/gx");
  const Tensor penalty = (gx * gx).sum();
  expect_close(penalty, "penalty/penalty");
  penalty.backward();
  expect_close(x.grad(), "penalty/x_grad");
  for (const auto& [key, p] : mha->named_parameters())
    expect_close(p.grad(), "penalty/grad/" + key);
}

TEST(SecondOrderModules, TinyGPTHessianVectorProduct) {
  manual_seed(123);
  nn::GPTModel model(test::tiny_gpt_config());
  model.to(DType::Float64);
  model.eval();
  const Tensor ids = fx().tensor("gpt/ids");
  const Tensor targets = fx().tensor("gpt/targets");
  const Tensor logits = model.forward(ids);
  const Tensor loss = F::cross_entropy(logits.flatten(0, 1), targets.flatten());
  expect_close(loss, "gpt/loss");
  const auto named = model.named_parameters();
  std::vector<Tensor> params;
  for (const auto& [key, p] : named) params.push_back(p);
  const std::vector<Tensor> g =
      autograd::grad({loss}, params, {}, std::nullopt, /*create_graph=*/true);
  Tensor s;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Tensor term = (g[k] * test::pattern(params[k].shape(), static_cast<int>(k))).sum();
    s = s.defined() ? s + term : term;
  }
  const std::vector<Tensor> hvp = autograd::grad({s}, params);
  // The largest element over all parameters, of the gradient and of the HVP.
  double grad_scale = 0, hvp_scale = 0;
  for (const auto& [key, p] : named) {
    for (double v : fx().tensor("gpt/grad/" + key).to_vector<double>())
      grad_scale = std::max(grad_scale, std::abs(v));
    for (double v : fx().tensor("gpt/hvp/" + key).to_vector<double>())
      hvp_scale = std::max(hvp_scale, std::abs(v));
  }
  std::size_t k = 0;
  for (const auto& [key, p] : named) {
    expect_close(g[k], "gpt/grad/" + key, 1e-10, 1e-3 * grad_scale);
    expect_close(hvp[k], "gpt/hvp/" + key, 1e-10, 1e-3 * hvp_scale);
    ++k;
  }
}

}  // namespace
}  // namespace ember
