// bench_train: whole training steps of the chapter-4 GPTModel (nn/gpt.cpp), timed like
// examples/bench/torch_train_bench.py times the book's PyTorch model. Each step is what a
// training loop runs (chapter 5's train_model_simple, plus clipping):
//   logits = model(inputs); loss = cross_entropy(logits.flatten(0, 1), targets.flatten());
//   loss.backward(); clip_grad_norm_(model.parameters(), clip); optimizer.step();
//   optimizer.zero_grad()
// Configs (--config):
//   ch5    the book's chapter-5 run: GPT-124M (vocab 50257, emb 768, 12 heads, 12 layers),
//          context 256, batch 2, dropout 0.1, AdamW(lr 4e-4, weight_decay 0.1), clip 1.0
//   small  nanoGPT's shakespeare-char CPU config: vocab 65, context 64, emb 128, 4 heads,
//          4 layers, no dropout, batch 12, AdamW(lr 1e-3, betas (0.9, 0.99), weight_decay 0.1),
//          clip 1.0
// Both sides start from manual_seed(123) and read the same token stream, a formula rather than a
// file: token[step][b][t] = (31 b + 17 t + 7 step + (b t) % 5) % vocab for t <= context; the
// inputs are t < context, the targets t >= 1. So the losses agree (dropout masks included).
//
// Reported (one JSON line, the same keys as the PyTorch script): the median ms per step over the
// steps after two warm-up steps (and the median process CPU ms), tokens per second, peak RSS (MB),
// minor page faults per timed step (getrusage; step_faults lists every step's), the allocator's big
// buffers (memory_stats(): the most in use at once, and those kept for reuse after the timed
// steps), the losses of every step, the step's FLOPs (its matrix products: 6 x weights x tokens for
// the linear layers and out_head, 3 x the causal QK^T and AV of every layer), and its efficiency:
// FLOPs / step time / Ember's own sgemm rate, measured in the same process at 1024 x 1024 x 1024
// before and after the steps, the higher of the two (as scripts/bench reports bench_attention's "%
// of Ember's sgemm rate"); gemm_isa names the GEMM's kernels (avx512, or avx2 on CPUs without
// AVX-512 or with EMBER_CPU_CAPABILITY=avx2: core/base/cpu.h); cpu_efficiency is the same ratio
// by process CPU time per thread, steadier on a machine busy with other work. --reference FILE
// reads the PyTorch script's JSON line and adds the largest relative difference between the two
// sides' losses.
// --profile runs one more step after the timed ones under autograd::profiler and prints its
// key_averages() table (sorted by self time, every row: one step's ops are a few dozen names) on
// stderr; the figures stay those of the unrecorded steps.
//
//   bench_train [--config ch5|small] [--steps 6] [--threads 1] [--reference FILE] [--profile]
//               [--batch B] [--context T] [--vocab V] [--emb C] [--heads H] [--layers L]
//               [--dropout p] [--lr x] [--clip x]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/kernels/gemm.h"
#include "examples/common/bench_util.h"
#include "examples/common/program.h"
#include "examples/common/step_profiler.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "optim/optim.h"

namespace {

using ember::bench::median;
using ember::bench::peak_rss_mb;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

// CPU time of the whole process (all threads), in ms: on a busy machine a steadier yardstick than
// wall time at 1 thread (at 2 threads, the sum over both).
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

struct TrainConfig {
  ember::nn::GPTConfig model;
  int64_t batch = 2;
  double lr = 4e-4, beta2 = 0.999, weight_decay = 0.1, clip = 1.0;
};

TrainConfig config_named(const std::string& name) {
  TrainConfig c;
  if (name == "ch5") {
    c.model = ember::nn::GPT_CONFIG_124M;
    c.model.context_length = 256;
  } else if (name == "small") {
    c.model = {65, 64, 128, 4, 4, 0.0, false};
    c.batch = 12;
    c.lr = 1e-3;
    c.beta2 = 0.99;
  } else {
    std::fprintf(stderr, "bench_train: unknown config %s (ch5 or small)\n", name.c_str());
    std::exit(2);
  }
  return c;
}

// The step's inputs and targets, [batch, context] int64 each.
std::pair<ember::Tensor, ember::Tensor> batch_of(const TrainConfig& c, int step) {
  std::vector<int64_t> inputs, targets;
  const int64_t T = c.model.context_length, V = c.model.vocab_size;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t t = 0; t <= T; ++t) {
      const int64_t token = (31 * b + 17 * t + 7 * step + (b * t) % 5) % V;
      if (t < T) inputs.push_back(token);
      if (t > 0) targets.push_back(token);
    }
  }
  return {ember::from_vector(inputs, {c.batch, T}), ember::from_vector(targets, {c.batch, T})};
}

