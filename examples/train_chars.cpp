// train_chars: a character-level language model (the book's GPTModel, nn/gpt.h) on any text
// file; it prints samples while it learns (temperature and top-k sampling, nn::generate).
//
//   build/release/bin/train_chars                    # the default corpus, written below
//   build/release/bin/train_chars my_text.txt --steps 2000 --out /tmp/chars
//   build/release/bin/train_chars --steps 800 --stop-at 400 --out /tmp/c   # interrupted at 400
//   build/release/bin/train_chars --steps 800 --out /tmp/c --resume /tmp/c/checkpoint.safetensors
//
// The checkpoint is written at the end (or at --stop-at), also every --save-every steps, and on
// Ctrl-C after the step under way (the program then exits with status 130; a second Ctrl-C ends
// it at once: examples/common/interrupt.h).
//
// --resume continues from a checkpoint (model, AdamW state, schedule, step) and prints the same
// losses as an uninterrupted run: each step's batch and dropout masks are drawn from generators
// seeded by (seed, step), so they do not depend on where the run started. The checkpoint records
// the run's settings (the text, --seed, --batch, --context, --lr and --steps, the length of the
// learning-rate schedule): a resume with others is refused.
//
// The functions have the names of their roles in the book's chapter 5 (examples/train_gpt.cpp):
// text_to_token_ids, token_ids_to_text, calc_loss_batch, evaluate_model,
// generate_and_print_sample, train_model_simple.
//
// The default corpus is made here, from a small grammar (no text copied from anywhere): short
// sentences about a fox, a cat and a robot, so that a model of a few seconds' training already
// spells words and begins to make sentences.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/ember.h"
#include "examples/common/checkpoint.h"
#include "examples/common/flags.h"
#include "examples/common/interrupt.h"
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

// ---- characters <-> ids: the tokenizer ----

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
  std::vector<int64_t> encode(const std::string& text) const {
    std::vector<int64_t> tokens;
    for (char c : text) tokens.push_back(ids.at(c));
    return tokens;
  }
  std::string decode(const std::vector<int64_t>& tokens) const {
    std::string s;
    for (int64_t t : tokens) s += chars[static_cast<std::size_t>(t)];
    return s;
  }
};

// The book's text_to_token_ids and token_ids_to_text (a batch of one row), for characters.
Tensor text_to_token_ids(const std::string& text, const Vocabulary& vocab) {
  const std::vector<int64_t> encoded = vocab.encode(text);
  return from_vector(encoded, {1, static_cast<int64_t>(encoded.size())});
}

std::string token_ids_to_text(const Tensor& token_ids, const Vocabulary& vocab) {
  return vocab.decode(token_ids.contiguous().to_vector<int64_t>());
}

// The flags of every training program (examples/common/flags.h), and this one's own.
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
  int64_t save_every = 0;
  int64_t context = 32;
  int64_t sample_every = 200;
  double temperature = 0.8;
  int64_t top_k = 10;
  bool html = false;
  bool kv_cache = true;

  // What a resumed run must share with the run it continues (examples::check_settings): the text,
  // the seed (batches and dropout), the batch, the context, the peak learning rate and --steps
  // (the schedule's length). The rest (--stop-at, --out, --threads, samples) may change.
  examples::RunSettings run_settings(const std::string& text) const {
    return {{"text", examples::text_fingerprint(text)},
            {"--seed", std::to_string(seed)},
            {"--batch", std::to_string(batch)},
            {"--context", std::to_string(context)},
            {"--lr", float_repr(lr)},
            {"--steps", std::to_string(steps)}};
  }

  void add_to(ember::examples::Flags& app) {
    examples::text_option(app, "text", text_file,
                          "a text file (default: a corpus the program writes)");
    TrainingFlags::add_to(app, "random seed (weights, batches, dropout)", "train up to this step",
                          "directory for loss.svg and the checkpoint");
    examples::text_option(app, "--resume", resume, "continue from this checkpoint (same settings)");
    examples::positive_option(app, "--stop-at", stop_at,
                              "stop (and save) after this step, as if interrupted",
                              examples::kMaxSteps);
    examples::positive_option(app, "--save-every", save_every,
                              "also save the checkpoint every N steps (it is saved at the end, and "
                              "on Ctrl-C after the step under way)",
                              examples::kMaxSteps);
    examples::range_option(app, "--context", context, 4, 256, "characters per sequence");
    examples::positive_option(app, "--sample-every", sample_every, "steps between samples");
    add_print_every(app);
    examples::temperature_option(app, temperature, "sampling temperature (0: greedy)");
    examples::positive_option(app, "--top-k", top_k, "sample among the k likeliest characters");
    app.add_flag("--kv-cache,!--no-kv-cache", kv_cache,
                 "sample with the model's KV cache (the same text, faster; default on)");
    add_profile(app);
    app.add_flag("--html", html,
                 "also write report.html: loss curves, attention maps at every validation (a step "
                 "slider), samples, settings");
  }
};

