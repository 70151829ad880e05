// train_toy's task (examples/train_toy.cpp), shared with its page examples/web/train_live.html:
// reversing a sequence of n digits, the data, the loss of the output positions, the held-out
// evaluation and greedy generation. The functions have the names of their roles in the book's
// chapter 5 (examples/train_gpt.cpp): calc_loss_batch, evaluate_model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/ember.h"
#include "nn/gpt.h"
#include "nn/loss.h"

namespace ember::examples::toy {

namespace F = ember::nn::functional;

constexpr int64_t kSep = 10;  // the separator token, printed as ">"
constexpr int64_t kVocab = 11;

// ---- the task ----

class ReverseTask {
 public:
  ReverseTask(int64_t n, uint64_t seed) : n_(n), rng_(seed) {
    // The held-out set: 512 sequences drawn first (half of all 10^n when there are fewer than
    // 1024, so that --digits 2 leaves sequences to train on); training never draws them.
    int64_t all = 1;
    for (int64_t i = 0; i < n_ && all < 1024; ++i) all *= 10;
    const int64_t count = std::min<int64_t>(512, all / 2);
    while (static_cast<int64_t>(heldout_.size()) < count * n_) {
      std::vector<int64_t> digits = draw();
      if (heldout_codes_.insert(code(digits)).second) {
        heldout_.insert(heldout_.end(), digits.begin(), digits.end());
      }
    }
  }

  int64_t n() const { return n_; }
  int64_t heldout_count() const { return static_cast<int64_t>(heldout_.size()) / n_; }
  const std::vector<int64_t>& heldout_digits() const { return heldout_; }

  // `count` training sequences (none of them held out), as digits, row after row.
  std::vector<int64_t> train_digits(int64_t count) {
    std::vector<int64_t> out;
    while (static_cast<int64_t>(out.size()) < count * n_) {
      std::vector<int64_t> digits = draw();
      if (heldout_codes_.count(code(digits))) continue;
      out.insert(out.end(), digits.begin(), digits.end());
    }
    return out;
  }

  // The model's input [count, 2n] and the targets of the output positions [count * n].
  std::pair<Tensor, Tensor> batch(const std::vector<int64_t>& digits) const {
    const int64_t count = static_cast<int64_t>(digits.size()) / n_;
    std::vector<double> x, y;
    for (int64_t b = 0; b < count; ++b) {
      const int64_t* d = digits.data() + b * n_;
      for (int64_t i = 0; i < n_; ++i) x.push_back(static_cast<double>(d[i]));
      x.push_back(kSep);
      for (int64_t i = 0; i < n_ - 1; ++i) x.push_back(static_cast<double>(d[n_ - 1 - i]));
      for (int64_t i = 0; i < n_; ++i) y.push_back(static_cast<double>(d[n_ - 1 - i]));
    }
    return {from_vector(x, {count, 2 * n_}, DType::Int64),
            from_vector(y, {count * n_}, DType::Int64)};
  }

 private:
  std::vector<int64_t> draw() {
    std::vector<int64_t> d(static_cast<std::size_t>(n_));
    for (auto& v : d) v = static_cast<int64_t>(rng_() % 10);
    return d;
  }
  static uint64_t code(const std::vector<int64_t>& d) {
    uint64_t c = 0;
    for (int64_t v : d) c = c * 10 + static_cast<uint64_t>(v);
    return c;
  }

  int64_t n_;
  std::mt19937_64 rng_;
  std::vector<int64_t> heldout_;
  std::unordered_set<uint64_t> heldout_codes_;
};

inline std::string token_text(int64_t id) { return id == kSep ? ">" : std::to_string(id); }

inline std::string digits_text(const int64_t* d, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += token_text(d[i]);
  }
  return s;
}

// ---- the book's functions, for this task ----

// The logits of the n output positions of input_batch [count, 2n], as [count * n, vocab].
inline Tensor output_logits(nn::GPTModel& model, const Tensor& input_batch) {
  const int64_t n = input_batch.size(1) / 2;
  Tensor logits = model.forward(input_batch);  // [count, 2n, vocab]
  return logits.slice(1, n, 2 * n).reshape({-1, kVocab});
}

// The cross entropy of the output positions' predictions (the digits before ">" are not scored).
inline Tensor calc_loss_batch(const Tensor& input_batch, const Tensor& target_batch,
                              nn::GPTModel& model) {
  return F::cross_entropy(output_logits(model, input_batch), target_batch);
}

struct Evaluation {
  double loss = 0, token_accuracy = 0;
};

// The book's evaluate_model on the held-out set (the training loss is each step's): the
// teacher-forced loss, and the share of output tokens predicted right.
inline Evaluation evaluate_model(nn::GPTModel& model, const ReverseTask& task) {
  NoGradGuard no_grad;
  model.eval();
  auto [x, y] = task.batch(task.heldout_digits());
  Tensor logits = output_logits(model, x);
  Evaluation e;
  e.loss = F::cross_entropy(logits, y).item();
  e.token_accuracy = eq(argmax(logits, -1), y).to(DType::Float64).mean().item();
  model.train();
  return e;
}

// Greedy generation (generate_text_simple) from "d1 .. dn >": the fraction of output tokens (and
// of whole sequences) right, and the outputs.
struct GenerationResult {
  double token_accuracy = 0, sequence_accuracy = 0;
  std::vector<int64_t> outputs;  // count * n
};

inline GenerationResult generate_reversed(nn::GPTModel& model, const std::vector<int64_t>& digits,
                                          int64_t n) {
  model.eval();
  const int64_t count = static_cast<int64_t>(digits.size()) / n;
  std::vector<double> prompt;
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < n; ++i) prompt.push_back(static_cast<double>(digits[b * n + i]));
    prompt.push_back(kSep);
  }
  Tensor out = nn::generate_text_simple(model, from_vector(prompt, {count, n + 1}, DType::Int64), n,
                                        model.cfg.context_length);
  std::vector<int64_t> ids = out.to_vector<int64_t>();
  GenerationResult r;
  int64_t right_tokens = 0, right_sequences = 0;
  for (int64_t b = 0; b < count; ++b) {
    bool all = true;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t got = ids[b * (2 * n + 1) + n + 1 + k];
      r.outputs.push_back(got);
      const bool ok = got == digits[b * n + n - 1 - k];
      right_tokens += ok;
      all = all && ok;
    }
    right_sequences += all;
  }
  r.token_accuracy = static_cast<double>(right_tokens) / static_cast<double>(count * n);
  r.sequence_accuracy = static_cast<double>(right_sequences) / static_cast<double>(count);
  model.train();
  return r;
}

}  // namespace ember::examples::toy
