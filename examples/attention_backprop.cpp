// Backprop through attention, looked at from the inside.
//
// One MultiHeadAttention forward and backward at the book's size (d_in = 3, 6 tokens, batch 2),
// twice: with the book's head_dim = 1 (d_out = 2, 2 heads) and with head_dim = 2 (d_out = 4).
// It prints the gradient of every intermediate (queries, keys, values, scores, weights, context)
// and of every parameter, checks the softmax and matmul gradients autograd found against the
// formulas derived by hand below, writes the graph as Graphviz DOT (and as SVG when Graphviz's
// `dot` is installed) and the attention maps as an SVG picture (the tokens on both axes, one
// panel per head), and runs gradcheck (float64, central differences) on every chapter module.
//
// The forward, per batch b and head h (T tokens, d = head_dim):
//   Q = x W_q^T, K = x W_k^T, V = x W_v^T           split into heads: [b, h, T, d]
//   S = Q K^T                                       scores [T, T]
//   S[i][j] = -inf for j > i                        causal mask (in place, as the book)
//   A = softmax(S / sqrt(d)) over each row          attention weights
//   C = A V                                         context [T, d], heads merged, then out_proj
//
// The backward, given dC (what autograd hands to the matmul A V):
//   dA = dC V^T                 dV = A^T dC                         (C = A V)
//   dZ[i][j] = A[i][j] (dA[i][j] - sum_k dA[i][k] A[i][k])          (A = softmax(Z), Z = S/sqrt(d))
//   dS = dZ / sqrt(d)           (masked entries: A = 0 there, so dS = 0 too)
//   dQ = dS K                   dK = dS^T Q                         (S = Q K^T)
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/ember.h"
#include "examples/common/flags.h"
#include "examples/common/program.h"
#include "examples/common/svg.h"
#include "nn/attention.h"

using namespace ember;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

// The book's six tokens, "Your journey starts with one step".
const std::vector<std::string> kTokens = {"Your", "journey", "starts", "with", "one", "step"};

// weights: [batch, heads, T, T]; one panel per head of the first batch element, into one SVG.
void save_attention_maps(const Tensor& weights, const std::string& path, const std::string& what) {
  examples::svg::HeatmapGrid grid;
  grid.title = "Attention weights of " + what;
  grid.subtitle = "row: the query token; column: the key token it attends to (rows sum to 1)";
  for (int64_t h = 0; h < weights.size(1); ++h) {
    Tensor map = weights.index({0, h}).detach().contiguous();
    const int rows = static_cast<int>(map.size(0)), cols = static_cast<int>(map.size(1));
    grid.panels.push_back(
        {"head " + std::to_string(h), map.to_vector<double>(), rows, cols, kTokens, kTokens});
  }
  examples::svg::write_file(path, examples::svg::heatmap_grid(grid));
  std::cout << "wrote " << path << "\n";
}

// The autograd graph as Graphviz text, and as SVG when `dot` is installed.
void save_graph(const Tensor& loss, const std::string& stem) {
  examples::svg::write_file(stem + ".dot", autograd::to_dot(loss));
  std::cout << "\nwrote " << stem << ".dot\n";
  if (std::system("command -v dot >/dev/null 2>&1") == 0 &&
      std::system(("dot -Tsvg " + stem + ".dot -o " + stem + ".svg").c_str()) == 0) {
    std::cout << "wrote " << stem << ".svg (the graph, drawn by Graphviz)\n";
  } else {
    std::cout << "Graphviz's dot is not installed: no " << stem << ".svg (apt-get install "
              << "graphviz, then: dot -Tsvg " << stem << ".dot -o " << stem << ".svg)\n";
  }
}

