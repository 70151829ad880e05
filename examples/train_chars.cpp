// train_chars: a character-level language model (the book's GPTModel, nn/gpt.h) on any text
// file; it prints samples while it learns (temperature and top-k sampling, nn::generate).
//
//   build/release/bin/train_chars                    # the default corpus, written below
//   build/release/bin/train_chars my_text.txt --steps 2000 --out /tmp/chars
//   build/release/bin/train_chars --steps 800 --stop-at 400 --out /tmp/c   # interrupted at 400
//   build/release/bin/train_chars --steps 800 --out /tmp/c --resume /tmp/c/checkpoint.safetensors
//
// --resume continues from a checkpoint (model, AdamW state, schedule, step) and prints the same
// losses as an uninterrupted run: each step's batch and dropout masks are drawn from generators
// seeded by (seed, step), so they do not depend on where the run started. (--steps sets the
// length of the learning-rate schedule: keep it the same when resuming.)
//
// The default corpus is made here, from a small grammar (no text copied from anywhere): short
// sentences about a fox, a cat and a robot, so that a model of a few seconds' training already
// spells words and begins to make sentences.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/parallel.h"
#include "core/ember.h"
#include "examples/common/report.h"
#include "examples/common/svg.h"
#include "examples/common/training.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "optim/checkpoint.h"
#include "optim/optim.h"

using namespace ember;
namespace F = ember::nn::functional;
namespace svg = ember::examples::svg;

namespace {

// ---- the default corpus ----

std::string default_corpus() {
  const std::vector<std::string> who = {"the fox", "the old cat", "a small robot", "the red fox",
                                        "my cat",  "the robot",   "a quiet bird",  "the dog"};
  const std::vector<std::string> does = {"sees",  "finds",   "follows", "likes",
                                         "draws", "watches", "counts",  "carries"};
  const std::vector<std::string> what = {"a green ball", "the moon",    "two stones",
                                         "the river",    "a long road", "three apples",
                                         "the garden",   "a paper boat"};
  const std::vector<std::string> when = {"in the morning", "at night",      "after the rain",
                                         "every day",      "before dinner", "on the hill"};
  std::mt19937_64 rng(2024);
  auto pick = [&](const std::vector<std::string>& words) { return words[rng() % words.size()]; };
  std::string text;
  while (text.size() < 60000) {
    std::string sentence = pick(who) + " " + pick(does) + " " + pick(what);
    if (rng() % 2) sentence += " " + pick(when);
    if (rng() % 4 == 0) sentence += ", and " + pick(who) + " " + pick(does) + " " + pick(what);
    sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
    text += sentence + (rng() % 5 == 0 ? ".\n" : ". ");
  }
  return text;
}

// ---- characters <-> ids ----

struct Vocabulary {
  std::vector<char> chars;      // id -> char
  std::map<char, int64_t> ids;  // char -> id

  explicit Vocabulary(const std::string& text) {
    std::vector<bool> seen(256, false);
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c) {
      if (seen[static_cast<std::size_t>(c)]) {
        ids[static_cast<char>(c)] = static_cast<int64_t>(chars.size());
        chars.push_back(static_cast<char>(c));
      }
    }
  }
  int64_t size() const { return static_cast<int64_t>(chars.size()); }
  std::string decode(const std::vector<int64_t>& tokens) const {
    std::string s;
    for (int64_t t : tokens) s += chars[static_cast<std::size_t>(t)];
    return s;
  }
};

