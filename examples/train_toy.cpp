// train_toy: a small GPTModel (the book's chapter-4 model, nn/gpt.h) learns to reverse a
// sequence of digits, and you watch its attention heads learn to do it.
//
// Why reversing (and not sorting): the algorithm is pure attention. To write the k-th output
// digit, the model must look at input position n-1-k, and nowhere else; no counting, no
// comparing. So a trained head's attention map shows the algorithm itself: an anti-diagonal in
// the output rows, forming step by step in attention.svg. (Sorting needs counting, which a
// small model learns as a blur that is far harder to read.)
//
// One example, n = 8 digits, vocabulary 0-9 and the separator ">" (id 10):
//   tokens   3 1 4 1 5 9 2 6 > 6 2 9 5 1 4 1 3
//   input    tokens[0 .. 2n-1]   (the last digit is never an input)
//   target   tokens[1 .. 2n]     the loss counts only the n positions that predict the output
// Held-out sequences (the validation set) never appear in training.
//
// The functions have the names of their roles in the book's chapter 5 (examples/train_gpt.cpp):
// calc_loss_batch, evaluate_model, train_model_simple.
//
//   build/release/bin/train_toy                      # defaults: about 4 s of CPU (one thread)
//   build/release/bin/train_toy --steps 300 --out /tmp/toy
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/ember.h"
#include "examples/common/flags.h"
#include "examples/common/program.h"
#include "examples/common/report.h"
#include "examples/common/svg.h"
#include "examples/common/training.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "optim/optim.h"

using namespace ember;
namespace F = ember::nn::functional;
namespace svg = ember::examples::svg;

namespace {

// The flags of every training program (examples/common/flags.h), and this one's own.
struct Settings : examples::TrainingFlags {
  Settings() {
    steps = 200;
    batch = 32;
    threads = 1;  // the matrices are small: one thread wastes least on a shared machine
    out = "train_toy_out";
    print_every = 25;
  }
  int64_t digits = 8;
  int64_t eval_every = 25;
  bool html = false;

