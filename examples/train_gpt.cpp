// train_gpt: chapter 5 of "Build a Large Language Model (From Scratch)", "Pretraining on
// unlabeled data", as the book's notebook (ch05/01_main-chapter-code/ch05.ipynb) runs it: GPT-2's
// 124M model with a context of 256 trained on Edith Wharton's "The Verdict"
// (examples/the-verdict.txt) for 10 epochs of 9 batches of 2, evaluated every 5 steps, a sample
// after each epoch.
//
//   build/release/bin/train_gpt                        # the book's run; prints the book's lines
//   build/release/bin/train_gpt --epochs 4 --out /tmp/g --stop-after-epoch 2   # interrupted...
//   build/release/bin/train_gpt --epochs 4 --out /tmp/g --resume /tmp/g/checkpoint.safetensors
//   build/release/bin/train_gpt --weights model.safetensors --generate "Every effort moves you"
//
// What it prints, in the notebook's order (each step is PyTorch 1.13's to float32 rounding, so
// every printed digit is the book's; tests/nn/test_train_gpt_example.cpp checks):
//   cell 15: the untrained model's text     Every effort moves you rentingetic wasnم refres ...
//   cell 71: the initial losses             Training loss: 10.98758..., Validation
//   loss: 10.98110... cell 77: train_model_simple             Ep 1 (Step 000000): Train loss 9.781,
//   Val loss 9.933
//                                           ... Every effort moves you,,,,,,,,,,,,.
//   cells 86 and 115: greedy, then temperature and top-k sampling (--temperature, --top-k)
// and writes loss.svg (cell 79: train and validation loss against epochs, tokens seen along the
// top) and checkpoint.safetensors (cell 123: model and AdamW state, plus the epoch, the history
// and the generator's state, so --resume continues with the same lines as an uninterrupted run).
//
// The random draws are PyTorch's, in PyTorch's order, from the one global generator: the weights
// (manual_seed(123) before GPTModel), the train loader's shuffle (nn::DataLoader: a seed per pass,
// then randperm), dropout in every training step, and the seeds each evaluation's pass over the
// train and validation loaders draws.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/parallel.h"
#include "core/ember.h"
#include "examples/common/svg.h"
#include "examples/common/training.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/gpt_weights.h"
#include "nn/loss.h"
#include "nn/tokenizer.h"
#include "optim/checkpoint.h"
#include "optim/optim.h"

using namespace ember;
namespace F = ember::nn::functional;
namespace svg = ember::examples::svg;

