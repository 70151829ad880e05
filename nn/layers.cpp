#include "nn/layers.h"

#include <cmath>

#include "core/base/format.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/nn_ops.h"
#include "nn/init.h"

namespace ember::nn {

namespace {
const char* python_bool(bool value) { return value ? "True" : "False"; }
}  // namespace

// ---- Linear ----

Linear::Linear(int64_t in_features_, int64_t out_features_, bool bias_)
    : in_features(in_features_), out_features(out_features_) {
  check(in_features >= 0 && out_features >= 0, "Linear: expected non-negative sizes, got ",
        "in_features=", in_features, ", out_features=", out_features);
  // Registered by address: `lin->weight = ...` replaces the parameter everywhere.
  weight = empty({out_features, in_features});
  bias = bias_ ? empty({out_features}) : Tensor();
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
  reset_parameters();
}

// torch.nn.Linear.reset_parameters: the weight's draws come first, then the bias's.
void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, /*a=*/std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
    const double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) + ", bias=" + python_bool(bias.defined());
}

// ---- Dropout ----

Dropout::Dropout(double p_) : p(p_) {
  check(p >= 0 && p <= 1, "Dropout: dropout probability has to be between 0 and 1, but got ",
        float_repr(p));
}

Tensor Dropout::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return dropout(x, p, is_training());
}

std::string Dropout::extra_repr() const { return "p=" + float_repr(p) + ", inplace=False"; }

// ---- Embedding ----

Embedding::Embedding(int64_t num_embeddings_, int64_t embedding_dim_)
    : num_embeddings(num_embeddings_), embedding_dim(embedding_dim_) {
  check(num_embeddings >= 0 && embedding_dim >= 0, "Embedding: expected non-negative sizes, got ",
        "num_embeddings=", num_embeddings, ", embedding_dim=", embedding_dim);
  weight = empty({num_embeddings, embedding_dim});
  register_parameter("weight", &weight);
  reset_parameters();
}

void Embedding::reset_parameters() { init::normal_(weight); }

Tensor Embedding::forward(const Tensor& indices) {
  ForwardScope scope(*this);
  return embedding(weight, indices);
}

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(Shape normalized_shape_, double eps_, bool elementwise_affine_)
    : normalized_shape(std::move(normalized_shape_)),
      eps(eps_),
      elementwise_affine(elementwise_affine_) {
  if (elementwise_affine) {
    weight = empty(normalized_shape);
    bias = empty(normalized_shape);
  }
  // Undefined without elementwise_affine: the names are reserved, as PyTorch's None parameters.
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
  reset_parameters();
}

LayerNorm::LayerNorm(int64_t normalized_size, double eps_, bool elementwise_affine_)
    : LayerNorm(Shape{normalized_size}, eps_, elementwise_affine_) {}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  ForwardScope scope(*this);

  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  return format_shape_tuple(normalized_shape) + ", eps=" + float_repr(eps) +
         ", elementwise_affine=" + python_bool(elementwise_affine);
}

// ---- activations ----

GELU::GELU(std::string approximate_) : approximate(std::move(approximate_)) {
  check(approximate == "none" || approximate == "tanh",
        "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
}

Tensor GELU::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return gelu(x, approximate);
}

std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor ReLU::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return relu(x);
}

}  // namespace ember::nn
