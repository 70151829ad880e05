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
// Settings (JSON; every key optional, train_toy's default when absent): digits (8), emb_dim (48),
// n_heads (2), n_layers (2), lr (3e-3), steps (200: the length of the warmup + cosine schedule),
// batch (32), seed (123).
#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/reverse_task.h"
#include "examples/common/training.h"
#include "nn/gpt.h"
#include "optim/optim.h"

using namespace ember;
using namespace ember::examples::toy;
using nlohmann::json;

namespace {

class Trainer {
 public:
  explicit Trainer(const json& settings)
      : digits_(settings.value("digits", 8)),
        steps_(settings.value("steps", 200)),
        batch_(settings.value("batch", 32)),
        task_(digits_, settings.value("seed", 123)) {
    check(digits_ >= 2 && digits_ <= 16, "digits must be in [2, 16]");
    check(steps_ >= 1 && batch_ >= 1, "steps and batch must be positive");
    const nn::GPTConfig cfg{.vocab_size = kVocab,
                            .context_length = 2 * digits_,
                            .emb_dim = settings.value("emb_dim", 48),
                            .n_heads = settings.value("n_heads", 2),
                            .n_layers = settings.value("n_layers", 2),
                            .drop_rate = 0.0,
                            .qkv_bias = false};
    check(cfg.emb_dim % cfg.n_heads == 0, "emb_dim must be a multiple of n_heads");
    manual_seed(settings.value("seed", 123));
    model_ = std::make_unique<nn::GPTModel>(cfg);
    const double lr = settings.value("lr", 3e-3);
    optimizer_ = std::make_unique<optim::AdamW>(model_->parameters(),
                                                optim::AdamWOptions(lr).weight_decay(0.01));
    schedule_ = std::make_unique<optim::LambdaLR>(*optimizer_, examples::warmup_cosine(steps_));
    // The watched example: the first held-out sequence (train_toy's attention.svg).
    watched_.assign(task_.heldout_digits().begin(), task_.heldout_digits().begin() + digits_);
  }

  // Up to `count` more training steps (never past `steps`): their losses.
  json train(int64_t count) {
    json losses = json::array();
    for (int64_t i = 0; i < count && step_ < steps_; ++i) {
      auto [x, y] = task_.batch(task_.train_digits(batch_));
      losses.push_back(examples::optimizer_step(calc_loss_batch(x, y, *model_),
                                                model_->parameters(), *optimizer_, *schedule_));
      ++step_;
    }
    return {{"step", step_}, {"losses", losses}};
  }

  // The held-out loss and token accuracy (teacher-forced, train_toy's evaluate_model, on all 512
  // held-out sequences), and the share of whole sequences greedy generation gets right, on the
  // first `generated` of them (generation is the slow part: one forward pass per output digit).
  json evaluate(int64_t generated) {
    const Evaluation e = evaluate_model(*model_, task_);
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

  // The model's greedy answer for a sequence of digits ("31415926"): the reversed digits it writes.
  json answer(const std::string& text) {
    std::vector<int64_t> digits;
    for (char c : text)
      if (c >= '0' && c <= '9') digits.push_back(c - '0');
    check(static_cast<int64_t>(digits.size()) == digits_, "type exactly ", digits_, " digits");
    const GenerationResult g = generate_reversed(*model_, digits, digits_);
    std::string out;
    for (int64_t d : g.outputs) out += static_cast<char>('0' + d);
    return {{"input", text}, {"output", out}, {"right", g.sequence_accuracy == 1.0}};
  }

  int64_t step() const { return step_; }

 private:
  int64_t digits_, steps_, batch_;
  ReverseTask task_;
  std::unique_ptr<nn::GPTModel> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<optim::LambdaLR> schedule_;
  std::vector<int64_t> watched_;
  int64_t step_ = 0;
};

}  // namespace

#ifdef __EMSCRIPTEN__
namespace {
std::unique_ptr<Trainer> trainer;
std::string result;

// Runs `work` and keeps its JSON (or {"error": ...}) for the page (valid until the next call).
template <typename Work>
const char* answer_json(Work work) {
  try {
    check(trainer != nullptr, "no model yet: call ember_train_live_reset first");
    result = work().dump();
  } catch (const std::exception& e) {
    result = json{{"error", e.what()}}.dump();
  }
  return result.c_str();
}
}  // namespace

// A new model, optimizer and data stream for these settings (JSON text).
extern "C" const char* ember_train_live_reset(const char* settings) {
  trainer.reset();
  try {
    trainer = std::make_unique<Trainer>(json::parse(settings));
    result = json{{"step", 0}}.dump();
  } catch (const std::exception& e) {
    result = json{{"error", e.what()}}.dump();
  }
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
  return answer_json([&] { return trainer->answer(digits); });
}
#else
#include <charconv>
#include <iostream>

// train_live [SETTINGS_JSON [STEPS]]: STEPS training steps (default 50), then the losses, the
// held-out evaluation and the steps per second as JSON. --help says so; more arguments, settings
// that are not JSON or a STEPS that is not an integer in [0, 1000000000] are refused.
int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "{}";
  if (first == "--help" || first == "-h") {
    std::cout << "usage: train_live [SETTINGS_JSON [STEPS]]: STEPS training steps (default 50) "
                 "of train_live.html's training for these settings (default: train_toy's; "
                 "examples/web/train_live.cpp lists the keys), then its losses, the held-out "
                 "evaluation and the steps per second as JSON\n";
    return 0;
  }
  try {
    check(argc <= 3, "expected at most two arguments (SETTINGS_JSON STEPS), got ", argc - 1);
    int64_t steps = 50;
    if (argc > 2) {
      const std::string text = argv[2];
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), steps);
      check(!text.empty() && error == std::errc() && end == text.data() + text.size() &&
                steps >= 0 && steps <= 1000000000,
            "STEPS: expected an integer in [0, 1000000000], got '", text, "'");
    }
    json settings;
    try {
      settings = json::parse(first);
    } catch (const json::exception& e) {
      fail("SETTINGS_JSON '", first, "': ", e.what());
    }
    set_num_threads(1);  // as train_toy, and as the page (WebAssembly here runs one thread)
    Trainer trainer(settings);
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