namespace {

struct Settings {
  std::string text_file = "examples/the-verdict.txt";
  uint64_t seed = 123;
  int64_t epochs = 10, batch = 2, context = 256, eval_freq = 5, eval_iter = 5;
  int64_t emb_dim = 768, n_layers = 12, n_heads = 12;
  double lr = 0.0004, weight_decay = 0.1, train_ratio = 0.90, drop_rate = 0.1;
  int64_t max_steps = 0, stop_after_epoch = 0, print_every = 10;
  int threads = 1;
  std::string out = "train_gpt_out", resume, start_context = "Every effort moves you";
  double temperature = 1.4;
  int64_t top_k = 25, max_new_tokens = 15;
  std::string weights, model_name = "gpt2-small (124M)", generate;
  bool skip_initial = false, print_losses = false;
};

// Python's repr of a float: the shortest digits that read back as the same double.
std::string repr(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string fixed3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// ---- the book's functions ----

Tensor text_to_token_ids(const std::string& text, const nn::GPT2Tokenizer& tok) {
  const std::vector<int64_t> ids = tok.encode(text, /*allow_endoftext=*/true);
  return from_vector(ids, {1, static_cast<int64_t>(ids.size())});
}

std::string token_ids_to_text(const Tensor& ids, const nn::GPT2Tokenizer& tok) {
  return tok.decode(ids.contiguous().to_vector<int64_t>());
}

Tensor calc_loss_batch(const nn::Batch& batch, nn::GPTModel& model) {
  const Tensor logits = model.forward(batch.input);
  return F::cross_entropy(logits.flatten(0, 1), batch.target.flatten());
}

double calc_loss_loader(const nn::DataLoader& loader, nn::GPTModel& model,
                        std::optional<int64_t> num_batches = std::nullopt) {
  double total_loss = 0.0;
  if (loader.size() == 0) return std::nan("");
  const int64_t n = num_batches ? std::min(*num_batches, loader.size()) : loader.size();
  int64_t i = 0;
  for (auto pass = loader.iter(); auto batch = pass.next(); ++i) {
    if (i >= n) break;
    total_loss += calc_loss_batch(*batch, model).item();
  }
  return total_loss / static_cast<double>(n);
}

std::pair<double, double> evaluate_model(nn::GPTModel& model, const nn::DataLoader& train_loader,
                                         const nn::DataLoader& val_loader, int64_t eval_iter) {
  model.eval();
  NoGradGuard no_grad;
  const double train_loss = calc_loss_loader(train_loader, model, eval_iter);
  const double val_loss = calc_loss_loader(val_loader, model, eval_iter);
  model.train();
  return {train_loss, val_loss};
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');  // the book's compact print format
  return s;
}

std::string generate_and_print_sample(nn::GPTModel& model, const nn::GPT2Tokenizer& tok,
                                      const std::string& start_context) {
  model.eval();
  const int64_t context_size = model.pos_emb->weight.size(0);
  const Tensor ids =
      nn::generate_text_simple(model, text_to_token_ids(start_context, tok), 50, context_size);
  model.train();
  return one_line(token_ids_to_text(ids, tok));
}

// What train_model_simple returns, and where a resumed run continues.
struct History {
  std::vector<double> train_losses, val_losses, tokens_seen;
  int64_t tokens = 0, global_step = -1, epochs_done = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("train_gpt: cannot read " + path +
                " (run from the repository root, or pass the text file)");
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// text_data[:split_idx] with split_idx = int(train_ratio * len(text_data)), in characters
// (code points) as Python counts them: the byte offset of that character.
std::size_t split_offset(const std::string& text, double train_ratio) {
  std::vector<std::size_t> starts;  // byte offset of each code point
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  const auto split_idx = static_cast<std::size_t>(train_ratio * static_cast<double>(starts.size()));
  return split_idx < starts.size() ? starts[split_idx] : text.size();
}

int generate_from_weights(const Settings& s, const nn::GPT2Tokenizer& tok) {
  nn::GPTConfig cfg = nn::gpt2_config(s.model_name);
  manual_seed(s.seed);
  nn::GPTModel model(cfg);
  nn::load_gpt2_weights(model, s.weights);
  model.eval();
  manual_seed(s.seed);
  const Tensor ids =
      nn::generate(model, text_to_token_ids(s.generate, tok), s.max_new_tokens, cfg.context_length,
                   s.temperature, s.top_k > 0 ? std::optional<int64_t>(s.top_k) : std::nullopt);
  std::printf("Output text:\n %s\n", token_ids_to_text(ids, tok).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"train_gpt: chapter 5 of the book, pretraining GPT-2 (124M) on The Verdict"};
  app.add_option("text", s.text_file, "the training text")->capture_default_str();
  app.add_option("--seed", s.seed, "torch.manual_seed")->capture_default_str();
  app.add_option("--epochs", s.epochs, "num_epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", s.batch, "batch_size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--context", s.context, "context_length (also max_length and stride)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--emb-dim", s.emb_dim, "emb_dim")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--layers", s.n_layers, "n_layers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--heads", s.n_heads, "n_heads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--drop-rate", s.drop_rate, "drop_rate")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--lr", s.lr, "AdamW learning rate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", s.weight_decay, "AdamW weight decay")->capture_default_str();
  app.add_option("--train-ratio", s.train_ratio, "share of the text for training")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--eval-freq", s.eval_freq, "steps between evaluations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--eval-iter", s.eval_iter, "batches per evaluation")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-steps", s.max_steps, "stop after this many steps (a short run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--stop-after-epoch", s.stop_after_epoch,
                 "save and stop after this epoch, as if interrupted")
      ->check(CLI::PositiveNumber);
  app.add_option("--resume", s.resume, "continue from this checkpoint (same settings)");
  app.add_flag(
      "--print-losses", s.print_losses,
      "print every step's loss and every evaluation's losses in full (for comparing runs)");
  app.add_flag("--skip-initial", s.skip_initial,
               "skip the untrained model's text and initial losses");
  app.add_option("--threads", s.threads, "threads for the kernels")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--out", s.out, "directory for loss.svg and checkpoint.safetensors")
      ->capture_default_str();
  app.add_option("--print-every", s.print_every,
                 "steps between progress lines when stdout is not a terminal")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", s.temperature, "the final sample's temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", s.top_k, "the final sample's top-k (0: all tokens)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-new-tokens", s.max_new_tokens,
                 "tokens the final sample (or --generate) adds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--weights", s.weights,
                 "OpenAI's GPT-2 weights (model.safetensors): generate, no training");
  app.add_option("--model", s.model_name, "which GPT-2 --weights holds: 124M, 355M, 774M, 1558M")
      ->capture_default_str();
  app.add_option("--generate", s.generate, "with --weights: the prompt");
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(s.threads);
    const nn::GPT2Tokenizer tokenizer;
    if (!s.weights.empty()) {
      if (s.generate.empty()) s.generate = s.start_context;
      return generate_from_weights(s, tokenizer);
    }
    std::filesystem::create_directories(s.out);
    nn::GPTConfig cfg{50257, s.context, s.emb_dim, s.n_heads, s.n_layers, s.drop_rate, false};