// ---- the data: batches of windows ----

// The token ids of the text, and where the held-out last 10% (the validation text) begins.
struct Data {
  std::vector<int64_t> ids;
  int64_t split = 0;
};

// A batch of `count` windows of context + 1 characters from ids [lo, hi), drawn by `rng`: the
// inputs [count, context] and the targets, the same shifted by one, flat [count * context].
std::pair<Tensor, Tensor> random_batch(const std::vector<int64_t>& ids, std::mt19937_64& rng,
                                       int64_t count, int64_t context, int64_t lo, int64_t hi) {
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < count; ++b) {
    const int64_t at =
        lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo - context - 1));
    for (int64_t t = 0; t < context; ++t) {
      x.push_back(ids[static_cast<std::size_t>(at + t)]);
      y.push_back(ids[static_cast<std::size_t>(at + t + 1)]);
    }
  }
  return {from_vector(x, {count, context}), from_vector(y, {count * context})};
}

// ---- the book's functions, for characters ----

// The book's calc_loss_batch; target_batch comes flat from random_batch.
Tensor calc_loss_batch(const Tensor& input_batch, const Tensor& target_batch, nn::GPTModel& model) {
  const Tensor logits = model.forward(input_batch);
  return F::cross_entropy(logits.flatten(0, 1), target_batch);
}

// The book's evaluate_model on the validation text only (the training loss printed beside it is
// the step's): the loss of 64 windows, the same windows every time.
double evaluate_model(nn::GPTModel& model, const Data& data, int64_t context, uint64_t seed) {
  NoGradGuard no_grad;
  model.eval();
  std::mt19937_64 rng(seed ^ 0x5eed);
  auto [x, y] =
      random_batch(data.ids, rng, 64, context, data.split, static_cast<int64_t>(data.ids.size()));
  const double loss = calc_loss_batch(x, y, model).item();
  model.train();
  return loss;
}

// 120 characters sampled after start_context (temperature and top-k, from a generator seeded by
// seed + step), printed on one line through the progress line; returned for the report.
std::string generate_and_print_sample(nn::GPTModel& model, const Vocabulary& vocab,
                                      const std::string& start_context, const Settings& s,
                                      int64_t step, examples::Progress& progress) {
  model.eval();
  Generator gen(s.seed + static_cast<uint64_t>(step));
  const Tensor token_ids =
      nn::generate(model, text_to_token_ids(start_context, vocab), 120, model.cfg.context_length,
                   s.temperature, s.top_k, std::nullopt, &gen, s.kv_cache);
  model.train();
  std::string decoded_text = token_ids_to_text(token_ids, vocab);
  std::replace(decoded_text.begin(), decoded_text.end(), '\n', ' ');
  progress.note("sample (temperature " + svg::num(s.temperature) + ", top-k " +
                std::to_string(s.top_k) + "): " + decoded_text);
  return decoded_text;
}

// What the loop leaves: the loss curves, the last step's and the last validation's losses, and
// (--html) the report's attention maps and samples; the step it ended after (before `last` when
// Ctrl-C stopped it).
struct Training {
  examples::LossHistory history;
  double train_loss = 0, val_loss = 0;
  examples::TrainingReport report;
  int64_t step = 0;
  bool interrupted = false;
};