  void add_to(CLI::App& app) {
    TrainingFlags::add_to(app, "random seed (weights, data)", "training steps",
                          "directory for loss.svg, attention.svg, the checkpoint");
    examples::range_option(app, "--digits", digits, 2, 16, "digits per sequence");
    examples::positive_option(app, "--eval-every", eval_every,
                              "steps between held-out evaluations");
    add_print_every(app);
    add_profile(app);
    app.add_flag("--html", html,
                 "also write report.html: loss curves, attention maps at every evaluation (a step "
                 "slider), samples, settings");
  }
};

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

std::string token_text(int64_t id) { return id == kSep ? ">" : std::to_string(id); }

std::string digits_text(const int64_t* d, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += (i ? " " : "") + token_text(d[i]);
  return s;
}

// ---- the book's functions, for this task ----

// The logits of the n output positions of input_batch [count, 2n], as [count * n, vocab].
Tensor output_logits(nn::GPTModel& model, const Tensor& input_batch) {
  const int64_t n = input_batch.size(1) / 2;
  Tensor logits = model.forward(input_batch);  // [count, 2n, vocab]
  return logits.slice(1, n, 2 * n).reshape({-1, kVocab});
}

// The cross entropy of the output positions' predictions (the digits before ">" are not scored).
Tensor calc_loss_batch(const Tensor& input_batch, const Tensor& target_batch, nn::GPTModel& model) {
  return F::cross_entropy(output_logits(model, input_batch), target_batch);
}

struct Evaluation {
  double loss = 0, token_accuracy = 0;
};

// The book's evaluate_model on the held-out set (the training loss is each step's): the
// teacher-forced loss, and the share of output tokens predicted right.
Evaluation evaluate_model(nn::GPTModel& model, const ReverseTask& task) {
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

GenerationResult generate_reversed(nn::GPTModel& model, const std::vector<int64_t>& digits,
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

// What the loop leaves: the loss curves, the attention maps of the watched example at a few
// steps (attention.svg), the last step's loss, the last evaluation and (--html) the report's maps
// and samples.
struct Training {
  examples::LossHistory history;
  std::vector<examples::AttentionSnapshot> snapshots;
  double train_loss = 0;
  Evaluation last_eval;
  examples::TrainingReport report;
};

// The book's train_model_simple, by steps: each step a batch of fresh training sequences and an
// AdamW step with warmup and cosine decay; an evaluation on the held-out set at step 0, every
// --eval-every steps and at the last. `watched` is the held-out example whose attention is drawn.
Training train_model_simple(nn::GPTModel& model, ReverseTask& task, optim::Optimizer& optimizer,
                            optim::LRScheduler& schedule, const Settings& s,
                            const std::vector<int64_t>& watched_digits,
                            const examples::WatchedExample& watched) {
  const int64_t n = task.n();
  std::vector<int64_t> snapshot_steps = {0, s.steps / 10, s.steps / 4, s.steps / 2, s.steps};
  snapshot_steps.erase(std::unique(snapshot_steps.begin(), snapshot_steps.end()),
                       snapshot_steps.end());
  Training t;
  auto record = [&](int64_t step) {  // the report's view at an evaluation
    if (!s.html) return;
    t.report.attention.push_back(watched.attention(model, step));
    const GenerationResult g = generate_reversed(model, watched_digits, n);
    t.report.samples.emplace_back(
        step, digits_text(watched_digits.data(), n) + " -> " + digits_text(g.outputs.data(), n));
  };

  examples::Progress progress(s.steps, s.print_every);
  t.last_eval = evaluate_model(model, task);
  t.history.val_steps.push_back(0);
  t.history.val_loss.push_back(t.last_eval.loss);
  progress.note("step     0 | held-out loss " + svg::num(t.last_eval.loss) + ", token accuracy " +
                svg::num(100 * t.last_eval.token_accuracy, 3) + "%");
  t.snapshots.push_back(watched.attention(model, 0));
  record(0);
  examples::StepProfiler profiler(s.profile, 1, s.steps);  // --profile
  // --html: the gradient flow through the blocks, read by module hooks at every step.
  std::optional<examples::GradientFlow> flow;
  if (s.html) flow.emplace(model);
  for (int64_t step = 1; step <= s.steps; ++step) {
    profiler.before_step(step);
    auto [x, y] = task.batch(task.train_digits(s.batch));
    t.train_loss = examples::optimizer_step(calc_loss_batch(x, y, model), model.parameters(),
                                            optimizer, schedule, [&] {
                                              if (flow) flow->record(step);
                                            });
    t.history.train_steps.push_back(static_cast<double>(step));
    t.history.train_loss.push_back(t.train_loss);

    if (step % s.eval_every == 0 || step == s.steps) {
      t.last_eval = evaluate_model(model, task);
      t.history.val_steps.push_back(static_cast<double>(step));
      t.history.val_loss.push_back(t.last_eval.loss);
      record(step);
    }
    if (std::find(snapshot_steps.begin(), snapshot_steps.end(), step) != snapshot_steps.end()) {
      t.snapshots.push_back(watched.attention(model, step));
    }
    progress.update(step, t.train_loss,
                    "held-out loss " + svg::num(t.last_eval.loss, 3) + ", acc " +
                        svg::num(100 * t.last_eval.token_accuracy, 4) + "%",
                    s.batch * 2 * n);
    if (auto table = profiler.after_step(step)) progress.note(*table);
  }
  if (flow) t.report.gradient_flow = flow->history();
  return t;
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  Settings s;
  CLI::App app{"train_toy: a small GPT learns to reverse digits; watch its attention learn"};
  s.add_to(app);
  if (auto code = examples::parse(app, argc, argv)) return *code;
  s.apply();
  const int64_t n = s.digits;
  ReverseTask task(n, s.seed);

  const nn::GPTConfig cfg{.vocab_size = kVocab,
                          .context_length = 2 * n,
                          .emb_dim = 48,
                          .n_heads = 2,
                          .n_layers = 2,
                          .drop_rate = 0.0,
                          .qkv_bias = false};
  manual_seed(s.seed);
  nn::GPTModel model(cfg);
  const int64_t numel = examples::parameter_count(model);
  std::printf(
      "train_toy: reverse %lld digits | GPTModel(vocab %lld, %s): %lld parameters | batch %lld, "
      "lr %g, %d threads\n",
      static_cast<long long>(n), static_cast<long long>(cfg.vocab_size),
      examples::config_text(cfg).c_str(), static_cast<long long>(numel),
      static_cast<long long>(s.batch), s.lr, s.threads);

  optim::AdamW optimizer(model.parameters(), optim::AdamWOptions(s.lr).weight_decay(0.01));
  optim::LambdaLR schedule(optimizer, examples::warmup_cosine(s.steps));

  // The example whose attention we watch: the first held-out sequence.
  const std::vector<int64_t> watched_digits(task.heldout_digits().begin(),
                                            task.heldout_digits().begin() + n);
  const Tensor watched_x = task.batch(watched_digits).first;
  std::vector<std::string> labels;
  for (int64_t id : watched_x.to_vector<int64_t>()) labels.push_back(token_text(id));
  const examples::WatchedExample watched{watched_x, labels};

  examples::Stopwatch clock;
  Training t = train_model_simple(model, task, optimizer, schedule, s, watched_digits, watched);
  const double train_seconds = clock.seconds();

  // ---- the pictures ----
  const std::string loss_path = s.out + "/loss.svg";
  svg::write_file(loss_path, t.history.svg("train_toy: reversing " + std::to_string(n) +
                                           " digits, loss per step"));
  svg::HeatmapGrid grid;
  grid.title = "train_toy: attention of every layer and head while learning to reverse " +
               digits_text(watched_digits.data(), n);
  grid.subtitle =
      "rows: query tokens, columns: key tokens. Reversing = an anti-diagonal in the rows after "
      "'>'";
  for (const examples::AttentionSnapshot& snap : t.snapshots) {
    grid.row_titles.push_back("step " + std::to_string(snap.step));
    for (const svg::Heatmap& h : snap.panels) grid.panels.push_back(h);
  }
  grid.columns = static_cast<int>(cfg.n_layers * cfg.n_heads);
  grid.show_values = 0;
  const std::string attention_path = s.out + "/attention.svg";
  svg::write_file(attention_path, svg::heatmap_grid(grid));

  // ---- held-out accuracy, by greedy generation ----
  GenerationResult result = generate_reversed(model, task.heldout_digits(), n);
  std::cout << "\nHeld-out examples (input -> generated output):\n";
  for (int64_t b = 0; b < 4; ++b) {
    const int64_t* in = task.heldout_digits().data() + b * n;
    const int64_t* outp = result.outputs.data() + b * n;
    bool ok = true;
    for (int64_t k = 0; k < n; ++k) ok = ok && outp[k] == in[n - 1 - k];
    std::cout << "  " << digits_text(in, n) << " -> " << digits_text(outp, n)
              << (ok ? "   (right)" : "   (wrong)") << "\n";
  }
  // ---- the checkpoint, reloaded into a fresh model: the same predictions ----
  const std::string checkpoint_path = s.out + "/model.safetensors";
  model.save(checkpoint_path, {{"task", "reverse"}, {"digits", std::to_string(n)}});
  manual_seed(s.seed + 1);  // other initial weights, all overwritten by the checkpoint
  nn::GPTModel reloaded(cfg);
  reloaded.load(checkpoint_path);
  const std::vector<int64_t> few(task.heldout_digits().begin(),
                                 task.heldout_digits().begin() + 4 * n);
  const GenerationResult before = generate_reversed(model, few, n);
  const GenerationResult again = generate_reversed(reloaded, few, n);
  const bool same = again.outputs == before.outputs;
  std::cout << "Reloaded " << checkpoint_path
            << " into a new model: " << (same ? "the same predictions" : "DIFFERENT predictions")
            << ":\n";
  for (int64_t b = 0; b < 4; ++b) {
    std::cout << "  " << digits_text(task.heldout_digits().data() + b * n, n) << " -> "
              << digits_text(again.outputs.data() + b * n, n) << "\n";
  }
  std::cout << "wrote " << loss_path << ", " << attention_path << ", " << checkpoint_path << "\n";
  if (s.html) {
    t.report.title = "train_toy: a GPT learns to reverse " + std::to_string(n) + " digits";
    t.report.subtitle =
        "rows: query tokens, columns: key tokens; reversing = an anti-diagonal in "
        "the rows after '>'";
    t.report.example = "the watched held-out example: " + digits_text(watched_digits.data(), n) +
                       " (hover a cell for its tokens and weight)";
    t.report.labels = labels;
    t.report.history = t.history;
    t.report.settings = {{"digits", std::to_string(n)},
                         {"steps", std::to_string(s.steps)},
                         {"batch", std::to_string(s.batch)},
                         {"lr (AdamW, warmup + cosine)", svg::num(s.lr)},
                         {"seed", std::to_string(s.seed)},
                         {"eval every", std::to_string(s.eval_every)},
                         {"model", "GPTModel(vocab " + std::to_string(cfg.vocab_size) + ", " +
                                       examples::config_text(cfg) + ")"},
                         {"parameters", std::to_string(numel)},
                         {"final held-out loss", svg::num(t.last_eval.loss)},
                         {"held-out token accuracy", svg::num(100 * result.token_accuracy) + "%"}};
    t.report.write_in(s.out);
  }

  std::printf(
      "train_toy: %lld steps in %.1f s | final train loss %.4f | held-out: loss %.4f, "
      "exact-token accuracy %.2f%%, whole sequences %.2f%% (%lld sequences, greedy) | "
      "out: %s\n",
      static_cast<long long>(s.steps), train_seconds, t.train_loss, t.last_eval.loss,
      100 * result.token_accuracy, 100 * result.sequence_accuracy,
      static_cast<long long>(task.heldout_count()), s.out.c_str());
  return same ? 0 : 1;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("train_toy", [&] { return run(argc, argv); });
}