// The matrix products of one step (forward and backward).
double step_flops(const TrainConfig& c) {
  const double N = static_cast<double>(c.batch * c.model.context_length);
  const double C = static_cast<double>(c.model.emb_dim),
               V = static_cast<double>(c.model.vocab_size);
  const double T = static_cast<double>(c.model.context_length);
  const double L = static_cast<double>(c.model.n_layers);
  const double weights = L * 12 * C * C + C * V;  // qkv, out_proj, ff (4C x C twice); out_head
  const double attention = L * 2 * static_cast<double>(c.batch) * T * T * C;  // causal QK^T, AV
  return 6 * weights * N + 3 * attention;
}

// Ember's sgemm rate (GFLOP/s) at 1024^3, the median of 7 products after a warm-up.
// Also the rate by process CPU time per thread (steadier on a busy machine).
std::pair<double, double> sgemm_gflops(int threads) {
  // The kernel mm runs, on buffers of its own: tensors would draw on the allocator's kept
  // memory and change how the training steps' buffers land on it (and so their page faults).
  // Constant operands: FMA timing does not depend on the values.
  constexpr int64_t n = 1024;
  const std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f);
  std::vector<float> c(n * n);
  auto product = [&] {
    ember::kernels::gemm<float>(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false);
  };
  product();
  std::vector<double> rates, cpu_rates;
  const double flop = 2.0 * n * n * n;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t = clock_type::now();
    const double c0 = cpu_ms();
    product();
    rates.push_back(flop / (ms_since(t) * 1e-3) / 1e9);
    cpu_rates.push_back(flop / ((cpu_ms() - c0) / threads * 1e-3) / 1e9);
  }
  return {median(rates), median(cpu_rates)};
}

