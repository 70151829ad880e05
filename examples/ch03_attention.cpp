// Chapter 3 of "Build a Large Language Model (From Scratch)", "Coding Attention Mechanisms",
// cell by cell in C++: every tensor the chapter prints, with the same digits.
//
// Each section heading names the book's section; each `// cell [N]` comment names the notebook
// cell (ch03.ipynb, exercise-solutions.ipynb) whose Python the lines below it translate.
// tests/examples/test_ch03_example.cpp runs this program and compares its output with the book's.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/flags.h"
#include "examples/common/program.h"
#include "nn/attention.h"

using namespace ember;

namespace {

void heading(const std::string& title) { std::cout << "\n## " << title << "\n\n"; }

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  ember::examples::Flags app{
      "ch03_attention: chapter 3 of the book, cell by cell: every tensor it prints (no flags)"};
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
  // cell [24]: the six tokens of "Your journey starts with one step", embedded in 3-d.
  Tensor inputs = tensor({{0.43, 0.15, 0.89},    // Your     (x^1)
                          {0.55, 0.87, 0.66},    // journey  (x^2)
                          {0.57, 0.85, 0.64},    // starts   (x^3)
                          {0.22, 0.58, 0.33},    // with     (x^4)
                          {0.77, 0.25, 0.10},    // one      (x^5)
                          {0.05, 0.80, 0.55}});  // step     (x^6)

  heading("3.3.1 A simple self-attention mechanism without trainable weights");
  // cell [28]: attention scores of the query x^2 against every token, one dot product each.
  Tensor query = inputs[1];
  Tensor attn_scores_2 = empty({inputs.size(0)});
  for (int64_t i = 0; i < inputs.size(0); ++i) attn_scores_2[i].copy_(dot(inputs[i], query));
  std::cout << attn_scores_2 << "\n";

  // cell [30]: the same dot product by hand.
  Tensor res = scalar_tensor(0.0);
  for (int64_t idx = 0; idx < inputs.size(1); ++idx) res = res + inputs[0][idx] * query[idx];
  std::cout << res << "\n" << dot(inputs[0], query) << "\n";

  // cell [33]: normalising by the sum.
  Tensor attn_weights_2_tmp = attn_scores_2 / attn_scores_2.sum();
  std::cout << "Attention weights: " << attn_weights_2_tmp << "\n";
  std::cout << "Sum: " << attn_weights_2_tmp.sum() << "\n";

  // cell [35]: a naive softmax.
  auto softmax_naive = [](const Tensor& x) { return exp(x) / exp(x).sum(0); };
  Tensor attn_weights_2_naive = softmax_naive(attn_scores_2);
  std::cout << "Attention weights: " << attn_weights_2_naive << "\n";
  std::cout << "Sum: " << attn_weights_2_naive.sum() << "\n";

  // cell [37]: the library softmax (subtracts the maximum first: no overflow).
  Tensor attn_weights_2 = softmax(attn_scores_2, 0);
  std::cout << "Attention weights: " << attn_weights_2 << "\n";
  std::cout << "Sum: " << attn_weights_2.sum() << "\n";

  // cell [40]: the context vector z^2, a weighted sum of the inputs.
  Tensor context_vec_2 = zeros(query.shape());
  for (int64_t i = 0; i < inputs.size(0); ++i) context_vec_2 += attn_weights_2[i] * inputs[i];
  std::cout << context_vec_2 << "\n";

  heading("3.3.2 Computing attention weights for all input tokens");
  // cell [47]: all pairs with two loops...
  Tensor attn_scores = empty({6, 6});
  for (int64_t i = 0; i < inputs.size(0); ++i)
    for (int64_t j = 0; j < inputs.size(0); ++j)
      attn_scores.index({i, j}).copy_(dot(inputs[i], inputs[j]));
  std::cout << attn_scores << "\n";

  // cell [49]: ...or one matrix product.
  attn_scores = matmul(inputs, inputs.t());
  std::cout << attn_scores << "\n";

  // cell [51]: normalise each row.
  Tensor attn_weights = softmax(attn_scores, -1);
  std::cout << attn_weights << "\n";

  // cell [53]: each row sums to 1 (Python prints a float as its repr: float_repr).
  double row_2_sum = 0.0;
  for (double v : {0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581}) row_2_sum += v;
  std::cout << "Row 2 sum: " << float_repr(row_2_sum) << "\n";
  std::cout << "All row sums: " << attn_weights.sum(-1) << "\n";

