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
// every printed digit is the book's; tests/examples/test_train_gpt_example.cpp checks):
//   cell 15: the untrained model's text     Every effort moves you rentingetic wasnم refres ...
//   cell 71: the initial losses             Training loss: 10.98758...
//                                           Validation loss: 10.98110...
//   cell 77: train_model_simple             Ep 1 (Step 000000): Train loss 9.781, Val loss 9.933
//                                           ... Every effort moves you,,,,,,,,,,,,.
//   cells 86 and 115: greedy, then temperature and top-k sampling (--temperature, --top-k)
// and writes loss.svg (cell 79: train and validation loss against epochs, tokens seen along the
// top) and checkpoint.safetensors (cell 123: model and AdamW state, plus the epoch, the history
// and the generator's state, so --resume continues with the same lines as an uninterrupted run;
// and the run's settings, so that a resume with other settings is refused).
// The checkpoint is written once, at the end, as the book saves; --save-every N also after every
// N epochs; Ctrl-C finishes the step under way, saves (within the epoch: --resume continues with
// the epoch's next batch) and exits with status 130 (examples/common/interrupt.h); a second
// Ctrl-C, or one after the training's last save, ends the program at once. After the checkpoint,
// before the final samples, a line sums up the job: the products' FLOPs of the book's run (the
// untrained text, the initial losses, the training steps, evaluations and samples), their rate
// as a share of Ember's GEMM rate measured then, and memory (ember::memory_stats: peak, cached,
// in use; and the peak resident set).
//
// The book's functions come first, with its names and arguments (less `device`), in its order
// where C++ allows (evaluate_model and generate_and_print_sample before train_model_simple, which
// calls them); then main, the notebook's cells in order. What Ember adds to the book's loop (a
// progress line, --resume, stopping early) is one argument of train_model_simple; the flags, the
// checkpoint file and the progress line are in examples/common/.
//
// The random draws are PyTorch's, in PyTorch's order, from the one global generator: the weights
// (manual_seed(123) before GPTModel), the train loader's shuffle (nn::DataLoader: a seed per pass,
// then randperm), dropout in every training step, and the seeds each evaluation's pass over the
// train and validation loaders draws.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/parallel.h"
#include "core/ember.h"
#include "examples/common/bench_util.h"
#include "examples/common/checkpoint.h"
#include "examples/common/flags.h"
#include "examples/common/interrupt.h"
#include "examples/common/program.h"
#include "examples/common/svg.h"
#include "examples/common/training.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/gpt_weights.h"
#include "nn/loss.h"
#include "nn/tokenizer.h"
#include "optim/optim.h"

using namespace ember;
namespace F = ember::nn::functional;
namespace svg = ember::examples::svg;

namespace {

// Chapter 2's create_dataloader_v1 (the tokenizer passed in, no workers): windows of max_length
// tokens every stride tokens, in batches. Where PyTorch would give an empty loader, an
// ember::Error that names the loader (`which`).
nn::DataLoader create_dataloader_v1(const std::string& txt, const nn::GPT2Tokenizer& tokenizer,
                                    int64_t batch_size, int64_t max_length, int64_t stride,
                                    bool shuffle, bool drop_last, const char* which) {
  std::shared_ptr<nn::GPTDataset> dataset;
  try {
    dataset = std::make_shared<nn::GPTDataset>(tokenizer.encode(txt, true), max_length, stride);
  } catch (const Error& e) {
    throw Error(std::string("train_gpt: not enough text for the ") + which +
                " loader: " + e.what());
  }
  return nn::DataLoader(dataset, batch_size, shuffle, drop_last);
}

// ---- 5.1 Evaluating generative text models ----

// Chapter 4's greedy decoding (listing 4.8) and section 5.3's generate (temperature and top-k)
// are the library's: nn/gpt.h.
using nn::generate;
using nn::generate_text_simple;

// Listing 5.1: text to a batch of one row of token ids, and back.
Tensor text_to_token_ids(const std::string& text, const nn::GPT2Tokenizer& tokenizer) {
  const std::vector<int64_t> encoded = tokenizer.encode(text, /*allow_endoftext=*/true);
  return from_vector(encoded, {1, static_cast<int64_t>(encoded.size())});  // .unsqueeze(0)
}

std::string token_ids_to_text(const Tensor& token_ids, const nn::GPT2Tokenizer& tokenizer) {
  return tokenizer.decode(token_ids.contiguous().to_vector<int64_t>());
}

// ---- what the whole job computes (Ember's addition, for the final line) ----

// The FLOPs of GPTModel's products in a forward pass over `batch` sequences of `tokens` (2 per
// multiply-add): in each block the query, key, value and output projections (4 d x d) and the
// feed-forward's two (d x 4d, 4d x d), attention's scores and weighted values (tokens x tokens x d
// each, the masked half included, as the book's code computes it), then the output head (d x
// vocabulary). A training step's backward pass computes twice the forward's.
double forward_flops(const nn::GPTConfig& cfg, int64_t batch, int64_t tokens) {
  const double b = static_cast<double>(batch), t = static_cast<double>(tokens),
               d = static_cast<double>(cfg.emb_dim), v = static_cast<double>(cfg.vocab_size);
  const double block = 2 * b * t * 12 * d * d + 2 * 2 * b * t * t * d;
  return static_cast<double>(cfg.n_layers) * block + 2 * b * t * d * v;
}

// The job's parts, each with its products' FLOPs (the book's code's for the same run: whatever
// Ember would skip still counts, so that the figures compare with PyTorch's run of the same job)
// and its wall time, for the final lines: where the time went.
enum Part { kTraining, kEvaluation, kSampling, kSaving, kParts };
constexpr const char* kPartNames[kParts] = {"training steps", "evaluations", "samples", "saving"};
struct PartTotals {
  double flops = 0, seconds = 0;
};
std::array<PartTotals, kParts> job_parts;

double job_flops() {
  double sum = 0;
  for (const PartTotals& part : job_parts) sum += part.flops;
  return sum;
}

// Adds the wall time of its scope to a part of the job.
class TimedPart {
 public:
  explicit TimedPart(Part part) : part_(part) {}
  ~TimedPart() { job_parts[part_].seconds += clock_.seconds(); }
  TimedPart(const TimedPart&) = delete;
  TimedPart& operator=(const TimedPart&) = delete;

