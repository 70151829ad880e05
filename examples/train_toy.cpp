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
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/flags.h"
#include "examples/common/program.h"
#include "examples/common/report.h"
#include "examples/common/reverse_task.h"
#include "examples/common/svg.h"
#include "examples/common/training.h"
#include "nn/gpt.h"
#include "optim/optim.h"

using namespace ember;
using namespace ember::examples::
    toy;  // the task: ReverseTask, calc_loss_batch, evaluate_model, ...
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
  bool print_losses = false;

  void add_to(ember::examples::Flags& app) {
    TrainingFlags::add_to(app, "random seed (weights, data)", "training steps",
                          "directory for loss.svg, attention.svg, the checkpoint");
    examples::range_option(app, "--digits", digits, 2, 16, "digits per sequence");
    examples::positive_option(app, "--eval-every", eval_every,
                              "steps between held-out evaluations");
    add_print_every(app);
    add_profile(app);
    app.add_flag("--print-losses", print_losses,
                 "print each step's training loss in full (what examples/web/train_live.html's "
                 "test compares)");
    app.add_flag("--html", html,
                 "also write report.html: loss curves, attention maps at every evaluation (a step "
                 "slider), samples, settings");
  }
};

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
    if (s.print_losses)
      progress.note("loss " + std::to_string(step) + " " + float_repr(t.train_loss));

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
  ember::examples::Flags app{
      "train_toy: a small GPT learns to reverse digits; watch its attention learn"};
  s.add_to(app);
  if (auto code = examples::parse(app, argc, argv)) return *code;
  s.apply();
  std::vector<std::string> outputs{"loss.svg", "attention.svg", "model.safetensors"};
  if (s.html) outputs.emplace_back("report.html");
  examples::check_output_files(s.out, outputs);
  const int64_t n = s.digits;
  ReverseTask task(n, s.seed);

  const nn::GPTConfig cfg{.vocab_size = kVocab,
                          .context_length = 2 * n,
                          .emb_dim = 48,
                          .n_heads = 2,
                          .n_layers = 2,
                          .drop_rate = 0.0,
                          .qkv_bias = false};
  examples::check_training_memory(cfg, s.batch, "--batch, --digits");
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
