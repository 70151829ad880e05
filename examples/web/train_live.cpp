// The training of examples/web/train_live.html: train_toy's task (examples/train_toy.cpp, a small
// GPT learning to reverse digits) one step at a time, with train_toy's model, data, optimizer
// and schedule (examples/common/reverse_task.h, examples/common/training.h), so that its losses
// are train_toy's for the same settings.
//
// Compiled into the page's WebAssembly (the wasm preset), where the page drives it through the
// functions at the end (ember_train_live_*: JSON in, JSON out, through Module.ccall), and into the
// native program train_live, which runs the same steps and prints the same JSON (and the steps per
// second, to compare with the page's).
//
// Settings (JSON; every key optional, train_toy's default when absent): digits (8, in [2, 16]),
// emb_dim (48, in [1, 1024]), n_heads (2, in [1, emb_dim], dividing emb_dim), n_layers (2, in
// [1, 16]), lr (3e-3, finite, >= 0), steps (200: the length of the warmup + cosine schedule, in
// [1, 10^6]), batch (32, in [1, 4096]), seed (123, in [0, 2^53]); batch x context x emb_dim x
// n_layers at most 2^22 (one step's activations stay within a few hundred MB). web::Settings
// refuses any other key, type or value with an ember::Error (the page shows it; the native
// program prints it and exits with 2). A loss that is not finite (the training diverged) stops
// the model: every later call says so, and no NaN reaches the page as a number.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/reverse_task.h"
#include "examples/common/training.h"
#include "examples/web/web_settings.h"
#include "nn/gpt.h"
#include "optim/optim.h"

using namespace ember;
using namespace ember::examples::toy;
using nlohmann::json;

namespace {

class Trainer {
 public:
  explicit Trainer(const web::Settings& settings)
      : digits_(settings.integer("digits", 8, 2, 16)),
        steps_(settings.integer("steps", 200, 1, 1000000)),
        batch_(settings.integer("batch", 32, 1, 4096)),
        task_(digits_, static_cast<uint64_t>(settings.integer("seed", 123, 0, kMaxSeed))) {
    const nn::GPTConfig cfg{.vocab_size = kVocab,
                            .context_length = 2 * digits_,
                            .emb_dim = settings.integer("emb_dim", 48, 1, 1024),
                            .n_heads = settings.integer("n_heads", 2, 1, 1024),
                            .n_layers = settings.integer("n_layers", 2, 1, 16),
                            .drop_rate = 0.0,
                            .qkv_bias = false};
    check(cfg.emb_dim % cfg.n_heads == 0, "settings: \"emb_dim\" (", cfg.emb_dim,
          ") must be a multiple of \"n_heads\" (", cfg.n_heads, ")");
    const int64_t size = batch_ * cfg.context_length * cfg.emb_dim * cfg.n_layers;
    check(size <= (int64_t{1} << 22), "settings: batch x context x emb_dim x n_layers = ", batch_,
          " x ", cfg.context_length, " x ", cfg.emb_dim, " x ", cfg.n_layers, " = ", size,
          " is more than 2^22 (4194304): a smaller model or batch");
    manual_seed(static_cast<uint64_t>(settings.integer("seed", 123, 0, kMaxSeed)));
    model_ = std::make_unique<nn::GPTModel>(cfg);
    const double lr = settings.number("lr", 3e-3, 0.0, std::numeric_limits<double>::max());
    optimizer_ = std::make_unique<optim::AdamW>(model_->parameters(),
                                                optim::AdamWOptions(lr).weight_decay(0.01));
    schedule_ = std::make_unique<optim::LambdaLR>(*optimizer_, examples::warmup_cosine(steps_));
    // The watched example: the first held-out sequence (train_toy's attention.svg).
    watched_.assign(task_.heldout_digits().begin(), task_.heldout_digits().begin() + digits_);
  }

