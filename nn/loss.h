// Loss functions, as torch.nn.functional and as torch.nn modules, with PyTorch's options and
// results (corner cases included: a mean over targets that are all ignored is nan).
//
//   namespace F = ember::nn::functional;
//   Tensor loss = F::cross_entropy(logits, targets);                       // mean over N
//   Tensor loss = F::cross_entropy(logits, targets,
//                                  F::CrossEntropyFuncOptions().label_smoothing(0.1));
//   nn::CrossEntropyLoss criterion;  loss = criterion(logits, targets);
//
// cross_entropy is one fused op (log-sum-exp per row, its own backward); the composite
// nll_loss(log_softmax(x, 1), target) gives the same numbers and is kept for study.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/args.h"
#include "core/tensor/tensor.h"
#include "nn/module.h"

namespace ember::nn {

// How a loss reduces its per-element values: PyTorch's reduction='none' | 'mean' | 'sum'.
enum class Reduction { None, Mean, Sum };
inline constexpr Reduction kNone = Reduction::None;
inline constexpr Reduction kMean = Reduction::Mean;
inline constexpr Reduction kSum = Reduction::Sum;

struct CrossEntropyFuncOptions {
  EMBER_ARG(Tensor, weight);  // [C], a rescaling weight per class (undefined: all 1)
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
  EMBER_ARG(double, label_smoothing) = 0.0;
};

struct NLLLossFuncOptions {
  EMBER_ARG(Tensor, weight);
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
};

struct MSELossFuncOptions {
  MSELossFuncOptions(Reduction r = Reduction::Mean) : reduction_(r) {}
  EMBER_ARG(Reduction, reduction);
};
using L1LossFuncOptions = MSELossFuncOptions;

struct BinaryCrossEntropyFuncOptions {
  EMBER_ARG(Tensor, weight);  // broadcast to the input's shape
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
};

struct BinaryCrossEntropyWithLogitsFuncOptions {
  EMBER_ARG(Tensor, weight);      // broadcast to the input's shape
  EMBER_ARG(Tensor, pos_weight);  // weight of positive examples, broadcast along the last dim
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
};

namespace functional {

// Weights are constants, as in PyTorch: a weight or pos_weight that requires grad (with grad mode
// on) is an Error, except cross_entropy's weight with class probabilities (PyTorch's composite),
// which gets its gradient. cross_entropy and nll_loss of an input with no elements give PyTorch's
// answer (none: zeros of the loss's shape, sum: 0, mean: nan) whatever its other dims.

// The options under their functional names too, as libtorch has them (F::CrossEntropyFuncOptions).
using nn::BinaryCrossEntropyFuncOptions;
using nn::BinaryCrossEntropyWithLogitsFuncOptions;
using nn::CrossEntropyFuncOptions;
using nn::L1LossFuncOptions;
using nn::MSELossFuncOptions;
using nn::NLLLossFuncOptions;

// logits [N, C] or [N, C, d1, ...] (or [C] for one sample); target either int64 class indices
// [N] / [N, d1, ...] (or 0-d), or class probabilities of the logits' shape. Fused and
// numerically stable (log-sum-exp); grad_fn CrossEntropyLossBackward0.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyFuncOptions& options = {});
// The negative log likelihood of log-probabilities input [N, C] / [N, C, d1, ...] / [C] at
// int64 class indices target.                                               (NllLossBackward0)
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options = {});
// (input - target)^2 and |input - target| over the shape input and target broadcast to (with a
// warning when their shapes differ, as PyTorch's).
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options = {});
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options = {});
// -w (y log x + (1 - y) log(1 - x)), the logs clamped at -100 as PyTorch does; input in [0, 1].
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options = {});
// The same on logits, computed stably:
//   -w (pos_weight y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))).
Tensor binary_cross_entropy_with_logits(
    const Tensor& input, const Tensor& target,
    const BinaryCrossEntropyWithLogitsFuncOptions& options = {});

}  // namespace functional

// ---- module forms (hold their options; the weights are buffers, as in PyTorch) ----

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(CrossEntropyFuncOptions options = {});
  using Module::forward;  // the one-input form (throws: a loss takes input and target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call(*this, input, target);
  }
  CrossEntropyFuncOptions options;
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(NLLLossFuncOptions options = {});
  using Module::forward;  // the one-input form (throws: a loss takes input and target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call(*this, input, target);
  }
  NLLLossFuncOptions options;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(MSELossFuncOptions options = {});
  using Module::forward;  // the one-input form (throws: a loss takes input and target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call(*this, input, target);
  }
  MSELossFuncOptions options;
};

class L1Loss : public Module {
 public:
  explicit L1Loss(L1LossFuncOptions options = {});
  using Module::forward;  // the one-input form (throws: a loss takes input and target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call(*this, input, target);
  }
  L1LossFuncOptions options;
};

class BCELoss : public Module {
 public:
  explicit BCELoss(BinaryCrossEntropyFuncOptions options = {});
  using Module::forward;  // the one-input form (throws: a loss takes input and target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call(*this, input, target);
  }
  BinaryCrossEntropyFuncOptions options;
};

class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(BinaryCrossEntropyWithLogitsFuncOptions options = {});
  using Module::forward;  // the one-input form (throws: a loss takes input and target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call(*this, input, target);
  }
  BinaryCrossEntropyWithLogitsFuncOptions options;
};

}  // namespace ember::nn
