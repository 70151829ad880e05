// The exercises' forwards (given), their inputs (the book's), the same ops in Ember's ops (whose
// gradients autograd computes: the expected answers), the mistakes the checker recognises, and
// the checker.
#include "examples/exercises/exercises.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace exercises {

// ---- the forwards ----

Tensor Softmax::forward(AutogradContext* ctx, const Tensor& x) {
  Tensor y = softmax(x, -1);
  ctx->save_for_backward({y});
  return y;
}

namespace {
// True above the diagonal: position j is in i's future.
Tensor causal_mask(int64_t t) { return triu(ones({t, t}), 1).to_bool(); }
}  // namespace

Tensor CausalAttention::forward(AutogradContext* ctx, const Tensor& q, const Tensor& k,
                                const Tensor& v) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  Tensor a = softmax(scores.masked_fill(causal_mask(q.size(-2)), -INFINITY), -1);
  ctx->save_for_backward({q, k, v, a});
  ctx->saved_data["scale"] = scale;
  return matmul(a, v);
}

Tensor LayerNorm::forward(AutogradContext* ctx, const Tensor& x, const Tensor& gamma,
                          const Tensor& beta) {
  Tensor centered = x - x.mean(-1, true);
  Tensor var = (centered * centered).mean(-1, true);
  Tensor rstd = 1.0 / sqrt(var + 1e-5);
  Tensor xhat = centered * rstd;
  ctx->save_for_backward({xhat, rstd, gamma});
  return gamma * xhat + beta;
}

Tensor CrossEntropy::forward(AutogradContext* ctx, const Tensor& logits, const Tensor& targets) {
  Tensor log_p = log_softmax(logits, -1);
  ctx->save_for_backward({exp(log_p), targets});
  return -gather(log_p, 1, targets.view({-1, 1})).mean();
}

namespace {

// ---- the chapters' inputs ----

// "Your journey starts with one step": the book's 3-d embeddings of its six tokens (ch03).
Tensor journey() {
  return tensor({{0.43, 0.15, 0.89},   // Your
                 {0.55, 0.87, 0.66},   // journey
                 {0.57, 0.85, 0.64},   // starts
                 {0.22, 0.58, 0.33},   // with
                 {0.77, 0.25, 0.10},   // one
                 {0.05, 0.80, 0.55}},  // step
                DType::Float64);
}

// Uniform weights from a fixed seed (ch03 draws its W_query, W_key, W_value with torch.rand).
Tensor weights(int64_t in, int64_t out, uint64_t seed) {
  manual_seed(seed);
  return rand({in, out}, DType::Float64);
}

Tensor leaf(const Tensor& t) { return t.detach().clone().requires_grad_(); }

// The upstream gradient: fixed, varied (a gradient of all ones hides mistakes).
Tensor upstream(const Shape& shape, uint64_t seed) {
  manual_seed(seed);
  return randn(shape, DType::Float64);
}

// Softmax's backward given y and dy.
Tensor softmax_grad(const Tensor& y, const Tensor& dy) { return y * (dy - (dy * y).sum(-1, true)); }

// Attention's gradients with a mistake switched on.
struct AttentionMistake {
  bool no_scale = false, no_row_sum = false, no_mask = false;
};
tensor_list attention_gradients(const std::vector<Tensor>& in, const Tensor& g,
                                AttentionMistake m) {
  NoGradGuard no_grad;
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  Tensor a = softmax(scores.masked_fill(causal_mask(q.size(-2)), -INFINITY), -1);
  Tensor a_backward = m.no_mask ? softmax(scores, -1) : a;
  Tensor da = matmul(g, v.transpose(-2, -1));
  Tensor ds = m.no_row_sum ? a_backward * da : softmax_grad(a_backward, da);
  if (!m.no_scale) ds = ds * scale;
  return {matmul(ds, k), matmul(ds.transpose(-2, -1), q), matmul(a.transpose(-2, -1), g)};
}

// LayerNorm's gradients with a path left out.
tensor_list layer_norm_gradients(const std::vector<Tensor>& in, const Tensor& g, bool mean_path,
                                 bool variance_path) {
  NoGradGuard no_grad;
  const Tensor &x = in[0], &gamma = in[1];
  Tensor centered = x - x.mean(-1, true);
  Tensor rstd = 1.0 / sqrt((centered * centered).mean(-1, true) + 1e-5);
  Tensor xhat = centered * rstd;
  Tensor dxhat = g * gamma;
  Tensor inner = dxhat;
  if (mean_path) inner = inner - dxhat.mean(-1, true);
  if (variance_path) inner = inner - xhat * (dxhat * xhat).mean(-1, true);
  return {rstd * inner, Tensor(), Tensor()};
}

Tensor one_hot(const Tensor& targets, int64_t classes) {
  return eq(arange(classes).view({1, -1}), targets.view({-1, 1})).to(DType::Float64);
}

}  // namespace