// The book's train_model_simple, by steps: steps start + 1 to last (start: the step a resumed
// run continues after, else 0), each on a random batch of the training text (batch and dropout
// masks drawn from generators seeded by (seed, step)) and an AdamW step with warmup and cosine
// decay; a validation every --print-every steps and a sample every --sample-every steps (and both
// at the last); `save` (the checkpoint at a step) every --save-every steps. Ctrl-C ends it after
// the step under way. `watched` is the report's example.
Training train_model_simple(nn::GPTModel& model, const Data& data, const Vocabulary& vocab,
                            optim::Optimizer& optimizer, optim::LRScheduler& schedule,
                            int64_t start, int64_t last, const std::string& start_context,
                            const Settings& s, const examples::WatchedExample& watched,
                            const std::function<void(int64_t)>& save) {
  Training t;
  t.step = start;
  examples::Progress progress(last, s.print_every);
  // --html: the gradient flow through the blocks, read by module hooks at every step.
  std::optional<examples::GradientFlow> flow;
  if (s.html) flow.emplace(model);
  model.train();
  examples::StepProfiler profiler(s.profile, start + 1, last);  // --profile
  for (int64_t step = start + 1; step <= last; ++step) {
    profiler.before_step(step);
    std::mt19937_64 rng(s.seed * 1000003 + static_cast<uint64_t>(step));
    manual_seed(s.seed * 7919 + static_cast<uint64_t>(step));
    auto [x, y] = random_batch(data.ids, rng, s.batch, s.context, 0, data.split);
    t.train_loss = examples::optimizer_step(calc_loss_batch(x, y, model), model.parameters(),
                                            optimizer, schedule, [&] {
                                              if (flow) flow->record(step);
                                            });
    t.history.train_steps.push_back(static_cast<double>(step));
    t.history.train_loss.push_back(t.train_loss);
    if (step % s.print_every == 0 || step == last) {
      t.val_loss = evaluate_model(model, data, s.context, s.seed);
      t.history.val_steps.push_back(static_cast<double>(step));
      t.history.val_loss.push_back(t.val_loss);
      if (s.html) t.report.attention.push_back(watched.attention(model, step));
      // Plain and exact, for comparing runs (and --resume) line by line.
      progress.note("step " + std::to_string(step) + " train loss " + svg::num(t.train_loss, 8) +
                    " validation loss " + svg::num(t.val_loss, 8));
    }
    if (step % s.sample_every == 0 || step == last) {
      const std::string sample =
          generate_and_print_sample(model, vocab, start_context, s, step, progress);
      if (s.html) t.report.samples.emplace_back(step, sample);
    }
    progress.update(step, t.train_loss, "validation " + svg::num(t.val_loss, 4),
                    s.batch * s.context);
    if (auto table = profiler.after_step(step)) progress.note(*table);
    t.step = step;
    if (examples::interrupted() && step < last) {  // (after the last step, the run is done)
      t.interrupted = true;
      break;
    }
    if (s.save_every > 0 && step % s.save_every == 0 && step != last) {
      save(step);
      progress.note("saved the checkpoint at step " + std::to_string(step));
    }
  }
  if (flow) t.report.gradient_flow = flow->history();
  return t;
}

