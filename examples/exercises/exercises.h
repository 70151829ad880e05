// The backprop exercises (examples/exercises/README.md): four ops of the book, each a custom
// Function whose forward is given (exercises.cpp) and whose backward you write, one file each:
//
//   softmax.cpp        (a) y = softmax(x) along the last dim                       [ch03]
//   attention.cpp      (b) causal self-attention: scores, mask, softmax, values    [ch03]
//   layer_norm.cpp     (c) LayerNorm over the last dim, with scale and shift       [ch04]
//   cross_entropy.cpp  (d) the mean cross-entropy of logits against targets        [ch05]
//
// The reference answers are in solutions/. exercise_check (exercise_check.cpp) builds with your
// files and compares your gradients with Ember's autograd on the chapter's inputs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/ember.h"

namespace exercises {

using namespace ember;  // the ops by their names: matmul, softmax, arange, eq, ...
using ember::autograd::AutogradContext;
using ember::autograd::tensor_list;

// (a) y = softmax(x) along the last dim. forward saves y.
struct Softmax : ember::autograd::Function<Softmax> {
  static constexpr const char* formula = "y = softmax(x):  dx = ?  (exercise a)";
  static Tensor forward(AutogradContext* ctx, const Tensor& x);
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs);  // softmax.cpp
};

// (b) Causal self-attention of queries, keys and values [..., T, d_k] (one head: [T, d_k];
// several: [heads, T, d_k]):
//   S = q k^T / sqrt(d_k),  S[i][j] = -inf for j > i (the mask),  A = softmax(S),  out = A v.
// forward saves q, k, v and A; ctx->saved_data["scale"] is 1 / sqrt(d_k).
struct CausalAttention : ember::autograd::Function<CausalAttention> {
  static constexpr const char* formula =
      "out = softmax(mask(q k^T / sqrt(d_k))) v:  dq, dk, dv = ?";
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v);
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs);  // attention.cpp
};

// (c) LayerNorm over the last dim (the book's, eps 1e-5, biased variance):
//   mean = mean(x), var = mean((x - mean)^2), rstd = 1 / sqrt(var + eps),
//   xhat = (x - mean) * rstd,  y = gamma * xhat + beta.
// forward saves xhat, rstd and gamma.
struct LayerNorm : ember::autograd::Function<LayerNorm> {
  static constexpr const char* formula = "y = gamma * (x - mean) / sqrt(var + eps) + beta:  ?";
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta);
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs);  // layer_norm.cpp
};

// (d) loss = mean over the N rows of -log softmax(logits)[row, targets[row]] (targets: int64
// [N]). forward saves p = softmax(logits) and targets.
struct CrossEntropy : ember::autograd::Function<CrossEntropy> {
  static constexpr const char* formula = "loss = mean(-log softmax(z)[target]):  dz = ?";
  static Tensor forward(AutogradContext* ctx, const Tensor& logits, const Tensor& targets);
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs);  // cross_entropy.cpp
};

// ---- the checker ----

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Gradients = std::function<tensor_list(const std::vector<Tensor>& inputs, const Tensor& grad)>;

// A mistake learners often make, as the gradients it gives: when yours equal these, the
// checker names the mistake.
struct Mistake {
  std::string hint;
  Gradients gradients;  // one per input (undefined where the mistake changes nothing)
};

// One check: the op (yours, through your custom Function) against the same op in Ember's ops,
// on the chapter's inputs, with a fixed upstream gradient.
struct Exercise {
  std::string name;                      // "softmax", what exercise_check takes
  std::string file;                      // "softmax.cpp", where the backward is written
  std::vector<std::string> input_names;  // "scores", ...
  std::vector<Tensor> inputs;            // float64; those that require grad are checked
  Tensor grad_output;                    // the upstream gradient dL/d(out)
  Fn yours;                              // through the custom Function
  Fn reference;                          // the same op in Ember's ops (autograd's gradients)
  std::vector<std::string> hints;        // per input: the term most often forgotten there
  std::vector<Mistake> mistakes;
};

// The exercises in the book's order, with `yours` calling the given functions (the custom
// Functions above, or a test's own).
struct Candidates {
  Fn softmax, attention, layer_norm, cross_entropy;
};
std::vector<Exercise> all_exercises(const Candidates& yours);

struct Outcome {
  bool passed = false;
  std::string report;  // what is wrong, where, and a hint; or what passed
};
Outcome check(const Exercise& exercise);

}  // namespace exercises