 private:
  Part part_;
  examples::Stopwatch clock_;
};

// A forward pass over a batch of token ids, and its backward when a graph is being built.
void count_pass(const nn::GPTConfig& cfg, const Tensor& input_batch) {
  const bool training = GradMode::is_enabled();
  job_parts[training ? kTraining : kEvaluation].flops +=
      (training ? 3 : 1) * forward_flops(cfg, input_batch.size(0), input_batch.size(1));
}

// The forward passes that generate `new_tokens` after `prompt` tokens, one per token over the
// tokens so far (cropped to the context).
void count_generation(const nn::GPTConfig& cfg, int64_t prompt, int64_t new_tokens) {
  for (int64_t i = 0; i < new_tokens; ++i) {
    job_parts[kSampling].flops += forward_flops(cfg, 1, std::min(prompt + i, cfg.context_length));
  }
}

// Section 5.1.3: the cross entropy of one batch's next-token predictions, and its mean over the
// first num_batches batches of a loader (all of them by default).
Tensor calc_loss_batch(const Tensor& input_batch, const Tensor& target_batch, nn::GPTModel& model) {
  count_pass(model.cfg, input_batch);  // (Ember's addition)
  const Tensor logits = model.forward(input_batch);
  return F::cross_entropy(logits.flatten(0, 1), target_batch.flatten());
}

double calc_loss_loader(const nn::DataLoader& data_loader, nn::GPTModel& model,
                        std::optional<int64_t> num_batches = std::nullopt) {
  double total_loss = 0.0;
  if (data_loader.size() == 0) return std::nan("");
  const int64_t n = num_batches ? std::min(*num_batches, data_loader.size()) : data_loader.size();
  int64_t i = 0;
  for (auto pass = data_loader.iter(); auto batch = pass.next(); ++i) {
    if (i >= n) break;
    total_loss += calc_loss_batch(batch->input, batch->target, model).item();
  }
  return total_loss / static_cast<double>(n);
}

// ---- 5.2 Training an LLM ----

// The mean losses of eval_iter batches of each loader, in evaluation mode and without a graph.
std::pair<double, double> evaluate_model(nn::GPTModel& model, const nn::DataLoader& train_loader,
                                         const nn::DataLoader& val_loader, int64_t eval_iter) {
  const TimedPart timed(kEvaluation);  // (Ember's addition)
  model.eval();
  NoGradGuard no_grad;
  const double train_loss = calc_loss_loader(train_loader, model, eval_iter);
  const double val_loss = calc_loss_loader(val_loader, model, eval_iter);
  model.train();
  return {train_loss, val_loss};
}

// 50 greedy tokens after start_context, printed on one line (the book's compact format), through
// the progress line. use_cache: with the model's KV cache (--kv-cache; the same tokens).
void generate_and_print_sample(nn::GPTModel& model, const nn::GPT2Tokenizer& tokenizer,
                               const std::string& start_context, examples::Progress& progress,
                               bool use_cache) {
  const TimedPart timed(kSampling);  // (Ember's addition)
  model.eval();
  const int64_t context_size = model.pos_emb->weight.size(0);
  const Tensor encoded = text_to_token_ids(start_context, tokenizer);
  const Tensor token_ids =
      generate_text_simple(model, encoded, 50, context_size, use_cache);  // no graph
  count_generation(model.cfg, encoded.size(1), 50);
  std::string decoded_text = token_ids_to_text(token_ids, tokenizer);
  std::replace(decoded_text.begin(), decoded_text.end(), '\n', ' ');
  progress.note(decoded_text);
  model.train();
}

// What train_model_simple returns: the book's three lists (the losses of each evaluation and the
// tokens seen by then), and the counters, which a resumed run continues from.
struct History {
  std::vector<double> train_losses, val_losses, track_tokens_seen;
  int64_t tokens_seen = 0, global_step = -1;
  int64_t epochs_done = 0;       // epochs finished
  int64_t batches_in_epoch = 0;  // batches of the next epoch done (a checkpoint saved by Ctrl-C)
  Tensor epoch_rng;              // the generator's state at that epoch's start (its shuffle)
  bool stopped = false;          // --max-steps ended the run within an epoch
  bool interrupted = false;      // Ctrl-C ended the run (after saving)
};

// What Ember adds to the book's loop; none of it changes a line the book prints.
struct Extras {
  examples::Progress& progress;  // the book's prints, beside a progress line with an ETA
  History start;                 // where the loop starts: the book's zeros, or a checkpoint's
  int64_t stop_after_epoch = 0;  // --stop-after-epoch: end after this epoch (0: run them all)
  int64_t max_steps = 0;         // --max-steps: save and end before this step (0: no limit)
  bool print_losses = false;     // --print-losses: each step's and evaluation's losses in full
  bool kv_cache = true;          // --kv-cache: samples generated with the model's KV cache
  int64_t save_every = 0;        // --save-every: also save after every this many epochs
  std::function<void(const History&)> save;  // writes the checkpoint
};

// The epoch's pass over the train loader. A run resumed within an epoch (a checkpoint of Ctrl-C)
// draws the epoch's shuffle again from the generator's state at the epoch's start, passes the
// batches done before, then puts the generator back where the checkpoint left it.
nn::DataLoader::Pass begin_epoch(const nn::DataLoader& train_loader, History& h) {
  if (h.batches_in_epoch == 0) {
    h.epoch_rng = examples::generator_state();
    return train_loader.iter();
  }
  const Tensor now = examples::generator_state();
  examples::set_generator_state(h.epoch_rng);
  auto pass = train_loader.iter();
  for (int64_t i = 0; i < h.batches_in_epoch; ++i) pass.next();
  examples::set_generator_state(now);
  return pass;
}

// Listing 5.3: the training loop.
History train_model_simple(nn::GPTModel& model, const nn::DataLoader& train_loader,
                           const nn::DataLoader& val_loader, optim::Optimizer& optimizer,
                           int64_t num_epochs, int64_t eval_freq, int64_t eval_iter,
                           const std::string& start_context, const nn::GPT2Tokenizer& tokenizer,
                           const Extras& extras) {
  History h = extras.start;
  examples::Progress& progress = extras.progress;
  const int64_t last_epoch =
      extras.stop_after_epoch > 0 ? std::min(extras.stop_after_epoch, num_epochs) : num_epochs;
  // Whether a Ctrl-C leaves something for a resume to do: not once the run's last epoch or last
  // step (--max-steps) is done, where the run ends as it would have.
  const auto interrupted = [&] {
    return examples::interrupted() && h.epochs_done < last_epoch &&
           !(extras.max_steps > 0 && h.global_step + 1 >= extras.max_steps);
  };
  for (int64_t epoch = h.epochs_done; epoch < last_epoch; ++epoch) {
    model.train();
    for (auto pass = begin_epoch(train_loader, h); auto batch = pass.next();) {
      if (extras.max_steps > 0 && h.global_step + 1 >= extras.max_steps) {
        // The run's end: saved as Ctrl-C saves. At an epoch's first batch, the generator is put
        // back to the epoch's start (before the pass's draws): the checkpoint of an epoch's end.
        if (h.batches_in_epoch == 0) examples::set_generator_state(h.epoch_rng);
        h.stopped = true;
        extras.save(h);
        return h;
      }
      std::optional<TimedPart> timed(kTraining);  // (Ember's addition)
      optimizer.zero_grad();                      // reset the gradients of the previous batch
      const Tensor loss = calc_loss_batch(batch->input, batch->target, model);
      loss.backward();   // the loss's gradients
      optimizer.step();  // update the weights with them
      timed.reset();
      h.tokens_seen += batch->input.numel();
      h.global_step += 1;
      if (extras.print_losses) {
        progress.note("step " + std::to_string(h.global_step) + " loss " + float_repr(loss.item()));
      }

      if (h.global_step % eval_freq == 0) {  // the optional evaluation step
        // (Ember's addition) This step's gradients are not read again (the next step starts with
        // zero_grad): freed here, their memory holds the evaluation's activations.
        optimizer.zero_grad();
        const auto [train_loss, val_loss] =
            evaluate_model(model, train_loader, val_loader, eval_iter);
        h.train_losses.push_back(train_loss);
        h.val_losses.push_back(val_loss);
        h.track_tokens_seen.push_back(static_cast<double>(h.tokens_seen));
        char line[128];
        std::snprintf(line, sizeof line, "Ep %lld (Step %06lld): Train loss %.3f, Val loss %.3f",
                      static_cast<long long>(epoch + 1), static_cast<long long>(h.global_step),
                      train_loss, val_loss);
        progress.note(line);
        if (extras.print_losses) {
          progress.note("eval " + std::to_string(h.global_step) + " " + float_repr(train_loss) +
                        " " + float_repr(val_loss));
        }
      }
      progress.update(h.global_step + 1, loss.item(), "epoch " + std::to_string(epoch + 1),
                      batch->input.numel());
      h.batches_in_epoch += 1;
      if (interrupted()) {  // Ctrl-C: the step is done; save it and stop
        h.interrupted = true;
        extras.save(h);
        return h;
      }
    }
    // (Ember's addition) The last step's gradients are not read again (the next step starts with
    // zero_grad): freed here, their memory holds the sample's packed weights (RowPanelScope,
    // the weights' size), so sampling adds nothing to the run's peak memory.
    optimizer.zero_grad();
    generate_and_print_sample(model, tokenizer, start_context, progress,
                              extras.kv_cache);  // after each epoch
    h.epochs_done = epoch + 1;
    h.batches_in_epoch = 0;
    // The checkpoint: at the end, as the book saves (and after --stop-after-epoch), after every
    // --save-every epochs, and when Ctrl-C came during the sample (not at the run's end: main
    // sees that Ctrl-C).
    h.interrupted = interrupted();
    if (h.epochs_done == last_epoch || h.interrupted) {
      extras.save(h);  // main says so
    } else if (extras.save_every > 0 && h.epochs_done % extras.save_every == 0) {
      extras.save(h);
      progress.note("saved the checkpoint after epoch " + std::to_string(h.epochs_done));
    }
    if (h.interrupted) return h;
  }
  return h;
}

// Cell 79: training and validation loss against epochs (epochs_seen), tokens seen along the top,
// written to `path`.
void plot_losses(const std::vector<double>& epochs_seen, const std::vector<double>& tokens_seen,
                 const std::vector<double>& train_losses, const std::vector<double>& val_losses,
                 const std::string& title, const std::string& path) {
  svg::LineChart chart;
  chart.title = title;
  chart.x_label = "Epochs";
  chart.y_label = "Loss";
  chart.series.push_back({"Training loss", epochs_seen, train_losses});
  chart.series.push_back({"Validation loss", epochs_seen, val_losses});
  const svg::TopAxis tokens_axis{"Tokens seen", tokens_seen.front(), tokens_seen.back()};
  svg::write_file(path, svg::line_chart(chart, tokens_axis));
}

// torch.linspace(0, num_epochs, count): the epoch of each evaluation, for the plot.
std::vector<double> epochs_seen(int64_t num_epochs, std::size_t count) {
  std::vector<double> epochs;
  const auto n = static_cast<double>(count);
  for (std::size_t i = 0; i < count; ++i) {
    epochs.push_back(n > 1 ? static_cast<double>(num_epochs) * static_cast<double>(i) / (n - 1)
                           : 0.0);
  }
  return epochs;
}

// ---- 5.4 Saving and loading: the checkpoint, and continuing from it ----

// The model and the AdamW state, and beside them what train_model_simple continues from: the
// generator's state (the next epoch's shuffle and dropout), the lists and the counters. Saved
// within an epoch (Ctrl-C), also the batches of the epoch done and the generator's state at its
// start.
void save_checkpoint(const std::string& path, const nn::GPTModel& model,
                     const optim::Optimizer& optimizer, const History& h,
                     const examples::RunSettings& settings) {
  std::vector<int64_t> counters{h.tokens_seen, h.global_step, h.epochs_done};
  NamedTensorList own{{"train_gpt.rng", examples::generator_state()},
                      {"train_gpt.history", examples::lists_tensor({&h.train_losses, &h.val_losses,
                                                                    &h.track_tokens_seen})}};
  if (h.batches_in_epoch > 0) {
    counters.push_back(h.batches_in_epoch);
    own.emplace_back("train_gpt.epoch_rng", h.epoch_rng);
  }
  own.emplace_back("train_gpt.counters",
                   from_vector(counters, {static_cast<int64_t>(counters.size())}));
  examples::save_checkpoint(path, model, optimizer, nullptr, h.global_step + 1, "train_gpt",
                            settings, own);
}

// Restores what save_checkpoint wrote with these `settings`, and says so. Its counters must fit
// together and this run (an epoch of `batches_per_epoch` batches of `batch_tokens` tokens, an
// evaluation every `eval_freq` steps): the steps the optimizer counted are the epochs and batches
// done, the tokens seen those steps' tokens, the history one row per evaluation.
History load_checkpoint(const std::string& path, nn::GPTModel& model, optim::Optimizer& optimizer,
                        const examples::RunSettings& settings, int64_t batches_per_epoch,
                        int64_t batch_tokens, int64_t eval_freq) {
  const examples::Checkpoint c =
      examples::load_checkpoint(path, model, optimizer, nullptr, "train_gpt", settings);
  c.check_known(
      {"train_gpt.rng", "train_gpt.history", "train_gpt.counters", "train_gpt.epoch_rng"});
  const std::vector<int64_t> v =
      c.need("train_gpt.counters", DType::Int64, 1).contiguous().to_vector<int64_t>();
  examples::check_counters(v, path, "train_gpt.counters");
  History h;
  h.tokens_seen = v[0], h.global_step = v[1], h.epochs_done = v[2];
  if (v.size() > 3) h.batches_in_epoch = v[3];
  const int64_t steps = h.global_step + 1;
  const std::string where = "--resume: '" + path + "': ";
  check(steps == c.step, where, "train_gpt.counters' global step ", h.global_step,
        " is not the step before the checkpoint's step ", c.step);
  const int64_t whole_epochs = steps - h.batches_in_epoch;  // steps of the epochs done
  check(h.batches_in_epoch <= batches_per_epoch && whole_epochs >= 0 &&
            whole_epochs % batches_per_epoch == 0 &&
            whole_epochs / batches_per_epoch == h.epochs_done,
        where, steps, " steps are not the ", h.epochs_done, " epoch(s) of ", batches_per_epoch,
        " batches and ", h.batches_in_epoch,
        " batch(es) train_gpt.counters holds (this run's epoch has ", batches_per_epoch,
        " batches)");
  check(h.tokens_seen % batch_tokens == 0 && h.tokens_seen / batch_tokens == steps, where,
        "train_gpt.counters holds ", h.tokens_seen, " tokens seen, expected ", steps, " steps of ",
        batch_tokens, " tokens");
  const Tensor& history = c.need("train_gpt.history", DType::Float64, 2);
  const int64_t evaluations = steps > 0 ? (steps - 1) / eval_freq + 1 : 0;
  check(history.size(0) == evaluations && history.size(1) == 3, where,
        "train_gpt.history has shape ", history.shape(), ", expected [", evaluations,
        ", 3] (the losses and tokens seen of an evaluation every ", eval_freq, " steps of ", steps,
        ")");
  examples::append_lists(history, {&h.train_losses, &h.val_losses, &h.track_tokens_seen});
  if (h.batches_in_epoch > 0) {
    h.epoch_rng = c.need("train_gpt.epoch_rng", DType::Int64, 1);
  } else {
    check(!c.own.count("train_gpt.epoch_rng"), where,
          "train_gpt.epoch_rng is there but train_gpt.counters stops at an epoch's end");
  }
  examples::set_generator_state(c.need("train_gpt.rng", DType::Int64, 1));
  if (h.batches_in_epoch > 0) {
    std::printf("resumed from %s in epoch %lld after batch %lld (step %lld)\n", path.c_str(),
                static_cast<long long>(h.epochs_done + 1),
                static_cast<long long>(h.batches_in_epoch), static_cast<long long>(h.global_step));
  } else {
    std::printf("resumed from %s after epoch %lld (step %lld)\n", path.c_str(),
                static_cast<long long>(h.epochs_done), static_cast<long long>(h.global_step));
  }
  return h;
}

// ---- the program ----

// Ember's single-precision GEMM rate in FLOP/s at this run's threads: the median call over half a
// second on the product the model computes most, the feed-forward's first ([batch x context, d] x
// [d, 4d]). Measured before the job and after it, outside the job's time: a virtual machine's
// speed moves over minutes, and the higher of the two is the rate the job is held to.
double gemm_rate(int64_t emb_dim, int64_t rows) {
  NoGradGuard no_grad;
  const Tensor x = full({rows, emb_dim}, 0.5), w = full({emb_dim, 4 * emb_dim}, 0.25);
  matmul(x, w);  // the first call sizes the packing buffers
  std::vector<double> seconds;
  examples::Stopwatch total;
  do {
    examples::Stopwatch call;
    matmul(x, w);
    seconds.push_back(call.seconds());
  } while (total.seconds() < 0.5 || seconds.size() < 3);
  const auto d = static_cast<double>(emb_dim);
  return 2 * static_cast<double>(rows) * d * 4 * d / bench::median(seconds);
}

// The job's lines: its products (job_flops) over its wall time, as a share of the GEMM rate, and
// the memory of its tensors (ember::memory_stats: the most held at once, what the allocator keeps
// for reuse, what tensors hold now) beside the process's peak resident set; then where the time
// went, part by part, each part's products as a share of the same rate (the samples' share
// counts the book's products, which the KV cache mostly skips). Printed once the training job is
// done and saved, before the final samples (cells 86 and 115, about 0.5% of the run's products,
// left out), so that the program's last lines stay the book's. `rate_before` is gemm_rate before
// the job.
void print_job_line(const nn::GPTConfig& cfg, int64_t rows, double seconds, double rate_before) {
  const double rate_after = gemm_rate(cfg.emb_dim, rows);
  const double rate = std::max(rate_before, rate_after), achieved = job_flops() / seconds;
  const MemoryStats m = memory_stats();
  const double gb = 1e9;
  std::printf(
      "train_gpt: job %.2f TFLOP of products in %.1f s: %.1f GFLOP/s, %.0f%% of the GEMM rate "
      "(%.1f GFLOP/s), the higher of its measures before and after the job (%.1f, %.1f) | "
      "memory: peak %.2f GB, cached %.2f GB, in use %.2f GB; peak RSS %.2f GB\n",
      job_flops() / 1e12, seconds, achieved / 1e9, 100 * achieved / rate, rate / 1e9,
      rate_before / 1e9, rate_after / 1e9, static_cast<double>(m.mapped_peak) / gb,
      static_cast<double>(m.mapped_kept) / gb, static_cast<double>(m.mapped_in_use) / gb,
      bench::peak_rss_mb() * 1024 * 1024 / gb);
  std::string parts;
  double rest = seconds;
  for (int p = 0; p < kParts; ++p) {
    const PartTotals& part = job_parts[p];
    rest -= part.seconds;
    char text[128];
    if (part.flops > 0 && part.seconds > 0) {
      std::snprintf(text, sizeof text, "%s %.1f s (%.2f TFLOP, %.0f%%), ", kPartNames[p],
                    part.seconds, part.flops / 1e12, 100 * part.flops / part.seconds / rate);
    } else {
      std::snprintf(text, sizeof text, "%s %.1f s, ", kPartNames[p], part.seconds);
    }
    parts += text;
  }
  std::printf("train_gpt: where the time went: %sthe rest %.1f s\n", parts.c_str(), rest);
}

// The flags: the book's settings (GPT_CONFIG_124M with a context of 256, the loaders', AdamW's,
// train_model_simple's) and Ember's.
struct Settings {
  std::string text_file = "examples/the-verdict.txt";
  uint64_t seed = 123;
  int64_t epochs = 10, batch = 2, context = 256, eval_freq = 5, eval_iter = 5;
  int64_t emb_dim = 768, n_layers = 12, n_heads = 12;
  double lr = 0.0004, weight_decay = 0.1, train_ratio = 0.90, drop_rate = 0.1;
  int64_t max_steps = 0, stop_after_epoch = 0, save_every = 0, print_every = 10;
  int threads = 1;
  std::string out = "train_gpt_out", resume, start_context = "Every effort moves you";
  double temperature = 1.4;
  int64_t top_k = 25, max_new_tokens = 15;
  std::string weights, model_name = "gpt2-small (124M)", generate;
  bool skip_initial = false, print_losses = false, kv_cache = true, save = true;
  static constexpr int64_t kMaxEpochs = 1000000;