// ---- the exercises, in the book's order ----

std::vector<Exercise> all_exercises(const Candidates& yours) {
  std::vector<Exercise> out;
  const Tensor x = journey();

  // (a) softmax of ch03's attention scores, x x^T.
  {
    Exercise e;
    e.name = "softmax";
    e.file = "softmax.cpp";
    e.input_names = {"x (the attention scores)"};
    e.inputs = {leaf(matmul(x, x.t()))};
    e.grad_output = upstream({6, 6}, 1);
    e.yours = yours.softmax;
    e.reference = [](const std::vector<Tensor>& in) { return softmax(in[0], -1); };
    e.hints = {
        "every y_j of a row depends on every x_i of it: dx_i = sum_j dy_j y_j (delta_ij - y_i) = "
        "y_i (dy_i - sum_j dy_j y_j). The row-sum term, sum_j dy_j y_j, is the one most often "
        "forgotten."};
    e.mistakes = {
        {"this is y * dy: the row-sum term is missing. y_j depends on every x_i of its row, so "
         "dx = y * (dy - sum(dy * y, dim=-1, keepdim=true)).",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           NoGradGuard no_grad;
           return tensor_list{softmax(in[0], -1) * g};
         }},
        {"the sign is flipped: dx = y * (dy - sum(dy * y)), not y * (sum(dy * y) - dy).",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           NoGradGuard no_grad;
           return tensor_list{-softmax_grad(softmax(in[0], -1), g)};
         }}};
    out.push_back(e);
  }

  // (b) causal self-attention: one head (ch03's d_out = 2), then two heads of d_k = 2.
  const auto attention_exercise = [&](const std::string& name, const Tensor& q, const Tensor& k,
                                      const Tensor& v) {
    Exercise e;
    e.name = name;
    e.file = "attention.cpp";
    e.input_names = {"q (queries)", "k (keys)", "v (values)"};
    e.inputs = {leaf(q), leaf(k), leaf(v)};
    e.grad_output = upstream(q.shape(), 2);
    e.yours = yours.attention;
    e.reference = [](const std::vector<Tensor>& in) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(in[0].size(-1)));
      Tensor scores = matmul(in[0], in[1].transpose(-2, -1)) * scale;
      return matmul(softmax(scores.masked_fill(causal_mask(in[0].size(-2)), -INFINITY), -1), in[2]);
    };
    const std::string qk =
        "S = q k^T / sqrt(d_k): dS = A * (dA - sum(dA * A, -1)) with dA = dout v^T, then ";
    e.hints = {qk + "dq = dS k / sqrt(d_k). Most often forgotten: the 1/sqrt(d_k), softmax's "
                    "row-sum term, and that masked positions (j > i) get no gradient.",
               qk + "dk = dS^T q / sqrt(d_k) (transposed: k_j meets every query q_i). Most often "
                    "forgotten: the 1/sqrt(d_k), and that masked positions get no gradient.",
               "out = A v: dv = A^T dout, the attention weights transposed (masked weights are 0, "
               "so a value gets gradient only from the queries at or after its position)."};
    const auto mistake = [](AttentionMistake m) {
      return [m](const std::vector<Tensor>& in, const Tensor& g) {
        return attention_gradients(in, g, m);
      };
    };
    e.mistakes = {
        {"the 1/sqrt(d_k) is missing: S = q k^T / sqrt(d_k), so dq = dS k / sqrt(d_k) and "
         "dk = dS^T q / sqrt(d_k).",
         mistake({true, false, false})},
        {"softmax's row-sum term is missing: dS = A * (dA - sum(dA * A, dim=-1, keepdim=true)), "
         "not A * dA.",
         mistake({false, true, false})},
        {"the masked positions are getting gradient: the mask sets S[i][j] = -inf for j > i, so "
         "A[i][j] = 0 there and dS[i][j] must be 0. Use the saved (masked) A, not a softmax of "
         "the unmasked scores.",
         mistake({false, false, true})}};
    out.push_back(e);
  };
  attention_exercise("attention", matmul(x, weights(3, 2, 123)), matmul(x, weights(3, 2, 124)),
                     matmul(x, weights(3, 2, 125)));
  const auto heads = [&](uint64_t seed) {  // [6, 4] -> two heads [2, 6, 2]
    return matmul(x, weights(3, 4, seed)).view({6, 2, 2}).transpose(0, 1).contiguous();
  };
  attention_exercise("multihead_attention", heads(123), heads(124), heads(125));

  // (c) LayerNorm of the six embeddings, with a scale and shift that are not 1 and 0.
  {
    Exercise e;
    e.name = "layer_norm";
    e.file = "layer_norm.cpp";
    e.input_names = {"x", "gamma (scale)", "beta (shift)"};
    e.inputs = {leaf(x), leaf(tensor({1.5, 0.5, -1.0}, DType::Float64)),
                leaf(tensor({0.1, -0.2, 0.3}, DType::Float64))};
    e.grad_output = upstream({6, 3}, 3);
    e.yours = yours.layer_norm;
    e.reference = [](const std::vector<Tensor>& in) {
      Tensor centered = in[0] - in[0].mean(-1, true);
      Tensor var = (centered * centered).mean(-1, true);
      return in[1] * centered / sqrt(var + 1e-5) + in[2];
    };
    e.hints = {
        "x reaches y three ways: directly, through the mean and through the variance. With "
        "dxhat = dy * gamma: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)). The "
        "mean and variance paths (the two subtracted means) are the terms most often forgotten.",
        "dgamma = sum over the rows of dy * xhat (the normalized x, not x).",
        "dbeta = sum over the rows of dy."};
    e.mistakes = {
        {"the mean path is missing: the mean depends on every x, which adds -mean(dxhat) inside "
         "the bracket: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           return layer_norm_gradients(in, g, false, true);
         }},
        {"the variance path is missing: the variance depends on every x, which adds "
         "-xhat * mean(dxhat * xhat) inside the bracket.",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           return layer_norm_gradients(in, g, true, false);
         }},
        {"the mean and variance paths are both missing: this is rstd * dxhat, as if mean and "
         "variance were constants. dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           return layer_norm_gradients(in, g, false, false);
         }},
        {"dgamma uses x where it needs xhat: y = gamma * xhat + beta, so dgamma = sum(dy * xhat).",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           NoGradGuard no_grad;
           return tensor_list{Tensor(), (g * in[0]).sum(0), Tensor()};
         }}};
    out.push_back(e);
  }

  // (d) cross-entropy: which of the six words comes next, scored by x x^T.
  {
    Exercise e;
    e.name = "cross_entropy";
    e.file = "cross_entropy.cpp";
    e.input_names = {"logits", "targets"};
    e.inputs = {leaf(matmul(x, x.t()) * 3.0), tensor({1, 2, 3, 4, 5, 0}, DType::Int64)};
    e.grad_output = tensor(1.0, DType::Float64);
    e.yours = yours.cross_entropy;
    e.reference = [](const std::vector<Tensor>& in) {
      return -gather(log_softmax(in[0], -1), 1, in[1].view({-1, 1})).mean();
    };
    e.hints = {
        "loss = (1/N) sum_n -log p[n, target_n]: dlogits = (softmax(logits) - onehot(targets)) / "
        "N, times the incoming gradient. The 1/N of the mean is the term most often forgotten.",
        "targets are indices: they get no gradient (return an undefined Tensor)."};
    e.mistakes = {
        {"the 1/N of the mean is missing: the loss averages the N rows, so every row's gradient "
         "is divided by N.",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           NoGradGuard no_grad;
           return tensor_list{(softmax(in[0], -1) - one_hot(in[1], in[0].size(1))) * g, Tensor()};
         }},
        {"the one-hot term is missing: d(-log p[target]) / dlogits = p - onehot(target).",
         [](const std::vector<Tensor>& in, const Tensor& g) {
           NoGradGuard no_grad;
           return tensor_list{softmax(in[0], -1) * g / static_cast<double>(in[0].size(0)),
                              Tensor()};
         }}};
    out.push_back(e);
  }
  return out;
}