// The "losses" list of the PyTorch script's JSON line.
std::vector<double> reference_losses(const std::string& path) {
  std::ifstream file(path);
  std::string line, last;
  while (std::getline(file, line))
    if (line.find("\"losses\"") != std::string::npos) last = line;
  std::vector<double> losses;
  const auto open = last.find('[', last.find("\"losses\""));
  if (open == std::string::npos) return losses;
  std::istringstream in(last.substr(open + 1, last.find(']', open) - open - 1));
  for (std::string item; std::getline(in, item, ',');) losses.push_back(std::stod(item));
  return losses;
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  std::string config_name = "small", reference;
  int threads = 1, steps = 6;
  bool profile = false;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--profile") {
      profile = true;
      continue;
    }
    if (i + 1 == argc) {
      std::fprintf(stderr, "bench_train: %s needs a value\n", arg.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    if (arg == "--config") {
      config_name = value;
    } else if (arg == "--threads") {
      threads = std::stoi(value);
    } else if (arg == "--steps") {
      steps = std::max(3, std::stoi(value));
    } else if (arg == "--reference") {
      reference = value;
    } else {
      overrides.emplace_back(arg, value);
    }
  }
  TrainConfig c = config_named(config_name);
  for (const auto& [arg, value] : overrides) {
    if (arg == "--batch")
      c.batch = std::stol(value);
    else if (arg == "--context")
      c.model.context_length = std::stol(value);
    else if (arg == "--vocab")
      c.model.vocab_size = std::stol(value);
    else if (arg == "--emb")
      c.model.emb_dim = std::stol(value);
    else if (arg == "--heads")
      c.model.n_heads = std::stol(value);
    else if (arg == "--layers")
      c.model.n_layers = std::stol(value);
    else if (arg == "--dropout")
      c.model.drop_rate = std::stod(value);
    else if (arg == "--lr")
      c.lr = std::stod(value);
    else if (arg == "--clip")
      c.clip = std::stod(value);
    else {
      std::fprintf(stderr, "bench_train: unknown option %s\n", arg.c_str());
      return 2;
    }
  }

  using namespace ember;
  examples::set_threads(threads);
  manual_seed(123);
  nn::GPTModel model(c.model);
  model.train();
  const std::vector<Tensor> params = model.parameters();
  optim::AdamW opt(params,
                   optim::AdamWOptions(c.lr).betas({0.9, c.beta2}).weight_decay(c.weight_decay));

  // One step; returns its loss.
  auto train_step = [&](int step) {
    auto [inputs, targets] = batch_of(c, step);
    Tensor logits = model.forward(inputs);
    Tensor loss = nn::functional::cross_entropy(logits.flatten(0, 1), targets.flatten());
    logits = Tensor();
    loss.backward();
    optim::clip_grad_norm_(params, c.clip);
    opt.step();
    opt.zero_grad();
    return loss.item();
  };

  const std::pair<double, double> sgemm_before = sgemm_gflops(threads);
  std::vector<double> times, cpu_times, losses;
  std::vector<long> step_faults;
  long faults_before = 0;
  for (int step = 0; step < steps; ++step) {
    if (step == 2) faults_before = minor_faults();
    const auto t = clock_type::now();
    const double c0 = cpu_ms();
    const long f0 = minor_faults();
    losses.push_back(train_step(step));
    step_faults.push_back(minor_faults() - f0);
    if (step >= 2) {
      times.push_back(ms_since(t));
      cpu_times.push_back(cpu_ms() - c0);
    }
  }
  const double faults = static_cast<double>(minor_faults() - faults_before) / (steps - 2);
  const double rss = peak_rss_mb();
  const MemoryStats memory = memory_stats();
  if (profile) {  // one more step, recorded: its table on stderr
    examples::StepProfiler profiler(true, steps - 1, steps, /*rows=*/-1);
    profiler.before_step(steps);
    train_step(steps);
    if (auto table = profiler.after_step(steps)) std::fprintf(stderr, "%s\n", table->c_str());
  }
  const double flops = step_flops(c);
  const double ms = median(times);
  const double cpu_ms_step = median(cpu_times) / threads;
  // The sgemm rate measured after the steps and again before them (sgemm_before, taken once the
  // model is built): the higher of the two, so that a moment when this machine's second core was
  // busy with other work does not make the step look more efficient than it is.
  const auto [after_gflops, after_cpu_gflops] = sgemm_gflops(threads);
  const double gflops = std::max(after_gflops, sgemm_before.first);
  const double cpu_gflops = std::max(after_cpu_gflops, sgemm_before.second);

  std::ostringstream out;
  out.precision(9);
  out << "{\"impl\": \"ember\", \"config\": \"" << config_name << "\", \"threads\": " << threads
      << ", \"steps\": " << steps << ", \"step_ms\": " << ms
      << ", \"step_cpu_ms\": " << median(cpu_times) << ", \"tokens_per_s\": "
      << static_cast<double>(c.batch * c.model.context_length) / (ms * 1e-3)
      << ", \"peak_rss_mb\": " << rss
      << ", \"mapped_peak_mb\": " << static_cast<double>(memory.mapped_peak) / (1 << 20)
      << ", \"mapped_kept_mb\": " << static_cast<double>(memory.mapped_kept) / (1 << 20)
      << ", \"faults_per_step\": " << faults << ", \"gemm_isa\": \"" << kernels::gemm_isa() << "\""
      << ", \"step_gflop\": " << flops / 1e9 << ", \"sgemm_gflops\": " << gflops
      << ", \"efficiency\": " << flops / (ms * 1e-3) / 1e9 / gflops
      << ", \"cpu_efficiency\": " << flops / (cpu_ms_step * 1e-3) / 1e9 / cpu_gflops
      << ", \"losses\": [";
  for (std::size_t i = 0; i < losses.size(); ++i) out << (i ? ", " : "") << losses[i];
  out << "], \"step_faults\": [";
  for (std::size_t i = 0; i < step_faults.size(); ++i) out << (i ? ", " : "") << step_faults[i];
  out << "]";
  if (!reference.empty()) {
    const std::vector<double> ref = reference_losses(reference);
    double worst = 0;
    const std::size_t n = std::min(ref.size(), losses.size());
    for (std::size_t i = 0; i < n; ++i)
      worst = std::max(worst, std::abs(losses[i] - ref[i]) / std::abs(ref[i]));
    out << ", \"reference_losses\": " << n << ", \"max_rel_loss_diff\": " << worst;
  }
  out << "}";
  std::printf("%s\n", out.str().c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("bench_train", [&] { return run(argc, argv); });
}