// The graph as an explorer page (autograd::explore): open it in a browser, click a node for
// its value, gradients and derivative formula, play the backward pass step by step.
void save_explorer(const Tensor& loss, const nn::MultiHeadAttention& mha, const Tensor& batch,
                   const std::string& stem) {
  autograd::ExploreOptions options;
  options.title = "Ember: the graph of one MultiHeadAttention (" + stem + ")";
  options.name_all(mha.named_parameters()).name("inputs", batch);
  const nn::AttentionTrace& t = mha.trace;
  options.name("queries", t.queries).name("keys", t.keys).name("values", t.values);
  options.name("attn_scores", t.attn_scores).name("attn_weights", t.attn_weights);
  options.name("context", t.context).name("loss", loss);
  try {
    autograd::explore(loss, stem + ".html", options);
    std::cout << "wrote " << stem << ".html (the graph to explore: open it in a browser)\n";
  } catch (const Error& e) {
    std::cout << "no " << stem << ".html: " << e.what() << "\n";
  }
}

void study(int64_t d_out, int64_t num_heads, const std::string& label) {
  std::cout << "\n==== MultiHeadAttention(d_in=3, d_out=" << d_out << ", context_length=6, "
            << "dropout=0.0, num_heads=" << num_heads << "): " << label << " ====\n";
  Tensor inputs = tensor({{0.43, 0.15, 0.89},
                          {0.55, 0.87, 0.66},
                          {0.57, 0.85, 0.64},
                          {0.22, 0.58, 0.33},
                          {0.77, 0.25, 0.10},
                          {0.05, 0.80, 0.55}});
  Tensor batch = stack({inputs, inputs}, 0).requires_grad_();

  manual_seed(123);
  nn::MultiHeadAttention mha(3, d_out, 6, 0.0, num_heads);
  mha.keep_trace = true;  // keep the intermediates, with retain_grad
  Tensor out;
  {
    autograd::KeepValuesGuard keep;  // every node keeps its value, for the explorer page
    out = mha.forward(batch);
  }

  // A loss that weighs every output differently, so no gradient is trivially uniform.
  manual_seed(0);
  Tensor loss_weights = rand(out.shape());
  Tensor loss = (out * loss_weights).sum();
  std::cout << "output:\n" << out << "\nloss = (output * loss_weights).sum() = " << loss << "\n";
  const std::string stem = "attention_backprop_" + label;
  save_explorer(loss, mha, batch, stem);
  loss.backward();

  const nn::AttentionTrace& t = mha.trace;
  std::cout << "\n-- gradients of the intermediates (batch 0) --\n";
  std::cout << "d loss / d context [b, h, T, d]:\n" << t.context.grad()[0] << "\n";
  std::cout << "d loss / d attn_weights:\n" << t.attn_weights.grad()[0] << "\n";
  std::cout << "d loss / d attn_scores (0 where masked):\n" << t.attn_scores.grad()[0] << "\n";
  std::cout << "d loss / d queries:\n" << t.queries.grad()[0] << "\n";
  std::cout << "d loss / d keys:\n" << t.keys.grad()[0] << "\n";
  std::cout << "d loss / d values:\n" << t.values.grad()[0] << "\n";
  std::cout << "d loss / d input (both batch rows):\n" << batch.grad() << "\n";

  std::cout << "\n-- gradients of the parameters --\n";
  for (const auto& [name, p] : mha.named_parameters()) {
    std::cout << name << " " << size_str(p.shape()) << ":\n" << p.grad() << "\n";
  }

  std::cout << "\n-- autograd against the hand-derived formulas --\n";
  NoGradGuard no_grad;
  const double scale = std::sqrt(static_cast<double>(mha.head_dim));
  Tensor A = t.attn_weights.detach(), V = t.values.detach(), Q = t.queries.detach(),
         K = t.keys.detach(), dC = t.context.grad();
  Tensor dA = matmul(dC, V.transpose(-2, -1));
  Tensor dV = matmul(A.transpose(-2, -1), dC);
  Tensor dZ = A * (dA - (dA * A).sum(-1, /*keepdim=*/true));
  Tensor dS = dZ / scale;
  Tensor dQ = matmul(dS, K);
  Tensor dK = matmul(dS.transpose(-2, -1), Q);
  struct Check {
    const char* what;
    Tensor formula, autograd;
  };
  for (const Check& c :
       {Check{"dA = dC V^T", dA, t.attn_weights.grad()}, Check{"dV = A^T dC", dV, t.values.grad()},
        Check{"dS = A * (dA - rowsum(dA * A)) / sqrt(d)", dS, t.attn_scores.grad()},
        Check{"dQ = dS K", dQ, t.queries.grad()}, Check{"dK = dS^T Q", dK, t.keys.grad()}}) {
    double diff = max_abs_diff(c.formula, c.autograd);
    bool ok = allclose(c.formula, c.autograd, 1e-5, 1e-6);
    std::cout << (ok ? "ok   " : "FAIL ") << c.what << ": max |formula - autograd| = " << diff
              << "\n";
  }

  save_graph(loss, stem);
  save_attention_maps(A, stem + "_weights.svg",
                      "MultiHeadAttention(d_in=3, d_out=" + std::to_string(d_out) +
                          ", num_heads=" + std::to_string(num_heads) + ")");
}