  // cell [55]: all context vectors at once.
  Tensor all_context_vecs = matmul(attn_weights, inputs);
  std::cout << all_context_vecs << "\n";

  // cell [57]
  std::cout << "Previous 2nd context vector: " << context_vec_2 << "\n";

  heading("3.4.1 Computing the attention weights step by step");
  // cell [66]
  Tensor x_2 = inputs[1];
  const int64_t d_in = inputs.size(1);  // 3
  const int64_t d_out = 2;

  // cell [68]: three trainable weight matrices (no gradient needed yet).
  manual_seed(123);
  Tensor W_query = nn::Parameter(rand({d_in, d_out}), /*requires_grad=*/false);
  Tensor W_key = nn::Parameter(rand({d_in, d_out}), /*requires_grad=*/false);
  Tensor W_value = nn::Parameter(rand({d_in, d_out}), /*requires_grad=*/false);

  // cell [70]
  Tensor query_2 = matmul(x_2, W_query);
  std::cout << query_2 << "\n";

  // cell [72]
  Tensor keys = matmul(inputs, W_key);
  Tensor values = matmul(inputs, W_value);
  std::cout << "keys.shape: " << size_str(keys.shape()) << "\n";
  std::cout << "values.shape: " << size_str(values.shape()) << "\n";

  // cell [75]
  Tensor keys_2 = keys[1];
  Tensor attn_score_22 = query_2.dot(keys_2);
  std::cout << attn_score_22 << "\n";

  // cell [77]
  Tensor attn_scores_2_w = matmul(query_2, keys.t());
  std::cout << attn_scores_2_w << "\n";

  // cell [80]: scaled by the square root of the key dimension.
  const double d_k = static_cast<double>(keys.size(1));
  Tensor attn_weights_2_w = softmax(attn_scores_2_w / std::sqrt(d_k), -1);
  std::cout << attn_weights_2_w << "\n";

  // cell [83]
  Tensor context_vec_2_w = matmul(attn_weights_2_w, values);
  std::cout << context_vec_2_w << "\n";

  heading("3.4.2 Implementing a compact self-attention Python class");
  // cell [86]
  manual_seed(123);
  auto sa_v1 = std::make_shared<nn::SelfAttentionV1>(d_in, d_out);
  std::cout << sa_v1->forward(inputs) << "\n";

  // cell [89]
  manual_seed(789);
  auto sa_v2 = std::make_shared<nn::SelfAttentionV2>(d_in, d_out);
  std::cout << sa_v2->forward(inputs) << "\n";

  heading("3.5.1 Applying a causal attention mask");
  // cell [98]: reuse sa_v2's query and key projections.
  Tensor queries = sa_v2->W_query->forward(inputs);
  keys = sa_v2->W_key->forward(inputs);
  attn_scores = matmul(queries, keys.t());
  attn_weights = softmax(attn_scores / std::sqrt(static_cast<double>(keys.size(-1))), -1);
  std::cout << attn_weights << "\n";

  // cell [100]: ones on and below the diagonal.
  const int64_t context_length = attn_scores.size(0);
  Tensor mask_simple = tril(ones({context_length, context_length}));
  std::cout << mask_simple << "\n";

  // cell [102]: zero the future.
  Tensor masked_simple = attn_weights * mask_simple;
  std::cout << masked_simple << "\n";

  // cell [105]: renormalise the rows.
  Tensor row_sums = masked_simple.sum(-1, /*keepdim=*/true);
  Tensor masked_simple_norm = masked_simple / row_sums;
  std::cout << masked_simple_norm << "\n";

  // cell [108]: the efficient way: -inf above the diagonal before the softmax.
  Tensor mask = triu(ones({context_length, context_length}), 1);
  Tensor masked = attn_scores.masked_fill(mask.to_bool(), -INFINITY);
  std::cout << masked << "\n";

  // cell [110]
  attn_weights = softmax(masked / std::sqrt(static_cast<double>(keys.size(-1))), -1);
  std::cout << attn_weights << "\n";

  heading("3.5.2 Masking additional attention weights with dropout");
  // cell [115]: dropout rate 50%: survivors are scaled by 1 / (1 - 0.5) = 2.
  manual_seed(123);
  auto dropout = std::make_shared<nn::Dropout>(0.5);
  Tensor example = ones({6, 6});
  std::cout << dropout->forward(example) << "\n";