  // Up to `count` more training steps (never past `steps`): their losses. A loss that is not
  // finite ends the training (an ember::Error now and at every later call).
  json train(int64_t count) {
    check(count >= 0 && count <= 1000000, "train: the count of steps must be in [0, 1000000], got ",
          count);
    check_not_diverged();
    json losses = json::array();
    for (int64_t i = 0; i < count && step_ < steps_; ++i) {
      auto [x, y] = task_.batch(task_.train_digits(batch_));
      const double loss = examples::optimizer_step(calc_loss_batch(x, y, *model_),
                                                   model_->parameters(), *optimizer_, *schedule_);
      ++step_;
      diverge_if_not_finite(loss, "the training loss");
      losses.push_back(loss);
    }
    return {{"step", step_}, {"losses", losses}};
  }

  // The held-out loss and token accuracy (teacher-forced, train_toy's evaluate_model, on all 512
  // held-out sequences), and the share of whole sequences greedy generation gets right, on the
  // first `generated` of them (generation is the slow part: one forward pass per output digit).
  json evaluate(int64_t generated) {
    check(generated >= 0, "evaluate: the count of sequences to generate must be >= 0, got ",
          generated);
    check_not_diverged();
    const Evaluation e = evaluate_model(*model_, task_);
    diverge_if_not_finite(e.loss, "the held-out loss");
    const auto& heldout = task_.heldout_digits();
    generated = std::min(generated, task_.heldout_count());
    const std::vector<int64_t> some(heldout.begin(), heldout.begin() + generated * digits_);
    const GenerationResult g = generate_reversed(*model_, some, digits_);
    return {{"step", step_},
            {"loss", e.loss},
            {"token_accuracy", e.token_accuracy},
            {"sequence_accuracy", g.sequence_accuracy},
            {"sequences_generated", generated}};
  }

  // Every head's attention map on the watched example: [layer * heads][query][key], and the
  // tokens that label the rows and columns.
  json attention() {
    check_not_diverged();
    NoGradGuard no_grad;
    const Tensor x = task_.batch(watched_).first;
    json labels = json::array();
    for (int64_t id : x.to_vector<int64_t>()) labels.push_back(token_text(id));
    model_->eval();
    std::vector<std::shared_ptr<nn::TransformerBlock>> blocks;
    for (const auto& m : *model_->trf_blocks) {
      blocks.push_back(std::dynamic_pointer_cast<nn::TransformerBlock>(m));
      blocks.back()->att->keep_trace = true;
    }
    model_->forward(x);
    json maps = json::array();
    for (const auto& block : blocks) {
      const Tensor w = block->att->trace.attn_weights;  // [1, heads, T, T]
      for (int64_t h = 0; h < w.size(1); ++h) {
        const Tensor map = w.index({0, h}).contiguous();
        const std::vector<float> v = map.to_vector<float>();
        for (float a : v) diverge_if_not_finite(a, "an attention weight");
        json rows = json::array();
        for (int64_t q = 0; q < map.size(0); ++q)
          rows.push_back(
              std::vector<float>(v.begin() + q * map.size(1), v.begin() + (q + 1) * map.size(1)));
        maps.push_back(rows);
      }
      block->att->keep_trace = false;
      block->att->trace = {};
    }
    model_->train();
    return {{"labels", labels}, {"maps", maps}};
  }

  // The model's greedy answer for a sequence of digits ("31415926", spaces allowed between them):
  // the reversed digits it writes. Any other character is refused, not skipped.
  json answer(const std::string& text) {
    check_not_diverged();
    std::vector<int64_t> digits;
    int64_t character = 0;  // counted in UTF-8 characters, as the visitor sees them
    for (const char c : text) {
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++character;
      if (c == ' ') continue;
      check(c >= '0' && c <= '9', "type exactly ", digits_,
            " digits 0-9 (spaces allowed): character ", character, " is not one",
            c > ' ' && static_cast<unsigned char>(c) < 0x7F ? std::string(" ('") + c + "')" : "");
      check(static_cast<int64_t>(digits.size()) < digits_, "type exactly ", digits_,
            " digits, got more");  // (read no further: a pasted book costs nothing)
      digits.push_back(c - '0');
    }
    check(static_cast<int64_t>(digits.size()) == digits_, "type exactly ", digits_, " digits, got ",
          digits.size());
    const GenerationResult g = generate_reversed(*model_, digits, digits_);
    std::string out;
    for (int64_t d : g.outputs) out += static_cast<char>('0' + d);
    return {{"input", text}, {"output", out}, {"right", g.sequence_accuracy == 1.0}};
  }

