// libFuzzer target: optim::load_checkpoint on mutated checkpoints. The first byte chooses the
// optimizer and the scheduler the checkpoint is loaded into (as a program resuming training
// would build them); the rest is the file. Every input must be an ember::Error or a clean load,
// and a clean load must leave a consistent optimizer: every state tensor of its parameter's
// shape and dtype, every step a whole number, and the next optimizer and scheduler steps must
// run. A crash, a sanitizer report, another exception or an inconsistent state is a bug
// (reported by abort()).
//
// The seed corpus (tests/fuzz/corpus/checkpoint/) holds a checkpoint of every optimizer and
// scheduler after a few steps; it is written by this file compiled with
// -DEMBER_FUZZ_CHECKPOINT_SEEDS (see make_seeds below).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/io/safetensors.h"
#include "nn/layers.h"
#include "optim/optim.h"

namespace {

using namespace ember;

constexpr int kOptimizers = 6;  // SGD, SGD with momentum, Adam (amsgrad), AdamW, RMSprop, Adagrad
constexpr int kSchedulers = 6;  // none, StepLR, OneCycleLR, SequentialLR, ReduceLROnPlateau, Cosine

// What a training program builds before it resumes: a model, an optimizer over two groups (the
// Linear's weight and bias, then a float64 tensor) and a scheduler.
struct Setup {
  explicit Setup(uint8_t selector) {
    manual_seed(0);
    model = std::make_shared<nn::Linear>(4, 3);
    extra = zeros({2}, DType::Float64).requires_grad_();
    std::vector<optim::ParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{model->weight, model->bias});
    groups.emplace_back(std::vector<Tensor>{extra});
    switch (selector % kOptimizers) {
      case 0:
        optimizer = std::make_unique<optim::SGD>(groups, optim::SGDOptions(0.1));
        break;
      case 1:
        optimizer = std::make_unique<optim::SGD>(
            groups, optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
        break;
      case 2:
        optimizer = std::make_unique<optim::Adam>(groups, optim::AdamOptions(1e-2).amsgrad(true));
        break;
      case 3:
        optimizer = std::make_unique<optim::AdamW>(groups, optim::AdamWOptions(1e-2));
        break;
      case 4:
        optimizer = std::make_unique<optim::RMSprop>(
            groups, optim::RMSpropOptions(1e-2).momentum(0.5).centered(true));
        break;
      default:
        optimizer = std::make_unique<optim::Adagrad>(groups, optim::AdagradOptions(0.1));
        break;
    }
    switch ((selector / kOptimizers) % kSchedulers) {
      case 0:
        break;
      case 1:
        lr_scheduler = std::make_unique<optim::StepLR>(*optimizer, 2, 0.5);
        break;
      case 2: {
        optim::OneCycleLROptions options(0.1, 20);
        options.cycle_momentum = selector % kOptimizers != 5;  // Adagrad has no momentum
        lr_scheduler = std::make_unique<optim::OneCycleLR>(*optimizer, options);
        break;
      }
      case 3:
        warmup = std::make_unique<optim::LinearLR>(*optimizer, 0.1, 1.0, 3);
        cosine = std::make_unique<optim::CosineAnnealingLR>(*optimizer, 10);
        lr_scheduler = std::make_unique<optim::SequentialLR>(
            *optimizer, std::vector<optim::LRScheduler*>{warmup.get(), cosine.get()},
            std::vector<int64_t>{3});
        break;
      case 4:
        plateau = std::make_unique<optim::ReduceLROnPlateau>(*optimizer);
        break;
      default:
        lr_scheduler = std::make_unique<optim::CosineAnnealingLR>(*optimizer, 5, 1e-4);
        break;
    }
  }
  optim::StatefulScheduler* scheduler() {
    if (lr_scheduler) return lr_scheduler.get();
    return plateau.get();
  }
  // One training step: gradients, the optimizer's step, the scheduler's.
  void train_step() {
    Tensor x = ones({2, 4});
    Tensor y = model->forward(x);
    Tensor loss = (y * y).sum() + (extra * extra).sum();
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
    if (lr_scheduler) lr_scheduler->step();
    if (plateau) plateau->step(loss.item());
  }

  std::shared_ptr<nn::Linear> model;
  Tensor extra;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LRScheduler> warmup, cosine, lr_scheduler;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau;
};

[[noreturn]] void inconsistent(const char* what) {
  std::fprintf(stderr, "fuzz_checkpoint: inconsistent state after a clean load: %s\n", what);
  std::abort();
}

// The invariants a loaded optimizer must hold.
void check_consistent(Setup& s) {
  for (const optim::ParamGroup& g : s.optimizer->param_groups()) {
    for (const Tensor& p : g.params) {
      for (const auto& [key, t] : s.optimizer->state(p)) {
        if (!t.defined()) inconsistent("an undefined state tensor");
        if (key == "step") {
          if (t.numel() != 1) inconsistent("a step of more than one element");
          const double step = t.item();
          if (!std::isfinite(step) || step < 0 || step != std::trunc(step))
            inconsistent("a step that is not a whole number >= 0");
        } else if (t.shape() != p.shape() || t.dtype() != p.dtype()) {
          inconsistent("a state tensor that does not fit its parameter");
        }
      }
    }
  }
}

}  // namespace

#ifndef EMBER_FUZZ_CHECKPOINT_SEEDS

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  Setup s(data[0]);
  NamedTensorList model_state;
  bool loaded = false;
  try {
    SafetensorsFile file = parse_safetensors(data + 1, size - 1);
    optim::load_checkpoint(std::move(file), model_state, *s.optimizer, s.scheduler());
    loaded = true;
    check_consistent(s);
    s.model->load_state_dict(model_state, /*strict=*/false);
  } catch (const Error&) {
  }
  if (!loaded) return 0;
  // Training resumes: the loaded state is used. (Options loaded from the file may make the
  // values nan or inf, and a scheduler may have run out of steps: those are Errors or numbers,
  // never crashes.)
  try {
    for (int i = 0; i < 2; ++i) s.train_step();
    check_consistent(s);
    // And it saves again.
    (void)serialize_safetensors(s.model->state_dict());
    (void)s.optimizer->state_dict();
    if (s.scheduler()) (void)s.scheduler()->state_dict();
  } catch (const Error&) {
  }
  return 0;
}

#else

// Writes the seed corpus: for every optimizer and scheduler, a checkpoint after three steps,
// as a file whose first byte selects that setup. Usage: make_seeds DIR.
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  for (int selector = 0; selector < kOptimizers * kSchedulers; ++selector) {
    Setup s(static_cast<uint8_t>(selector));
    for (int i = 0; i < 3; ++i) s.train_step();
    const std::string path = std::string(argv[1]) + "/seed_" + std::to_string(selector);
    const std::string temp = path + ".tmp";
    optim::save_checkpoint(temp, s.model->state_dict(), *s.optimizer, s.scheduler(), 3);
    SafetensorsFile check = load_safetensors(temp);
    (void)check;
    std::FILE* in = std::fopen(temp.c_str(), "rb");
    std::FILE* out = std::fopen(path.c_str(), "wb");
    if (!in || !out) return 1;
    std::fputc(selector, out);
    for (int c; (c = std::fgetc(in)) != EOF;) std::fputc(c, out);
    std::fclose(in);
    if (std::fclose(out) != 0) return 1;
    std::remove(temp.c_str());
  }
  return 0;
}

#endif