// ---- the checker ----

namespace {

constexpr double kRtol = 1e-6, kAtol = 1e-9;

bool close(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && allclose(a, b, kRtol, kAtol);
}

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

// "[2, 4]": the multi-index of flat index `flat` in `shape`.
std::string multi_index(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::ostringstream out;
  out << "[";
  for (std::size_t d = 0; d < index.size(); ++d) out << (d ? ", " : "") << index[d];
  out << "]";
  return out.str();
}

}  // namespace

Outcome check(const Exercise& e) {
  std::ostringstream report;
  report << "exercise " << e.name << " (" << e.file << ")\n";
  std::vector<Tensor> inputs;
  std::vector<std::size_t> checked;  // the inputs that get a gradient
  for (std::size_t i = 0; i < e.inputs.size(); ++i) {
    inputs.push_back(e.inputs[i].requires_grad() ? leaf(e.inputs[i]) : e.inputs[i]);
    if (e.inputs[i].requires_grad()) checked.push_back(i);
  }
  std::vector<Tensor> wrt;
  for (std::size_t i : checked) wrt.push_back(inputs[i]);

  // Expected: Ember's autograd through the same op written in Ember's ops.
  const Tensor expected_out = e.reference(inputs);
  const tensor_list expected = autograd::grad({expected_out}, wrt, {e.grad_output});

  // Yours: through your custom Function, given a copy of the upstream gradient (a backward
  // that writes into the one it gets must not change the one the hints are computed with).
  tensor_list yours;
  try {
    const Tensor out = e.yours(inputs);
    yours = autograd::grad({out}, wrt, {e.grad_output.clone()}, std::nullopt, false,
                           /*allow_unused=*/true);
  } catch (const Error& error) {
    report << "  your backward raised an error:\n    " << error.what() << "\n";
    return {false, report.str()};
  }
  if (std::none_of(yours.begin(), yours.end(), [](const Tensor& g) { return g.defined(); })) {
    report << "  not written yet: backward returns no gradient (the TODO in examples/exercises/"
           << e.file << ")\n";
    return {false, report.str()};
  }

  bool all_right = true;
  for (std::size_t n = 0; n < checked.size(); ++n) {
    const std::size_t i = checked[n];
    const std::string& what = e.input_names[i];
    if (!yours[n].defined()) {
      report << "  input " << i << ", " << what
             << ": no gradient (backward returned an undefined Tensor for it)\n"
             << "    hint: " << e.hints[i] << "\n";
      all_right = false;
      continue;
    }
    if (close(yours[n], expected[n])) {
      report << "  input " << i << ", " << what << ": right\n";
      continue;
    }
    all_right = false;
    const Tensor diff = (yours[n] - expected[n]).abs();
    const int64_t worst = argmax(diff).item<int64_t>();
    const Tensor flat_yours = yours[n].contiguous().view({-1});
    const Tensor flat_expected = expected[n].contiguous().view({-1});
    report << "  input " << i << ", " << what << ": wrong gradient\n"
           << "    worst element " << multi_index(worst, yours[n].shape()) << ": yours "
           << number(flat_yours[worst].item()) << ", expected "
           << number(flat_expected[worst].item()) << "\n";
    std::string hint = e.hints[i];
    for (const Mistake& m : e.mistakes) {
      const tensor_list theirs = m.gradients(inputs, e.grad_output);
      if (i < theirs.size() && close(yours[n], theirs[i])) {
        hint = m.hint;
        break;
      }
    }
    report << "    hint: " << hint << "\n";
  }
  if (!all_right) return {false, report.str()};

  // Right on the chapter's inputs; gradcheck confirms it against central differences (running
  // your backward many times over one graph: one that writes into what forward saved fails here).
  autograd::GradcheckResult gradcheck;
  try {
    gradcheck = autograd::gradcheck(e.yours, inputs);
  } catch (const Error& error) {
    report << "  gradcheck: your backward raised an error when run again:\n    " << error.what()
           << "\n";
    return {false, report.str()};
  }
  if (!gradcheck.ok) {
    report << "  gradcheck failed:\n    " << gradcheck.report << "\n";
    return {false, report.str()};
  }
  report << "  gradcheck (float64, central differences): passed\n"
         << "  right: every gradient equals Ember's autograd\n";
  return {true, report.str()};
}

}  // namespace exercises
