// What the training programs (examples/train_toy.cpp, examples/train_chars.cpp,
// examples/train_gpt.cpp) share: the model's description, the learning-rate
// schedule, one optimizer step, the progress line, a timer and the loss curve. Their flags are in
// flags.h, their checkpoint in checkpoint.h, main's wrapper and the checks of files in program.h.
// Not part of the library.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/tensor/tensor.h"
#include "examples/common/step_profiler.h"
#include "examples/common/svg.h"
#include "nn/gpt.h"
#include "optim/optim.h"

namespace ember::examples {

// "context 256, emb 768, 12 heads, 12 layers": the shape of a GPTModel, for the programs' first
// line.
inline std::string config_text(const nn::GPTConfig& cfg) {
  return "context " + std::to_string(cfg.context_length) + ", emb " + std::to_string(cfg.emb_dim) +
         ", " + std::to_string(cfg.n_heads) + " heads, " + std::to_string(cfg.n_layers) + " layers";
}

// Refuses, before any model is built, a training of a GPTModel of `cfg` on batches of `batch`
// sequences of its context_length that needs more memory than the machine has; `flags` names the
// flags that size it. The estimate is a lower bound, in float32: the weights, their gradients and
// AdamW's two moments (16 bytes a parameter), the causal masks, and what a step's forward keeps
// for its backward, per token: in each block the two norms' outputs, the query, key and value,
// the context, the projection, the feed-forward's hidden layer before and after GELU and its
// output, the residuals (16 emb_dim floats), and the attention's scores and weights (2 n_heads
// context floats); then the logits and their gradient (2 vocab_size). A run over it would be
// ended by the kernel's OOM killer, with no message, once the tensors are written.
inline void check_training_memory(const nn::GPTConfig& cfg, int64_t batch,
                                  const std::string& flags) {
  const double E = static_cast<double>(cfg.emb_dim), V = static_cast<double>(cfg.vocab_size),
               C = static_cast<double>(cfg.context_length), L = static_cast<double>(cfg.n_layers),
               H = static_cast<double>(cfg.n_heads), B = static_cast<double>(batch);
  const double parameters = 2 * V * E + C * E + L * (12 * E * E + 13 * E) + 2 * E;
  const double per_token = L * (16 * E + 2 * H * C) + 2 * V;
  const double bytes = 16 * parameters + 4 * L * C * C + 4 * B * C * per_token;
  const double physical = ember::detail::physical_memory_bytes();
  check(bytes <= physical, flags, ": training this model (", config_text(cfg), ", vocabulary ",
        cfg.vocab_size, ") on batches of ", batch, " needs at least ", std::ceil(bytes / (1 << 20)),
        " MiB (weights, gradients, AdamW's two moments, a step's activations), more than the ",
        static_cast<int64_t>(physical / (1 << 20)), " MiB of memory this machine has");
}

// The number of elements of a model's parameters.
inline int64_t parameter_count(const nn::Module& model) {
  int64_t numel = 0;
  for (const Tensor& p : model.parameters()) numel += p.numel();
  return numel;
}

// The learning-rate factor of train_toy and train_chars: a linear warmup over the first 5% of `total`
// steps (at least one), then a cosine decay to 0.1 of the peak at the last step.
inline std::function<double(int64_t)> warmup_cosine(int64_t total) {
  const int64_t warmup = std::max<int64_t>(1, total / 20);
  return [total, warmup](int64_t step) {
    if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
    const double t = static_cast<double>(step - warmup) /
                     static_cast<double>(std::max<int64_t>(1, total - warmup));
    return 0.1 + 0.9 * 0.5 * (1 + std::cos(3.14159265358979323846 * std::min(1.0, t)));
  };
}

// One training step on `loss`: gradients, clipped to norm 1, an optimizer step and a schedule
// step. `after_backward` (when given) runs between backward and clipping (the report's gradient
// flow reads the gradients there). Returns the loss value.
inline double optimizer_step(const Tensor& loss, const std::vector<Tensor>& parameters,
                             optim::Optimizer& opt, optim::LRScheduler& schedule,
                             const std::function<void()>& after_backward = nullptr) {
  opt.zero_grad();
  loss.backward();
  if (after_backward) after_backward();
  optim::clip_grad_norm_(parameters, 1.0);
  opt.step();
  schedule.step();
  return loss.item();
}

// Seconds since construction.
class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// "1m05s" or "4.2s".
inline std::string duration_text(double seconds) {
  char buf[32];
  if (seconds >= 60) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds) / 60,
                  static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  }
  return buf;
}

// One progress line: redrawn in place (carriage return) when stdout is a terminal; printed as
// a plain line every `every` steps (and at the last step) otherwise, for CI logs.
class Progress {
 public:
  Progress(int64_t total_steps, int64_t every)
      : total_(total_steps), every_(every > 0 ? every : 1), tty_(isatty(fileno(stdout)) != 0) {}

  // `extra` is what the example adds ("acc 97.5%"); tokens counts the tokens seen this step.
  void update(int64_t step, double loss, const std::string& extra, int64_t tokens) {
    tokens_ += tokens;
    const bool last = step == total_;
    if (!tty_ && step % every_ != 0 && !last) return;
    const double elapsed = clock_.seconds();
    const double eta = step > 0 ? elapsed / static_cast<double>(step) * (total_ - step) : 0;
    char line[256];
    std::snprintf(line, sizeof line,
                  "step %5lld/%lld | loss %.4f | %s | %.0f tok/s | %s elapsed | ETA %s",
                  static_cast<long long>(step), static_cast<long long>(total_), loss, extra.c_str(),
                  elapsed > 0 ? static_cast<double>(tokens_) / elapsed : 0.0,
                  duration_text(elapsed).c_str(), duration_text(eta).c_str());
    if (tty_) {
      std::printf("\r%s\033[K", line);
      if (last) std::printf("\n");
    } else {
      std::printf("%s\n", line);
    }
    std::fflush(stdout);
  }

  // Prints a line of its own (a sample, an evaluation) without breaking the progress line.
  void note(const std::string& text) {
    if (tty_) std::printf("\r\033[K");
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }

  bool is_tty() const { return tty_; }

 private:
  int64_t total_, every_;
  bool tty_;
  int64_t tokens_ = 0;
  Stopwatch clock_;
};

// Train and validation loss against step, as an SVG line chart.
struct LossHistory {
  std::vector<double> train_steps, train_loss, val_steps, val_loss;

  std::string svg(const std::string& title) const {
    svg::LineChart chart;
    chart.title = title;
    chart.x_label = "step";
    chart.y_label = "cross-entropy loss";
    chart.log_y = true;
    chart.series.push_back({"train", train_steps, train_loss});
    if (!val_steps.empty()) chart.series.push_back({"validation", val_steps, val_loss});
    return svg::line_chart(chart);
  }
};

}  // namespace ember::examples
