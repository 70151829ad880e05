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
// (--help lists the flags; --steps is at least 3. A value out of its range, sizes whose tensors
// would not fit in memory, or a --reference file without a "losses" list are refused before any
// work.)
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/kernels/gemm.h"
#include "examples/common/bench_util.h"
#include "examples/common/flags.h"
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
    ember::check(false, "--config: expected ch5 or small, got '", name, "'");
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

// The "losses" list of the PyTorch script's JSON line (the last line of the file that has one),
// read before any work: a file that cannot be read, or holds no such list of finite positive
// numbers, is an ember::Error naming --reference.
std::vector<double> reference_losses(const std::string& path) {
  const std::string text = ember::examples::read_text_file(path, "--reference", 1 << 20);
  std::istringstream lines(text);
  std::string line, last;
  while (std::getline(lines, line))
    if (line.find("\"losses\"") != std::string::npos) last = line;
  const auto open = last.empty() ? std::string::npos : last.find('[', last.find("\"losses\""));
  const auto close = open == std::string::npos ? std::string::npos : last.find(']', open);
  ember::check(close != std::string::npos, "--reference: '", path,
               "' holds no \"losses\": [...] list (expected the JSON line of "
               "examples/bench/torch_train_bench.py)");
  std::vector<double> losses;
  for (std::string item : ember::examples::split_list(last.substr(open + 1, close - open - 1))) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    double loss = 0;
    ember::check(ember::examples::parse_number(item, loss) && loss > 0, "--reference: '", path,
                 "': expected a list of finite positive losses, got '", item, "'");
    losses.push_back(loss);
  }
  return losses;
}

// The command line; --help lists it. The model's and optimizer's flags override the config's
// values (whatever their order on the command line).
struct Settings {
  std::string config = "small", reference;
  int threads = 1, steps = 6;
  bool profile = false;
  std::optional<int64_t> batch, context, vocab, emb, heads, layers;
  std::optional<double> dropout, lr, clip;
  static constexpr int kMaxSteps = 1000000;

  void add_to(ember::examples::Flags& app) {
    using namespace ember::examples;
    option(app, "--config", config,
           "ch5 (the book's chapter-5 GPT-124M) or small (nanoGPT's "
           "shakespeare-char CPU config)")
        .check([](const std::string& name) {
          return name == "ch5" || name == "small" ? std::string()
                                                  : "expected ch5 or small, got '" + name + "'";
        });
    range_option(app, "--steps", steps, 3, kMaxSteps,
                 "training steps: two warm-up steps, then the timed ones (at least one)");
    positive_option(app, "--threads", threads, "threads for the kernels", kMaxThreads);
    text_option(app, "--reference", reference,
                "the JSON line of torch_train_bench.py: adds the largest relative difference "
                "of the losses")
        .type_name("FILE");
    app.add_flag("--profile", profile,
                 "one more step under autograd::profiler, its table on stderr");
    auto override_option = [&app](const std::string& name, auto& value, auto range,
                                  const std::string& help) {
      app.add_option(name, value, help + " (default: the config's)").check(range);
    };
    override_option("--batch", batch, number_in<int64_t>(0, kMaxBatch, true), "sequences per step");
    override_option("--context", context, number_in<int64_t>(0, int64_t{1} << 17, true),
                    "context_length");
    override_option("--vocab", vocab, number_in<int64_t>(0, int64_t{1} << 20, true), "vocab_size");
    override_option("--emb", emb, number_in<int64_t>(0, int64_t{1} << 16, true), "emb_dim");
    override_option("--heads", heads, number_in<int64_t>(0, 1024, true),
                    "n_heads (they divide --emb)");
    override_option("--layers", layers, number_in<int64_t>(0, 1024, true), "n_layers");
    override_option("--dropout", dropout, number_in<double>(0.0, 0.99), "drop_rate");
    override_option("--lr", lr, number_in<double>(0.0, std::numeric_limits<double>::max(), true),
                    "AdamW learning rate");
    override_option("--clip", clip,
                    number_in<double>(0.0, std::numeric_limits<double>::max(), true),
                    "clip_grad_norm_'s max norm");
  }

  // After parsing: the config with the flags' values in it, refused when emb_dim is not a multiple
  // of n_heads or when its tensors would not fit in memory.
  TrainConfig train_config() const {
    TrainConfig c = config_named(config);
    ember::nn::GPTConfig& m = c.model;
    c.batch = batch.value_or(c.batch);
    m.context_length = context.value_or(m.context_length);
    m.vocab_size = vocab.value_or(m.vocab_size);
    m.emb_dim = emb.value_or(m.emb_dim);
    m.n_heads = heads.value_or(m.n_heads);
    m.n_layers = layers.value_or(m.n_layers);
    m.drop_rate = dropout.value_or(m.drop_rate);
    c.lr = lr.value_or(c.lr);
    c.clip = clip.value_or(c.clip);
    ember::check(m.emb_dim % m.n_heads == 0, "--heads: expected a divisor of the embedding size ",
                 m.emb_dim, " (--emb), got ", m.n_heads);
    // The parameters with their gradients and AdamW's two moments; per layer the activations
    // kept for backward (a few dozen [B, T, C] tensors and the attention's [B, H, T, T]); the
    // logits with their softmax and gradient.
    const double B = static_cast<double>(c.batch), T = static_cast<double>(m.context_length),
                 C = static_cast<double>(m.emb_dim), V = static_cast<double>(m.vocab_size),
                 H = static_cast<double>(m.n_heads), L = static_cast<double>(m.n_layers);
    const double parameters = L * (12 * C * C + 13 * C) + 2 * V * C + T * C;
    const double activations = L * (20 * B * T * C + 4 * B * H * T * T) + 3 * B * T * V;
    ember::bench::check_fits_in_memory(
        4 * (4 * parameters + activations),
        "--config, --batch, --context, --vocab, --emb, --heads, --layers");
    return c;
  }
};

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  Settings s;
  ember::examples::Flags app{"bench_train: whole training steps of the chapter-4 GPTModel, timed"};
  s.add_to(app);
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
  const TrainConfig c = s.train_config();
  const std::vector<double> ref =
      s.reference.empty() ? std::vector<double>() : reference_losses(s.reference);
  const std::string& config_name = s.config;
  const int threads = s.threads, steps = s.steps;
  const bool profile = s.profile;

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
  if (!s.reference.empty()) {
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
