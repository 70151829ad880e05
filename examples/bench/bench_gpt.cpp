// bench_gpt: chapter 4's GPT_CONFIG_124M model (nn/gpt.cpp) timed like
// examples/bench/torch_gpt_bench.py times the book's PyTorch code:
//   construct_s  manual_seed(123); GPTModel(GPT_CONFIG_124M)   (163M random numbers)
//   forward_s    model.forward(batch) on the book's batch, in training mode with autograd on, as
//                the book's first call (dropout 0.1 drawn)
//   generate_s   model.eval(); generate_text_simple(model, [[15496, 11, 314, 716]], 6, 1024)
//   randn_s      manual_seed(123); randn({163009536}): as many normals as the model has
//                parameters, from the generator alone (timed first, freed before the model)
// Construction is timed --reps times (the previous model freed first), forward and generation
// --reps times each after one warm-up call; medians in seconds. One JSON line with the same keys
// as the PyTorch script, and the process's peak RSS.
//
//   bench_gpt [--threads 1] [--reps 3]
// (--help lists the flags; a value out of its range is refused before any work.)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/bench_util.h"
#include "examples/common/flags.h"
#include "nn/gpt.h"

namespace {

using ember::bench::median;
using ember::bench::peak_rss_mb;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// The command line; --help lists it.
struct Settings {
  int threads = 1, reps = 3;

  void add_to(ember::examples::Flags& app) {
    using namespace ember::examples;
    positive_option(app, "--threads", threads, "threads for the kernels", kMaxThreads);
    positive_option(app, "--reps", reps,
                    "timed reps of each measurement (the medians are reported)", 1000);
  }
};

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  Settings s;
  ember::examples::Flags app{
      "bench_gpt: chapter 4's GPT-124M timed: construction, forward, generation, randn"};
  s.add_to(app);
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
  const int threads = s.threads, reps = s.reps;
  using namespace ember;
  using clock = std::chrono::steady_clock;
  examples::set_threads(threads);

  std::vector<double> randn_times;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t = clock::now();
    manual_seed(123);
    const Tensor normals = randn({163009536});
    randn_times.push_back(seconds_since(t));
  }

  std::vector<double> construct;
  std::shared_ptr<nn::GPTModel> model;
  for (int rep = 0; rep < reps; ++rep) {
    model.reset();  // at most one model alive, as in the PyTorch script
    const auto t = clock::now();
    manual_seed(123);
    model = std::make_shared<nn::GPTModel>(nn::GPT_CONFIG_124M);
    construct.push_back(seconds_since(t));
  }

  const Tensor batch = tensor({{6109, 3626, 6100, 345}, {6109, 1110, 6622, 257}}, DType::Int64);
  model->train();
  model->forward(batch);  // warm-up
  std::vector<double> forward;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t = clock::now();
    model->forward(batch);
    forward.push_back(seconds_since(t));
  }

  model->eval();
  const Tensor start = tensor({{15496, 11, 314, 716}}, DType::Int64);
  const int64_t context = nn::GPT_CONFIG_124M.context_length;
  const Tensor out = nn::generate_text_simple(*model, start, 6, context);  // warm-up
  std::vector<double> generate;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t = clock::now();
    nn::generate_text_simple(*model, start, 6, context);
    generate.push_back(seconds_since(t));
  }

  std::string generated;
  for (int64_t id : out.to_vector<int64_t>()) {
    generated += (generated.empty() ? "" : ", ") + std::to_string(id);
  }
  std::printf(
      "{\"impl\": \"ember\", \"threads\": %d, \"construct_s\": %.4f, \"forward_s\": %.4f, "
      "\"generate_s\": %.4f, \"randn_s\": %.4f, \"generated\": [%s], \"peak_rss_mb\": %.1f}\n",
      threads, median(construct), median(forward), median(generate), median(randn_times),
      generated.c_str(), peak_rss_mb());
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("bench_gpt", [&] { return run(argc, argv); });
}
