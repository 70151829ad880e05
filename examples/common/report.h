// The training report of train_toy and train_chars (--html): one self-contained page, report.html,
// with the loss curves (train and held-out), the gradient flow through the blocks, the attention
// maps of every layer and head for a fixed example at each recorded step (a slider moves through
// the steps), the samples generated along the way and the run's settings. Made from the same data
// as the SVG pictures. The page's files are examples/common/report/ (report.html, report.js) with
// core/autograd/explorer/'s page.css and common.js, embedded at build time (report.cpp writes
// it). Not part of the library.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/grad_mode.h"
#include "core/ops/elementwise.h"  // operator*
#include "core/tensor/tensor.h"
#include "examples/common/svg.h"
#include "examples/common/training.h"
#include "nn/gpt.h"

namespace ember::examples {

// Every layer's and head's attention weights for one example, as heatmap panels.
struct AttentionSnapshot {
  int64_t step = 0;
  std::vector<svg::Heatmap> panels;  // layer-major, then head
};

// The attention maps of `x` (one sequence, [1, T]) in every block of `model`, at `step`.
inline AttentionSnapshot snapshot_attention(nn::GPTModel& model, const Tensor& x, int64_t step,
                                            const std::vector<std::string>& labels) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  std::vector<std::shared_ptr<nn::TransformerBlock>> blocks;
  for (const auto& m : *model.trf_blocks) {
    blocks.push_back(std::dynamic_pointer_cast<nn::TransformerBlock>(m));
    blocks.back()->att->keep_trace = true;
  }
  model.forward(x);
  AttentionSnapshot snap{step, {}};
  for (std::size_t layer = 0; layer < blocks.size(); ++layer) {
    nn::MultiHeadAttention& att = *blocks[layer]->att;
    Tensor w = att.trace.attn_weights;  // [1, heads, T, T]
    for (int64_t h = 0; h < w.size(1); ++h) {
      Tensor map = w.index({0, h}).contiguous();
      snap.panels.push_back({"layer " + std::to_string(layer) + ", head " + std::to_string(h),
                             map.to_vector<double>(), static_cast<int>(map.size(0)),
                             static_cast<int>(map.size(1)), labels, labels});
    }
    att.keep_trace = false;
    att.trace = {};
  }
  if (was_training) model.train();
  return snap;
}

// The example whose attention a program draws: its tokens x [1, T] and their labels.
struct WatchedExample {
  Tensor x;
  std::vector<std::string> labels;

  // Its attention maps in every block of `model`, at `step`.
  AttentionSnapshot attention(nn::GPTModel& model, int64_t step) const {
    return snapshot_attention(model, x, step, labels);
  }
};

// The gradient flow through a GPT's blocks at each training step, per block of trf_blocks: the norm
// of the gradient reaching the block's output, ||dL/d out||, and the norm of the gradient of the
// block's parameters as a share of their norm, ||grad theta|| / ||theta|| (how far one plain
// gradient step would move them, relatively).
struct GradientFlowHistory {
  std::vector<std::string> blocks;               // "trf_blocks.0", ...
  std::vector<double> steps;                     // the training steps recorded
  std::vector<std::vector<double>> output_grad;  // [block][step]: ||dL/d block output||
  std::vector<std::vector<double>> grad_share;   // [block][step]: ||grad theta|| / ||theta||
};

// Collects a GradientFlowHistory with module hooks: a full backward hook on each block reads
// grad_output (the gradient reaching the block's output) as backward passes through it;
// record(step), called after backward (before clipping), reads the blocks' parameter gradients.
// The hooks are removed when this is destroyed; they leave the gradients unchanged.
class GradientFlow {
 public:
  explicit GradientFlow(nn::GPTModel& model) {
    for (int64_t b = 0; b < model.trf_blocks->size(); ++b) {
      std::shared_ptr<nn::Module> block = (*model.trf_blocks)[b];
      history_.blocks.push_back("trf_blocks." + std::to_string(b));
      blocks_.push_back(block);
      pending_.push_back(0.0);
      handles_.push_back(block->register_full_backward_hook(
          [this, b](nn::Module&, const nn::TensorList&, const nn::TensorList& grad_output) {
            pending_[b] = norm(grad_output[0]);
          }));
    }
    history_.output_grad.resize(blocks_.size());
    history_.grad_share.resize(blocks_.size());
  }
  ~GradientFlow() {
    for (nn::RemovableHandle& handle : handles_) handle.remove();
  }
  GradientFlow(const GradientFlow&) = delete;
  GradientFlow& operator=(const GradientFlow&) = delete;

  // After the backward of training step `step`.
  void record(int64_t step) {
    history_.steps.push_back(static_cast<double>(step));
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      double grad_sq = 0, param_sq = 0;
      for (const Tensor& p : blocks_[b]->parameters()) {
        param_sq += squared_norm(p);
        if (p.grad().defined()) grad_sq += squared_norm(p.grad());
      }
      history_.output_grad[b].push_back(pending_[b]);
      history_.grad_share[b].push_back(param_sq > 0 ? std::sqrt(grad_sq / param_sq) : 0.0);
    }
  }
  const GradientFlowHistory& history() const { return history_; }

 private:
  static double squared_norm(const Tensor& t) {
    NoGradGuard no_grad;
    const Tensor d = t.to(DType::Float64);
    return (d * d).sum().item();
  }
  static double norm(const Tensor& t) { return std::sqrt(squared_norm(t)); }

  GradientFlowHistory history_;
  std::vector<std::shared_ptr<nn::Module>> blocks_;
  std::vector<double> pending_;  // per block: ||dL/d out|| of the backward running now
  std::vector<nn::RemovableHandle> handles_;
};

struct TrainingReport {
  std::string title, subtitle;
  std::string example;              // what the attention maps are of
  std::vector<std::string> labels;  // the example's tokens (rows and columns of each map)
  std::vector<std::pair<std::string, std::string>> settings;
  LossHistory history;
  std::vector<AttentionSnapshot> attention;
  std::vector<std::pair<int64_t, std::string>> samples;  // (step, text)
  GradientFlowHistory gradient_flow;

  std::string data_json() const;  // the page's data, one JSON object

  // Writes the page; throws ember::Error when `path` cannot be written.
  void write(const std::string& path) const;

  // Writes report.html in `dir`, and says so.
  void write_in(const std::string& dir) const;
};

}  // namespace ember::examples