// Everything the settings need of the text, checked before any work: both parts of the text (the
// first 90% for training, the rest for validation) hold more than one window of context + 1
// characters (random_batch draws a start among them), the training part at least --batch of them,
// and --top-k is at most the vocabulary.
void check_settings(const Settings& s, const std::string& text) {
  const auto n = static_cast<int64_t>(text.size());
  const int64_t needed = 10 * (s.context + 1) + 1;  // so that ceil(n / 10) >= context + 2
  check(n >= needed, "the text has ", n, " characters; at least ", needed,
        " are needed for --context ", s.context);
  const int64_t windows = n * 9 / 10 - s.context - 1;
  check(s.batch <= windows, "--batch: expected at most the ", windows,
        " windows of the training text, got ", s.batch);
  const int64_t vocabulary = Vocabulary(text).size();
  check(s.top_k <= vocabulary, "--top-k: expected at most the text's ", vocabulary,
        " distinct characters, got ", s.top_k);
  if (!s.resume.empty()) examples::check_input_file(s.resume, "--resume");
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  Settings s;
  ember::examples::Flags app{"train_chars: a character-level GPT on any text file"};
  s.add_to(app);
  if (auto code = examples::parse(app, argc, argv)) return *code;
  const std::string text =
      s.text_file.empty() ? default_corpus() : examples::read_text_file(s.text_file, "text");
  check_settings(s, text);
  const Vocabulary vocab(text);
  Data data;
  data.ids = vocab.encode(text);
  data.split = static_cast<int64_t>(data.ids.size()) * 9 / 10;  // the last 10%: validation

  const nn::GPTConfig cfg{.vocab_size = vocab.size(),
                          .context_length = s.context,
                          .emb_dim = 64,
                          .n_heads = 4,
                          .n_layers = 2,
                          .drop_rate = 0.1,
                          .qkv_bias = false};
  examples::check_training_memory(cfg, s.batch, "--batch, --context");
  manual_seed(s.seed);
  nn::GPTModel model(cfg);
  const int64_t numel = examples::parameter_count(model);
  std::printf("train_chars: %zu characters (%s), vocabulary %lld | GPTModel(%s): %lld parameters\n",
              text.size(), s.text_file.empty() ? "the default corpus" : s.text_file.c_str(),
              static_cast<long long>(vocab.size()), examples::config_text(cfg).c_str(),
              static_cast<long long>(numel));

  optim::AdamW optimizer(model.parameters(),
                         optim::AdamWOptions(s.lr).betas({0.9, 0.95}).weight_decay(0.1));
  optim::LambdaLR schedule(optimizer, examples::warmup_cosine(s.steps));
  const examples::RunSettings settings = s.run_settings(text);
  int64_t start = 0;
  const int64_t last = s.stop_at > 0 ? std::min(s.stop_at, s.steps) : s.steps;
  if (!s.resume.empty()) {
    const examples::Checkpoint c =
        examples::load_checkpoint(s.resume, model, optimizer, &schedule, "train_chars", settings);
    c.check_known({});
    start = c.step;
    check(schedule.last_epoch() == start, "--resume: '", s.resume,
          "': the learning-rate schedule is at step ", schedule.last_epoch(),
          ", the checkpoint's step is ", start);
    examples::check_resume_point(start, last, "step", "--steps, --stop-at");
    std::printf("resumed from %s at step %lld\n", s.resume.c_str(), static_cast<long long>(start));
  }
  s.apply("checkpoint.safetensors");
  std::vector<std::string> outputs{"checkpoint.safetensors", "loss.svg"};
  if (s.html) outputs.emplace_back("report.html");
  examples::check_output_files(s.out, outputs);
  // The checkpoint holds the model's state dict and AdamW's two moments of every parameter: a
  // disk (or a file size limit) without room for it is said now, not after the training.
  uint64_t checkpoint_bytes = 0;
  for (const auto& [name, t] : model.state_dict()) {
    checkpoint_bytes += static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
  }
  checkpoint_bytes += 2 * sizeof(float) * static_cast<uint64_t>(numel);
  examples::check_free_space(s.out, checkpoint_bytes, "train_chars: the checkpoint",
                             "free some space or choose another --out");

  // The report's (--html) watched example: the first window of the held-out text.
  const std::vector<int64_t> window(data.ids.begin() + data.split,
                                    data.ids.begin() + data.split + s.context);
  std::vector<std::string> labels;
  for (int64_t id : window) {
    const char c = vocab.chars[static_cast<std::size_t>(id)];
    labels.push_back(c == '\n' ? "\\n" : c == ' ' ? "\u2423" : std::string(1, c));
  }
  const examples::WatchedExample watched{from_vector(window, {1, s.context}), labels};

  const std::string checkpoint_path = s.out + "/checkpoint.safetensors";
  const auto save = [&](int64_t step) {
    examples::save_checkpoint(checkpoint_path, model, optimizer, &schedule, step, "train_chars",
                              settings);
  };
  examples::catch_interrupt();  // Ctrl-C: finish the step, save, stop
  examples::Stopwatch clock;
  Training t = train_model_simple(model, data, vocab, optimizer, schedule, start, last,
                                  text.substr(0, 1), s, watched, save);
  const double seconds = clock.seconds();

  // The checkpoint first: the training is what a failure after it would lose.
  save(t.step);
  const std::string loss_path = s.out + "/loss.svg";
  svg::write_file(loss_path, t.history.svg("train_chars: character-level loss per step"));
  std::printf("wrote %s, %s\n", loss_path.c_str(), checkpoint_path.c_str());
  if (t.interrupted) {
    std::printf("interrupted (Ctrl-C) after step %lld: --resume %s continues the run\n",
                static_cast<long long>(t.step), checkpoint_path.c_str());
    return examples::kInterruptedExit;
  }
  if (s.html) {
    t.report.title = "train_chars: a character-level GPT";
    t.report.subtitle = "attention rows: query characters, columns: key characters";
    std::string shown;
    for (const std::string& l : labels) shown += l;
    t.report.example = "the watched held-out window: \"" + shown + "\"";
    t.report.labels = labels;
    t.report.history = t.history;
    t.report.settings = {
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
    t.report.write_in(s.out);
  }
  std::printf(
      "train_chars: steps %lld-%lld in %.1f s | final train loss %.4f, validation loss "
      "%.4f | out: %s\n",
      static_cast<long long>(start + 1), static_cast<long long>(last), seconds, t.train_loss,
      t.val_loss, s.out.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("train_chars", [&] { return run(argc, argv); });
}