  void add_to(ember::examples::Flags& app) {
    using examples::option, examples::positive_option, examples::non_negative_option,
        examples::range_option;
    examples::text_option(app, "text", text_file, "the training text").capture_default_str();
    option(app, "--seed", seed, "torch.manual_seed");
    positive_option(app, "--epochs", epochs, "num_epochs", kMaxEpochs);
    positive_option(app, "--batch", batch, "batch_size", examples::kMaxBatch);
    positive_option(app, "--context", context, "context_length (also max_length and stride)",
                    int64_t{1} << 17);
    positive_option(app, "--emb-dim", emb_dim, "emb_dim", int64_t{1} << 16);
    positive_option(app, "--layers", n_layers, "n_layers", int64_t{1024});
    positive_option(app, "--heads", n_heads, "n_heads", int64_t{1024});
    range_option(app, "--drop-rate", drop_rate, 0.0, 0.99, "drop_rate");
    positive_option(app, "--lr", lr, "AdamW learning rate");
    non_negative_option(app, "--weight-decay", weight_decay, "AdamW weight decay");
    range_option(app, "--train-ratio", train_ratio, 0.0, 1.0, "share of the text for training");
    positive_option(app, "--eval-freq", eval_freq, "steps between evaluations");
    positive_option(app, "--eval-iter", eval_iter, "batches per evaluation");
    positive_option(app, "--max-steps", max_steps, "stop after this many steps (a short run)",
                    examples::kMaxSteps);
    positive_option(app, "--stop-after-epoch", stop_after_epoch,
                    "save and stop after this epoch, as if interrupted", kMaxEpochs);
    ember::examples::Flag every =
        positive_option(app, "--save-every", save_every,
                        "also save the checkpoint after every N epochs (it is "
                        "saved at the end, and on Ctrl-C after the step under way)",
                        kMaxEpochs);
    app.add_flag("!--no-save", save,
                 "write no checkpoint (a run to watch, or a disk without room for the model and "
                 "its optimizer state)")
        .excludes(every);
    const ember::examples::Flag resume_flag = examples::text_option(
        app, "--resume", resume, "continue from this checkpoint (same settings)");
    app.add_flag(
        "--print-losses", print_losses,
        "print every step's loss and every evaluation's losses in full (for comparing runs)");
    app.add_flag("--skip-initial", skip_initial,
                 "skip the untrained model's text and initial losses");
    positive_option(app, "--threads", threads, "threads for the kernels", examples::kMaxThreads);
    option(app, "--out", out, "directory for loss.svg and checkpoint.safetensors");
    examples::print_every_option(app, print_every);
    examples::temperature_option(app, temperature, "the final sample's temperature (0: greedy)");
    non_negative_option(app, "--top-k", top_k, "the final sample's top-k (0: all tokens)",
                        int64_t{50257});
    positive_option(app, "--max-new-tokens", max_new_tokens,
                    "tokens the final sample (or --generate) adds", int64_t{1} << 20);
    examples::text_option(app, "--weights", weights,
                          "OpenAI's GPT-2 weights (model.safetensors): generate, no training")
        .excludes(resume_flag);
    option(app, "--model", model_name, "which GPT-2 --weights holds: 124M, 355M, 774M, 1558M")
        .check([](const std::string& name) {
          try {
            nn::gpt2_config(name);
            return std::string();
          } catch (const Error&) {
            return "expected 124M, 355M, 774M or 1558M (or gpt2-small (124M), gpt2-medium "
                   "(355M), gpt2-large (774M), gpt2-xl (1558M)), got '" +
                   name + "'";
          }
        });
    examples::text_option(app, "--generate", generate, "with --weights: the prompt", "a prompt");
    app.add_flag("--kv-cache,!--no-kv-cache", kv_cache,
                 "generate with the model's KV cache (the same tokens, faster; default on)");
  }