  // cell [116]: the same mask applied to the causal attention weights.
  manual_seed(123);
  std::cout << dropout->forward(attn_weights) << "\n";

  heading("3.5.3 Implementing a compact causal attention class");
  // cell [120]: a batch of two identical inputs.
  Tensor batch = stack({inputs, inputs}, 0);
  std::cout << size_str(batch.shape()) << "\n";

  // cell [121]
  manual_seed(123);
  auto ca = std::make_shared<nn::CausalAttention>(d_in, d_out, batch.size(1), 0.0);
  Tensor context_vecs = ca->forward(batch);
  std::cout << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << size_str(context_vecs.shape()) << "\n";

  heading("3.6.1 Stacking multiple single-head attention layers");
  // cell [127]
  manual_seed(123);
  auto mha_wrapper =
      std::make_shared<nn::MultiHeadAttentionWrapper>(3, 2, batch.size(1), 0.0, /*num_heads=*/2);
  context_vecs = mha_wrapper->forward(batch);
  std::cout << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << size_str(context_vecs.shape()) << "\n";

  heading("3.6.2 Implementing multi-head attention with weight splits");
  // cell [131]
  manual_seed(123);
  auto mha = std::make_shared<nn::MultiHeadAttention>(3, 2, batch.size(1), 0.0, /*num_heads=*/2);
  context_vecs = mha->forward(batch);
  std::cout << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << size_str(context_vecs.shape()) << "\n";

  // cell [138]: a batched matrix product over (batch, heads).
  // (b, num_heads, num_tokens, head_dim) = (1, 2, 3, 4)
  Tensor a = tensor({{{{0.2745, 0.6584, 0.2775, 0.8573},
                       {0.8993, 0.0390, 0.9268, 0.7388},
                       {0.7179, 0.7058, 0.9156, 0.4340}},
                      {{0.0772, 0.3565, 0.1479, 0.5331},
                       {0.4066, 0.2318, 0.4545, 0.9737},
                       {0.4606, 0.5159, 0.4220, 0.5786}}}});
  std::cout << matmul(a, a.transpose(2, 3)) << "\n";

  // cell [140]: the same, one head at a time.
  Tensor first_head = a.index({0, 0});
  Tensor first_res = matmul(first_head, first_head.t());
  std::cout << "First head:\n " << first_res << "\n";
  Tensor second_head = a.index({0, 1});
  Tensor second_res = matmul(second_head, second_head.t());
  std::cout << "\nSecond head:\n " << second_res << "\n";

  heading("Exercise 3.1: Comparing SelfAttention_v1 and SelfAttention_v2");
  // exercise cells [5]-[9]: copy v2's Linear weights, transposed, into v1.
  manual_seed(123);
  auto ex_v1 = std::make_shared<nn::SelfAttentionV1>(d_in, d_out);
  manual_seed(123);
  auto ex_v2 = std::make_shared<nn::SelfAttentionV2>(d_in, d_out);
  {
    NoGradGuard no_grad;
    ex_v1->W_query.copy_(ex_v2->W_query->weight.t());
    ex_v1->W_key.copy_(ex_v2->W_key->weight.t());
    ex_v1->W_value.copy_(ex_v2->W_value->weight.t());
  }
  std::cout << ex_v1->forward(inputs) << "\n";
  std::cout << ex_v2->forward(inputs) << "\n";

  heading("Exercise 3.2: Returning two-dimensional embedding vectors");
  // d_out = 1 per head, two heads: the wrapper's output is 2-d again.
  manual_seed(123);
  auto ex_wrapper =
      std::make_shared<nn::MultiHeadAttentionWrapper>(3, 1, batch.size(1), 0.0, /*num_heads=*/2);
  context_vecs = ex_wrapper->forward(batch);
  std::cout << context_vecs << "\n";
  std::cout << "context_vecs.shape: " << size_str(context_vecs.shape()) << "\n";

  heading("Exercise 3.3: Initializing GPT-2 size attention modules");
  auto gpt2_mha = std::make_shared<nn::MultiHeadAttention>(768, 768, 1024, 0.0, /*num_heads=*/12);
  int64_t count = 0;
  for (const Tensor& p : gpt2_mha->parameters())
    if (p.requires_grad()) count += p.numel();
  std::cout << count << "\n";
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("ch03_attention", [&] { return run(argc, argv); });
}