    const std::string text_data = read_text(s.text_file);
    const std::size_t split = split_offset(text_data, s.train_ratio);
    std::printf(
        "train_gpt: %s: %zu bytes, %zu tokens | GPTModel(context %lld, emb %lld, %lld heads, %lld "
        "layers)\n",
        s.text_file.c_str(), text_data.size(), tokenizer.encode(text_data, true).size(),
        static_cast<long long>(cfg.context_length), static_cast<long long>(cfg.emb_dim),
        static_cast<long long>(cfg.n_heads), static_cast<long long>(cfg.n_layers));

    // Cells 61: the loaders (train: shuffled, drop_last; validation: in order, all of it).
    manual_seed(s.seed);
    auto make_dataset = [&](const std::string& part, const char* which) {
      try {
        return std::make_shared<nn::GPTDataset>(tokenizer.encode(part, true), s.context, s.context);
      } catch (const Error& e) {
        throw Error(std::string("train_gpt: not enough text for the ") + which +
                    " loader: " + e.what());
      }
    };
    const nn::DataLoader train_loader(make_dataset(text_data.substr(0, split), "training"), s.batch,
                                      /*shuffle=*/true, /*drop_last=*/true);
    const nn::DataLoader val_loader(make_dataset(text_data.substr(split), "validation"), s.batch,
                                    /*shuffle=*/false, /*drop_last=*/false);

    if (!s.skip_initial && s.resume.empty()) {
      // Cells 11 and 15: the untrained model.
      manual_seed(s.seed);
      nn::GPTModel untrained(cfg);
      untrained.eval();
      const Tensor ids = nn::generate_text_simple(
          untrained, text_to_token_ids(s.start_context, tokenizer), 10, cfg.context_length);
      std::printf("Output text:\n %s\n", token_ids_to_text(ids, tokenizer).c_str());
      // Cell 71.
      manual_seed(s.seed);
      NoGradGuard no_grad;
      const double train_loss = calc_loss_loader(train_loader, untrained);
      const double val_loss = calc_loss_loader(val_loader, untrained);
      std::printf("Training loss: %s\nValidation loss: %s\n", repr(train_loss).c_str(),
                  repr(val_loss).c_str());
      std::fflush(stdout);
    }

