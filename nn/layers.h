// The basic layers, each the C++ twin of its torch.nn class: same attributes, same defaults,
// same initialisation (and random draws, in the same order), same printed repr.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor/tensor.h"
#include "nn/module.h"

namespace ember::nn {

// y = x @ weight^T + bias, for x of shape [..., in_features].
// weight [out_features, in_features] ~ kaiming_uniform_(a = sqrt(5)), drawn first, then
// bias [out_features] ~ U(-1/sqrt(in_features), 1/sqrt(in_features)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;  // "in_features=3, out_features=2, bias=True"

  const int64_t in_features;
  const int64_t out_features;
  Tensor weight;
  Tensor bias;  // undefined when built with bias = false
};

// In training mode, zeroes each element with probability p and scales the others by
// 1 / (1 - p) (ember::dropout); in eval mode, or with p = 0, it is the identity (also of an int64
// or bool tensor, as PyTorch's; in training those take p = 1 only, which zeroes them).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;  // "p=0.5, inplace=False"

  const double p;
};

// A lookup table: row i of weight [num_embeddings, embedding_dim] for each index i of an int64
// tensor. weight ~ N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  std::string extra_repr() const override;  // "10, 4"

  const int64_t num_embeddings;
  const int64_t embedding_dim;
  Tensor weight;
};

// Normalises over the trailing normalized_shape dims (ember::layer_norm), then scales by weight
// (ones) and shifts by bias (zeros) when elementwise_affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;  // "(768,), eps=1e-05, elementwise_affine=True"

  const Shape normalized_shape;
  const double eps;
  const bool elementwise_affine;
  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;
};

// gelu(x), exact (approximate = "none", with erf) or with the tanh approximation ("tanh").
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;  // "approximate='none'"

  const std::string approximate;
};

// max(x, 0)
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

}  // namespace ember::nn