// gradcheck in float64 of a module w.r.t. its input and every parameter. The batched modules
// take [batch, tokens, d_in]; SelfAttention_v1/v2 (keys.T) take one sequence [tokens, d_in].
template <typename M>
void check_module(const std::string& name, std::shared_ptr<M> module,
                  const Shape& input_shape = {2, 4, 3}) {
  module->to(DType::Float64);
  std::vector<Tensor> inputs;
  manual_seed(7);
  inputs.push_back(rand(input_shape, DType::Float64).requires_grad_());
  std::vector<Tensor> params = module->parameters();
  inputs.insert(inputs.end(), params.begin(), params.end());
  auto fn = [&](const std::vector<Tensor>& in) { return module->forward(in[0]); };
  auto result = autograd::gradcheck(fn, inputs);
  std::cout << (result.ok ? "ok   " : "FAIL ") << "gradcheck " << name << " (input and "
            << params.size() << " parameters)" << (result.ok ? "" : "\n" + result.report) << "\n";
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  ember::examples::Flags app{
      "attention_backprop: the backward pass through the chapter-3 attention modules, and a "
      "gradcheck of each (no flags)"};
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
  study(/*d_out=*/2, /*num_heads=*/2, "head_dim1");
  study(/*d_out=*/4, /*num_heads=*/2, "head_dim2");

  std::cout << "\n==== gradcheck of every chapter module (float64, central differences) ====\n";
  manual_seed(1);
  check_module("SelfAttention_v2(3, 2, qkv_bias=true)",
               std::make_shared<nn::SelfAttentionV2>(3, 2, true), {4, 3});
  check_module("CausalAttention(3, 2, 6, 0.0)",
               std::make_shared<nn::CausalAttention>(3, 2, 6, 0.0));
  check_module("MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)",
               std::make_shared<nn::MultiHeadAttentionWrapper>(3, 2, 6, 0.0, 2));
  check_module("MultiHeadAttention(3, 4, 6, 0.0, 2)",
               std::make_shared<nn::MultiHeadAttention>(3, 4, 6, 0.0, 2));
  // SelfAttention_v1 works on 2-d inputs.
  auto v1 = std::make_shared<nn::SelfAttentionV1>(3, 2);
  v1->to(DType::Float64);
  std::vector<Tensor> inputs = {rand({5, 3}, DType::Float64).requires_grad_()};
  for (const Tensor& p : v1->parameters()) inputs.push_back(p);
  auto result = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return v1->forward(in[0]); }, inputs);
  std::cout << (result.ok ? "ok   " : "FAIL ") << "gradcheck SelfAttention_v1(3, 2)\n";
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("attention_backprop", [&] { return run(argc, argv); });
}