// The flags of every training program (examples/common/training.h), and this one's own.
struct Settings : examples::TrainingFlags {
  Settings() {
    steps = 600;
    batch = 16;
    threads = 1;
    out = "train_chars_out";
    print_every = 50;
  }
  std::string text_file;
  std::string resume;
  int64_t stop_at = 0;
  int64_t context = 32;
  int64_t sample_every = 200;
  double temperature = 0.8;
  int64_t top_k = 10;
  bool html = false;
};

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"train_chars: a character-level GPT on any text file"};
  app.add_option("text", s.text_file, "a text file (default: a corpus the program writes)");
  s.add_to(app, "random seed (weights, batches, dropout)", "train up to this step",
           "directory for loss.svg and the checkpoint");
  app.add_option("--resume", s.resume, "continue from this checkpoint");
  app.add_option("--stop-at", s.stop_at, "stop (and save) after this step, as if interrupted")
      ->check(CLI::PositiveNumber);
  app.add_option("--context", s.context, "characters per sequence")
      ->capture_default_str()
      ->check(CLI::Range(4, 256));
  app.add_option("--sample-every", s.sample_every, "steps between samples")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s.add_print_every(app);
  app.add_option("--temperature", s.temperature, "sampling temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", s.top_k, "sample among the k likeliest characters")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s.add_profile(app);
  app.add_flag("--html", s.html,
               "also write report.html: loss curves, attention maps at every validation (a step "
               "slider), samples, settings");
  CLI11_PARSE(app, argc, argv);
  s.apply();
  std::string text;
  if (s.text_file.empty()) {
    text = default_corpus();
  } else {
    std::ifstream in(s.text_file, std::ios::binary);
    if (!in) {
      std::cerr << "train_chars: cannot read " << s.text_file << "\n";
      return 2;
    }
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (static_cast<int64_t>(text.size()) < 10 * (s.context + 1)) {
    std::cerr << "train_chars: the text has " << text.size() << " characters; at least "
              << 10 * (s.context + 1) << " are needed for --context " << s.context << "\n";
    return 2;
  }
  const Vocabulary vocab(text);
  std::vector<int64_t> data;
  for (char c : text) data.push_back(vocab.ids.at(c));
  // The last 10% is held out for validation.
  const int64_t split = static_cast<int64_t>(data.size()) * 9 / 10;

  nn::GPTConfig cfg;
  cfg.vocab_size = vocab.size();
  cfg.context_length = s.context;
  cfg.emb_dim = 64;
  cfg.n_heads = 4;
  cfg.n_layers = 2;
  cfg.drop_rate = 0.1;
  cfg.qkv_bias = false;
  manual_seed(s.seed);
  nn::GPTModel model(cfg);
  const int64_t numel = examples::parameter_count(model);
  std::printf(
      "train_chars: %zu characters (%s), vocabulary %lld | GPTModel(context %lld, emb "
      "%lld, %lld heads, %lld layers): %lld parameters\n",
      text.size(), s.text_file.empty() ? "the default corpus" : s.text_file.c_str(),
      static_cast<long long>(vocab.size()), static_cast<long long>(cfg.context_length),
      static_cast<long long>(cfg.emb_dim), static_cast<long long>(cfg.n_heads),
      static_cast<long long>(cfg.n_layers), static_cast<long long>(numel));

  optim::AdamW opt(model.parameters(),
                   optim::AdamWOptions(s.lr).betas({0.9, 0.95}).weight_decay(0.1));
  optim::LambdaLR schedule(opt, examples::warmup_cosine(s.steps));

  int64_t start = 0;
  if (!s.resume.empty()) {
    NamedTensorList state;  // the checkpoint fills a plain list of (name, tensor)
    start = optim::load_checkpoint(s.resume, state, opt, &schedule);
    model.load_state_dict(state);
    std::printf("resumed from %s at step %lld\n", s.resume.c_str(), static_cast<long long>(start));
  }

  // A batch of `count` windows of context + 1 characters from [lo, hi), drawn by `rng`.
  auto make_batch = [&](std::mt19937_64& rng, int64_t count, int64_t lo, int64_t hi) {
    std::vector<double> x, y;
    for (int64_t b = 0; b < count; ++b) {
      const int64_t at =
          lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo - s.context - 1));
      for (int64_t t = 0; t < s.context; ++t) {
        x.push_back(static_cast<double>(data[static_cast<std::size_t>(at + t)]));
        y.push_back(static_cast<double>(data[static_cast<std::size_t>(at + t + 1)]));
      }
    }
    return std::pair{from_vector(x, {count, s.context}, DType::Int64),
                     from_vector(y, {count * s.context}, DType::Int64)};
  };
  auto validation_loss = [&] {
    NoGradGuard no_grad;
    model.eval();
    std::mt19937_64 rng(s.seed ^ 0x5eed);  // the same windows every time
    auto [x, y] = make_batch(rng, 64, split, static_cast<int64_t>(data.size()));
    const double loss = F::cross_entropy(model.forward(x).flatten(0, 1), y).item();
    model.train();
    return loss;
  };
  auto sample = [&](int64_t step) {
    model.eval();
    Generator gen(s.seed + static_cast<uint64_t>(step));
    const std::string prompt = text.substr(0, 1);
    Tensor idx = from_vector({static_cast<double>(vocab.ids.at(prompt[0]))}, {1, 1}, DType::Int64);
    Tensor out = nn::generate(model, idx, 120, cfg.context_length, s.temperature, s.top_k,
                              std::nullopt, &gen);
    model.train();
    std::string textout = vocab.decode(out.to_vector<int64_t>());
    std::replace(textout.begin(), textout.end(), '\n', ' ');
    return textout;
  };

  // The report's (--html) watched example: the first window of the held-out text.
  examples::TrainingReport report;
  const std::vector<int64_t> watched(data.begin() + split, data.begin() + split + s.context);
  std::vector<double> watched_ids(watched.begin(), watched.end());
  const Tensor watched_x = from_vector(watched_ids, {1, s.context}, DType::Int64);
  std::vector<std::string> labels;
  for (int64_t id : watched) {
    const char c = vocab.decode({id})[0];
    labels.push_back(c == '\n' ? "\\n" : c == ' ' ? "\u2423" : std::string(1, c));
  }

  examples::LossHistory history;
  const int64_t last = s.stop_at > 0 ? std::min(s.stop_at, s.steps) : s.steps;
  examples::Progress progress(last, s.print_every);
  examples::Stopwatch clock;
  model.train();
  double loss_value = 0, val = 0;
  examples::StepProfiler profiler(s.profile, start + 1, last);  // --profile
  for (int64_t step = start + 1; step <= last; ++step) {
    profiler.before_step(step);
    // This step's batch and dropout masks depend only on (seed, step).
    std::mt19937_64 rng(s.seed * 1000003 + static_cast<uint64_t>(step));
    manual_seed(s.seed * 7919 + static_cast<uint64_t>(step));
    auto [x, y] = make_batch(rng, s.batch, 0, split);
    loss_value = examples::optimizer_step(F::cross_entropy(model.forward(x).flatten(0, 1), y),
                                          model.parameters(), opt, schedule);
    history.train_steps.push_back(static_cast<double>(step));
    history.train_loss.push_back(loss_value);
    if (step % s.print_every == 0 || step == last) {
      val = validation_loss();
      history.val_steps.push_back(static_cast<double>(step));
      history.val_loss.push_back(val);
      if (s.html)
        report.attention.push_back(examples::snapshot_attention(model, watched_x, step, labels));
      // Plain and exact, for comparing runs (and --resume) line by line.
      progress.note("step " + std::to_string(step) + " train loss " + svg::num(loss_value, 8) +
                    " validation loss " + svg::num(val, 8));
    }
    if (step % s.sample_every == 0 || step == last) {
      const std::string text_sample = sample(step);
      progress.note("sample (temperature " + svg::num(s.temperature) + ", top-k " +
                    std::to_string(s.top_k) + "): " + text_sample);
      if (s.html) report.samples.emplace_back(step, text_sample);
    }
    progress.update(step, loss_value, "validation " + svg::num(val, 4), s.batch * s.context);
    if (auto table = profiler.after_step(step)) progress.note(*table);
  }
  const double seconds = clock.seconds();

  const std::string loss_path = s.out + "/loss.svg";
  svg::write_file(loss_path, history.svg("train_chars: character-level loss per step"));
  const std::string checkpoint_path = s.out + "/checkpoint.safetensors";
  optim::save_checkpoint(checkpoint_path, model.state_dict(), opt, &schedule, last);
  std::printf("wrote %s, %s\n", loss_path.c_str(), checkpoint_path.c_str());
  if (s.html) {
    report.title = "train_chars: a character-level GPT";
    report.subtitle = "attention rows: query characters, columns: key characters";
    std::string shown;
    for (const std::string& l : labels) shown += l;
    report.example = "the watched held-out window: \"" + shown + "\"";
    report.labels = labels;
    report.history = history;
    report.settings = {
        {"text", s.text_file.empty() ? "the default corpus" : s.text_file},
        {"characters", std::to_string(text.size())},
        {"vocabulary", std::to_string(vocab.size())},
        {"steps",
         std::to_string(start + 1) + "-" + std::to_string(last) + " of " + std::to_string(s.steps)},
        {"batch", std::to_string(s.batch)},
        {"context", std::to_string(s.context)},
        {"lr (AdamW, warmup + cosine)", svg::num(s.lr)},
        {"seed", std::to_string(s.seed)},
        {"sampling",
         "temperature " + svg::num(s.temperature) + ", top-k " + std::to_string(s.top_k)},
        {"model", "GPTModel(emb " + std::to_string(cfg.emb_dim) + ", " +
                      std::to_string(cfg.n_heads) + " heads, " + std::to_string(cfg.n_layers) +
                      " layers, dropout " + svg::num(cfg.drop_rate) + ")"},
        {"parameters", std::to_string(numel)}};
    const std::string report_path = s.out + "/report.html";
    report.write(report_path);
    std::printf("wrote %s (open it in a browser)\n", report_path.c_str());
  }
  std::printf(
      "train_chars: steps %lld-%lld in %.1f s | final train loss %.4f, validation loss "
      "%.4f | out: %s\n",
      static_cast<long long>(start + 1), static_cast<long long>(last), seconds, loss_value, val,
      s.out.c_str());
  return 0;
}