  // What a resumed run must share with the run it continues (examples::check_settings): the text,
  // the model, the loaders, AdamW, the evaluations (the printed lines) and the seed (the final
  // sample). The rest (--epochs, --max-steps, --out, --threads, the final sample's settings) may
  // change.
  examples::RunSettings run_settings(const std::string& text) const {
    return {{"text", examples::text_fingerprint(text)},
            {"--seed", std::to_string(seed)},
            {"--batch", std::to_string(batch)},
            {"--context", std::to_string(context)},
            {"--emb-dim", std::to_string(emb_dim)},
            {"--layers", std::to_string(n_layers)},
            {"--heads", std::to_string(n_heads)},
            {"--drop-rate", float_repr(drop_rate)},
            {"--lr", float_repr(lr)},
            {"--weight-decay", float_repr(weight_decay)},
            {"--train-ratio", float_repr(train_ratio)},
            {"--eval-freq", std::to_string(eval_freq)},
            {"--eval-iter", std::to_string(eval_iter)}};
  }

  std::optional<int64_t> top_k_or_all() const {
    return top_k > 0 ? std::optional<int64_t>(top_k) : std::nullopt;
  }
};

// The training text (examples::read_text_file: at most 64 MiB); an ember::Error when it cannot
// be read.
std::string read_text(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    throw Error("train_gpt: cannot read " + path +
                " (run from the repository root, or pass the text file)");
  }
  return examples::read_text_file(path, "text");
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

// Section 5.5: OpenAI's weights loaded into GPTModel, and a sample from them (--weights).
int generate_from_weights(const Settings& s, const nn::GPT2Tokenizer& tokenizer) {
  const nn::GPTConfig cfg = nn::gpt2_config(s.model_name);
  manual_seed(s.seed);
  nn::GPTModel model(cfg);
  nn::load_gpt2_weights(model, s.weights);
  model.eval();
  manual_seed(s.seed);
  const std::string prompt = s.generate.empty() ? s.start_context : s.generate;
  const Tensor token_ids =
      generate(model, text_to_token_ids(prompt, tokenizer), s.max_new_tokens, cfg.context_length,
               s.temperature, s.top_k_or_all(), std::nullopt, nullptr, s.kv_cache);
  std::printf("Output text:\n %s\n", token_ids_to_text(token_ids, tokenizer).c_str());
  return 0;
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  Settings s;
  ember::examples::Flags app{
      "train_gpt: chapter 5 of the book, pretraining GPT-2 (124M) on The Verdict"};
  s.add_to(app);
  if (auto code = examples::parse(app, argc, argv)) return *code;

  {                                 // (what is thrown here ends in main's one line)
    examples::Stopwatch job_clock;  // the whole job, for the final line
    examples::set_threads(s.threads);
    check(s.generate.empty() || !s.weights.empty(), "--generate: needs --weights");
    check(s.model_name == Settings().model_name || !s.weights.empty(),
          "--model: needs --weights (the GPT-2 model whose weights it names)");
    const nn::GPT2Tokenizer tokenizer;
    if (!s.weights.empty()) {
      examples::check_input_file(s.weights, "--weights");
      return generate_from_weights(s, tokenizer);
    }
    if (!s.resume.empty()) examples::check_input_file(s.resume, "--resume");
    const nn::GPTConfig cfg{50257, s.context, s.emb_dim, s.n_heads, s.n_layers, s.drop_rate, false};

    // Cells 53-61: the text, split for training and validation, and its loaders (train:
    // shuffled, drop_last; validation: in order, all of it).
    const std::string text_data = read_text(s.text_file);
    const std::size_t split_idx = split_offset(text_data, s.train_ratio);
    std::printf("train_gpt: %s: %zu bytes, %zu tokens | GPTModel(%s)\n", s.text_file.c_str(),
                text_data.size(), tokenizer.encode(text_data, true).size(),
                examples::config_text(cfg).c_str());
    manual_seed(s.seed);
    const nn::DataLoader train_loader =
        create_dataloader_v1(text_data.substr(0, split_idx), tokenizer, s.batch, s.context,
                             s.context, /*shuffle=*/true, /*drop_last=*/true, "training");
    const nn::DataLoader val_loader =
        create_dataloader_v1(text_data.substr(split_idx), tokenizer, s.batch, s.context, s.context,
                             /*shuffle=*/false, /*drop_last=*/false, "validation");
    check(train_loader.size() > 0, "--batch: the training text has fewer than ", s.batch,
          " windows of --context ", s.context, " tokens (the loader drops a partial batch)");
    examples::check_training_memory(cfg, s.batch, "--emb-dim, --layers, --context, --batch");
    examples::make_output_directory(s.out);
    examples::check_output_files(
        s.out, s.save ? std::vector<std::string>{"checkpoint.safetensors", "loss.svg"}
                      : std::vector<std::string>{"loss.svg"});
    examples::remove_stale_temporaries(s.out + "/checkpoint.safetensors");
    // The GEMM rate before the job (print_job_line), once the settings are checked; its time is
    // not the job's.
    const examples::Stopwatch rate_clock;
    const double rate_before = gemm_rate(s.emb_dim, s.batch * s.context);
    const double not_the_job = rate_clock.seconds();

    if (!s.skip_initial && s.resume.empty()) {
      // Cells 11 and 15: the untrained model's text.
      manual_seed(s.seed);
      nn::GPTModel model(cfg);
      model.eval();
      const Tensor prompt = text_to_token_ids(s.start_context, tokenizer);
      std::optional<TimedPart> timed(kSampling);
      const Tensor token_ids =
          generate_text_simple(model, prompt, 10, cfg.context_length, s.kv_cache);
      count_generation(cfg, prompt.size(1), 10);
      timed.emplace(kEvaluation);
      std::printf("Output text:\n %s\n", token_ids_to_text(token_ids, tokenizer).c_str());
      // Cell 71: its losses.
      manual_seed(s.seed);
      NoGradGuard no_grad;
      const double train_loss = calc_loss_loader(train_loader, model);
      const double val_loss = calc_loss_loader(val_loader, model);
      timed.reset();
      std::printf("Training loss: %s\nValidation loss: %s\n", float_repr(train_loss).c_str(),
                  float_repr(val_loss).c_str());
      std::fflush(stdout);
    }

    // Cell 77: training (Ember's additions: the progress line, --resume, --save-every, the
    // checkpoint on Ctrl-C, --stop-after-epoch, --max-steps, --print-losses).
    manual_seed(s.seed);
    nn::GPTModel model(cfg);
    optim::AdamW optimizer(model.parameters(),
                           optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
    const examples::RunSettings settings = s.run_settings(text_data);
    History start;  // the book's zeros, or where the checkpoint stopped
    if (!s.resume.empty()) {
      start = load_checkpoint(s.resume, model, optimizer, settings, train_loader.size(),
                              s.batch * s.context, s.eval_freq);
      examples::check_resume_point(
          start.epochs_done,
          s.stop_after_epoch > 0 ? std::min(s.stop_after_epoch, s.epochs) : s.epochs, "epoch",
          "--epochs, --stop-after-epoch");
      if (s.max_steps > 0) {
        examples::check_resume_point(start.global_step + 1, s.max_steps, "step", "--max-steps");
      }
    }
    const std::string checkpoint_path = s.out + "/checkpoint.safetensors";
    if (s.save) {
      // The checkpoint holds the model's state dict and AdamW's two moments of every parameter: a
      // disk without room for it is said now, not after the training.
      uint64_t bytes = 0;
      auto nbytes = [](const Tensor& t) {
        return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
      };
      for (const auto& [name, t] : model.state_dict()) bytes += nbytes(t);
      for (const Tensor& p : model.parameters()) bytes += 2 * nbytes(p);
      examples::check_free_space(s.out, bytes, "train_gpt: the checkpoint",
                                 "free some space, choose another --out, or pass --no-save");
    }
    examples::Progress progress(s.epochs * train_loader.size(), s.print_every);
    const auto save = [&](const History& h) {
      if (!s.save) return;
      const TimedPart timed(kSaving);
      save_checkpoint(checkpoint_path, model, optimizer, h, settings);
    };
    const Extras extras{progress,       start,      s.stop_after_epoch, s.max_steps,
                        s.print_losses, s.kv_cache, s.save_every,       save};
    examples::catch_interrupt();  // Ctrl-C: finish the step, save, stop
    examples::Stopwatch clock;
    const History h =
        train_model_simple(model, train_loader, val_loader, optimizer, s.epochs, s.eval_freq,
                           s.eval_iter, s.start_context, tokenizer, extras);
    examples::release_interrupt();  // the checkpoint is saved: from here a Ctrl-C ends the program
    const double seconds = clock.seconds();
    std::printf("train_gpt: steps %lld in %.1f s (%s)\n", static_cast<long long>(h.global_step + 1),
                seconds, examples::duration_text(seconds).c_str());

    // Cell 79: epochs_seen = torch.linspace(0, num_epochs, len(train_losses)).
    if (!h.train_losses.empty()) {
      plot_losses(epochs_seen(s.epochs, h.train_losses.size()), h.track_tokens_seen, h.train_losses,
                  h.val_losses,
                  "train_gpt: " + std::filesystem::path(s.text_file).filename().string(),
                  s.out + "/loss.svg");
      std::printf("wrote %s/loss.svg\n", s.out.c_str());
    }
    // What the run wrote, and how to go on from it.
    const std::string wrote = s.save ? "wrote " + checkpoint_path : "no checkpoint (--no-save)";
    if (h.interrupted) {
      std::printf("interrupted (Ctrl-C) after step %lld: %s%s\n",
                  static_cast<long long>(h.global_step), wrote.c_str(),
                  s.save ? ("; --resume " + checkpoint_path + " continues the run").c_str() : "");
      return examples::kInterruptedExit;
    }
    if (h.stopped) {
      std::printf("stopped after step %lld; %s\n", static_cast<long long>(h.global_step),
                  wrote.c_str());
      print_job_line(cfg, s.batch * s.context, job_clock.seconds() - not_the_job, rate_before);
      return 0;
    }
    if (h.epochs_done < s.epochs) {
      std::printf("stopped after epoch %lld; %s\n", static_cast<long long>(h.epochs_done),
                  wrote.c_str());
      print_job_line(cfg, s.batch * s.context, job_clock.seconds() - not_the_job, rate_before);
      return 0;
    }
    std::printf("%s\n", wrote.c_str());
    std::fflush(stdout);
    print_job_line(cfg, s.batch * s.context, job_clock.seconds() - not_the_job, rate_before);
    if (examples::interrupted()) {  // Ctrl-C during the last save: the run is done and saved
      std::printf("interrupted (Ctrl-C) after the run's last save: no final samples\n");
      return examples::kInterruptedExit;
    }

    // Cells 86 and 115: decoding with the trained model, greedy, then with temperature and top-k.
    model.eval();
    Tensor token_ids = generate_text_simple(model, text_to_token_ids(s.start_context, tokenizer),
                                            25, cfg.context_length, s.kv_cache);

    std::printf("Output text (greedy):\n %s\n", token_ids_to_text(token_ids, tokenizer).c_str());
    manual_seed(s.seed);
    token_ids = generate(model, text_to_token_ids(s.start_context, tokenizer), s.max_new_tokens,
                         cfg.context_length, s.temperature, s.top_k_or_all(), std::nullopt, nullptr,
                         s.kv_cache);

    std::printf("Output text (temperature %s, top-k %lld):\n %s\n",
                float_repr(s.temperature).c_str(), static_cast<long long>(s.top_k),
                token_ids_to_text(token_ids, tokenizer).c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("train_gpt", [&] { return run(argc, argv); });
}