    // Cell 77.
    manual_seed(s.seed);
    nn::GPTModel model(cfg);
    optim::AdamW optimizer(model.parameters(),
                           optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
    History h;
    const std::string checkpoint_path = s.out + "/checkpoint.safetensors";
    if (!s.resume.empty()) {
      NamedTensorList state;
      optim::load_checkpoint(s.resume, state, optimizer);
      NamedTensorList model_state;
      for (auto& [name, t] : state) {
        if (name == "train_gpt.rng") {
          default_generator().set_state(t.contiguous().to_vector<int64_t>());
        } else if (name == "train_gpt.history") {
          const auto v = t.contiguous().to_vector<double>();
          for (std::size_t i = 0; i + 2 < v.size(); i += 3) {
            h.train_losses.push_back(v[i]);
            h.val_losses.push_back(v[i + 1]);
            h.tokens_seen.push_back(v[i + 2]);
          }
        } else if (name == "train_gpt.counters") {
          const auto v = t.contiguous().to_vector<int64_t>();
          h.tokens = v.at(0), h.global_step = v.at(1), h.epochs_done = v.at(2);
        } else {
          model_state.emplace_back(name, t);
        }
      }
      model.load_state_dict(model_state);
      std::printf("resumed from %s after epoch %lld (step %lld)\n", s.resume.c_str(),
                  static_cast<long long>(h.epochs_done), static_cast<long long>(h.global_step));
    }
    auto save = [&] {
      NamedTensorList state;
      for (const auto& [name, t] : model.state_dict()) state.emplace_back(name, t);
      state.emplace_back("train_gpt.rng", from_vector(default_generator().get_state(), {632}));
      std::vector<double> hist;
      for (std::size_t i = 0; i < h.train_losses.size(); ++i) {
        hist.insert(hist.end(), {h.train_losses[i], h.val_losses[i], h.tokens_seen[i]});
      }
      state.emplace_back(
          "train_gpt.history",
          from_vector(hist, {static_cast<int64_t>(h.train_losses.size()), 3}, DType::Float64));
      state.emplace_back(
          "train_gpt.counters",
          from_vector(std::vector<int64_t>{h.tokens, h.global_step, h.epochs_done}, {3}));
      optim::save_checkpoint(checkpoint_path, state, optimizer, nullptr, h.global_step + 1);
    };

    // train_model_simple, with a progress line (ETA) beside the book's prints.
    const int64_t total_steps = s.epochs * train_loader.size();
    const int64_t last_epoch =
        s.stop_after_epoch > 0 ? std::min(s.stop_after_epoch, s.epochs) : s.epochs;
    examples::Progress progress(total_steps, s.print_every);
    examples::Stopwatch clock;
    bool stopped = false;
    for (int64_t epoch = h.epochs_done; epoch < last_epoch && !stopped; ++epoch) {
      model.train();
      for (auto pass = train_loader.iter(); auto batch = pass.next();) {
        if (s.max_steps > 0 && h.global_step + 1 >= s.max_steps) {
          stopped = true;
          break;
        }
        optimizer.zero_grad();
        Tensor loss = calc_loss_batch(*batch, model);
        loss.backward();
        optimizer.step();
        h.tokens += batch->input.numel();
        h.global_step += 1;
        const double loss_value = loss.item();
        if (s.print_losses) {
          progress.note("step " + std::to_string(h.global_step) + " loss " + repr(loss_value));
        }
        if (h.global_step % s.eval_freq == 0) {
          const auto [train_loss, val_loss] =
              evaluate_model(model, train_loader, val_loader, s.eval_iter);
          h.train_losses.push_back(train_loss);
          h.val_losses.push_back(val_loss);
          h.tokens_seen.push_back(static_cast<double>(h.tokens));
          char step_text[32];
          std::snprintf(step_text, sizeof step_text, "%06lld",
                        static_cast<long long>(h.global_step));
          progress.note("Ep " + std::to_string(epoch + 1) + " (Step " + step_text +
                        "): Train loss " + fixed3(train_loss) + ", Val loss " + fixed3(val_loss));
          if (s.print_losses) {
            progress.note("eval " + std::to_string(h.global_step) + " " + repr(train_loss) + " " +
                          repr(val_loss));
          }
        }
        progress.update(h.global_step + 1, loss_value, "epoch " + std::to_string(epoch + 1),
                        batch->input.numel());
      }
      if (stopped) break;
      progress.note(generate_and_print_sample(model, tokenizer, s.start_context));
      h.epochs_done = epoch + 1;
      save();
    }
    const double seconds = clock.seconds();
    std::printf("train_gpt: steps %lld in %.1f s (%s)\n", static_cast<long long>(h.global_step + 1),
                seconds, examples::duration_text(seconds).c_str());

    // Cell 79: the loss plot, epochs_seen = torch.linspace(0, num_epochs, len(train_losses)).
    if (!h.train_losses.empty()) {
      svg::LineChart chart;
      chart.title = "train_gpt: " + std::filesystem::path(s.text_file).filename().string();
      chart.x_label = "Epochs";
      chart.y_label = "Loss";
      std::vector<double> epochs_seen;
      const auto n = static_cast<double>(h.train_losses.size());
      for (std::size_t i = 0; i < h.train_losses.size(); ++i) {
        epochs_seen.push_back(
            n > 1 ? static_cast<double>(s.epochs) * static_cast<double>(i) / (n - 1) : 0.0);
      }
      chart.series.push_back({"Training loss", epochs_seen, h.train_losses});
      chart.series.push_back({"Validation loss", epochs_seen, h.val_losses});
      const svg::TopAxis tokens_axis{"Tokens seen", h.tokens_seen.front(), h.tokens_seen.back()};
      svg::write_file(s.out + "/loss.svg", svg::line_chart(chart, tokens_axis));
      std::printf("wrote %s/loss.svg\n", s.out.c_str());
    }
    if (stopped || h.epochs_done < s.epochs) {
      // (after --max-steps, mid-epoch, nothing is saved: a checkpoint is an epoch's end)
      std::printf("stopped after epoch %lld; checkpoint %s\n",
                  static_cast<long long>(h.epochs_done), checkpoint_path.c_str());
      return 0;
    }
    std::printf("wrote %s\n", checkpoint_path.c_str());

    // Cells 86 and 115: decoding with the trained model.
    model.eval();
    Tensor ids = nn::generate_text_simple(model, text_to_token_ids(s.start_context, tokenizer), 25,
                                          cfg.context_length);
    std::printf("Output text (greedy):\n %s\n", token_ids_to_text(ids, tokenizer).c_str());
    manual_seed(s.seed);
    ids = nn::generate(model, text_to_token_ids(s.start_context, tokenizer), s.max_new_tokens,
                       cfg.context_length, s.temperature,
                       s.top_k > 0 ? std::optional<int64_t>(s.top_k) : std::nullopt);
    std::printf("Output text (temperature %s, top-k %lld):\n %s\n", repr(s.temperature).c_str(),
                static_cast<long long>(s.top_k), token_ids_to_text(ids, tokenizer).c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