  int64_t step() const { return step_; }

  static constexpr int64_t kMaxSeed = int64_t{1} << 53;  // what a page's JavaScript number holds

 private:
  void check_not_diverged() const {
    check(diverged_.empty(), "the training diverged (", diverged_,
          "): start a new model, with a smaller learning rate");
  }
  void diverge_if_not_finite(double x, const char* what) {
    if (std::isfinite(x)) return;
    diverged_ = std::string(what) + " is " + (std::isnan(x) ? "nan" : "inf") + " at step " +
                std::to_string(step_);
    check_not_diverged();
  }

  int64_t digits_, steps_, batch_;
  ReverseTask task_;
  std::unique_ptr<nn::GPTModel> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<optim::LambdaLR> schedule_;
  std::vector<int64_t> watched_;
  int64_t step_ = 0;
  std::string diverged_;  // why the training stopped, once a number is not finite
};

const std::vector<std::string> kSettingsKeys = {"digits", "emb_dim", "n_heads", "n_layers",
                                                "lr",     "steps",   "batch",   "seed"};

}  // namespace

#ifdef __EMSCRIPTEN__
namespace {
std::unique_ptr<Trainer> trainer;
std::string result;

// Runs `work` and keeps its JSON (or {"error": ...}) for the page (valid until the next call).
template <typename Work>
const char* answer_json(Work work) {
  result = web::answer_or_error([&] {
    check(trainer != nullptr, "no model yet: call ember_train_live_reset first");
    return work();
  });
  return result.c_str();
}
}  // namespace

// A new model, optimizer and data stream for these settings (JSON text). Refused settings leave
// no model (every other call then says so).
extern "C" const char* ember_train_live_reset(const char* settings) {
  trainer.reset();
  result = web::answer_or_error([&] {
    trainer = std::make_unique<Trainer>(web::Settings(settings, kSettingsKeys));
    return json{{"step", 0}};
  });
  return result.c_str();
}
extern "C" const char* ember_train_live_train(int count) {
  return answer_json([&] { return trainer->train(count); });
}
extern "C" const char* ember_train_live_evaluate(int generated) {
  return answer_json([&] { return trainer->evaluate(generated); });
}
extern "C" const char* ember_train_live_attention() {
  return answer_json([&] { return trainer->attention(); });
}
extern "C" const char* ember_train_live_answer(const char* digits) {
  return answer_json([&] {
    check(digits != nullptr, "answer: no text (a null pointer)");
    return trainer->answer(digits);
  });
}
#else
#include <iostream>

// train_live [SETTINGS_JSON [STEPS]]: STEPS training steps (default 50), then the losses, the
// held-out evaluation and the steps per second as JSON. --help says so; more arguments, settings
// that are not JSON of the keys above or a STEPS that is not an integer in [0, 1000000] are refused.
int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "--help" || first == "-h") {
    std::cout << "usage: train_live [SETTINGS_JSON [STEPS]]: STEPS training steps (default 50) "
                 "of train_live.html's training for these settings (default: train_toy's; "
                 "examples/web/train_live.cpp lists the keys), then its losses, the held-out "
                 "evaluation and the steps per second as JSON\n";
    return 0;
  }
  try {
    set_num_threads(1);  // as train_toy, and as the page (WebAssembly here runs one thread)
    check(argc <= 3, "expected at most two arguments (SETTINGS_JSON STEPS), got ", argc - 1);
    Trainer trainer(web::Settings(first.c_str(), kSettingsKeys));
    int64_t steps = 50;
    if (argc > 2) {
      const std::string text = argv[2];
      std::size_t used = 0;
      try {
        steps = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      check(!text.empty() && used == text.size() && steps >= 0 && steps <= 1000000,
            "STEPS must be an integer in [0, 1000000], got '", text, "'");
    }
    const auto start = std::chrono::steady_clock::now();
    json out = trainer.train(steps);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out["steps_per_second"] = static_cast<double>(trainer.step()) / seconds;
    out["evaluation"] = trainer.evaluate(512);
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_live: " << e.what() << "\n";
    return 2;
  }
}
#endif
