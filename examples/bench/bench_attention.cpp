// bench_attention: the chapter's MultiHeadAttention (nn/attention.cpp) timed like
// examples/bench/torch_attention_bench.py times PyTorch's: forward alone under no-grad, and
// forward + backward of out.sum(), medians of --reps after two warm-up steps. One JSON line with
// the same keys as the PyTorch script, times in ms with 3 decimals, and the process's peak RSS.
//
//   bench_attention [--threads 1] [--batch 1] [--tokens 1024] [--dim 768] [--heads 12]
//                   [--reps 5] [--calls 1] [--composite 1]
// (--help lists the flags; a value out of its range, or sizes whose tensors would not fit in
// memory, are refused before any work.)
//
// Besides the wall-clock medians it prints the median process CPU time of the same reps
// (fwd_cpu_ms, fwdbwd_cpu_ms): on a machine busy with other work, CPU time at 1 thread is a
// steadier yardstick than wall time (at 2 threads it is the sum over both).
//
// --calls n times n calls per rep and reports the time per call (for the book-size module,
// B2 T6 d3, whose calls take microseconds); --composite 1 runs the book's composite attention
// instead of the fused kernel (MultiHeadAttention::fused_attention = false).
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/bench_util.h"
#include "examples/common/flags.h"
#include "nn/attention.h"

namespace {

using ember::bench::median;
using ember::bench::peak_rss_mb;

// CPU time of the whole process (all threads), in ms.
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

}  // namespace

// The command line; --help lists it.
struct Settings {
  int threads = 1, reps = 5, calls = 1, composite = 0;
  int64_t batch = 1, tokens = 1024, dim = 768, heads = 12;
  static constexpr int64_t kMaxSize = int64_t{1} << 16;
  static constexpr int kMaxReps = 1000000;

  void add_to(ember::examples::Flags& app) {
    using ember::examples::positive_option, ember::examples::range_option;
    positive_option(app, "--threads", threads, "threads for the kernels",
                    ember::examples::kMaxThreads);
    positive_option(app, "--batch", batch, "sequences in the input", kMaxSize);
    positive_option(app, "--tokens", tokens, "tokens per sequence (the module's context_length)",
                    kMaxSize);
    positive_option(app, "--dim", dim, "d_in = d_out", kMaxSize);
    positive_option(app, "--heads", heads, "attention heads (they divide --dim)", int64_t{1024});
    positive_option(app, "--reps", reps, "timed reps (the medians are reported)", kMaxReps);
    positive_option(app, "--calls", calls, "calls per rep (the time per call is reported)",
                    kMaxReps);
    range_option(app, "--composite", composite, 0, 1,
                 "1: the book's composite attention instead of the fused kernel");
  }

  // After parsing: the checks that involve several flags.
  void check_sizes() const {
    ember::check(dim % heads == 0, "--heads: expected a divisor of --dim ", dim, ", got ", heads);
    // The input, q, k, v, the context and their gradients; the composite's scores [B, H, T, T]
    // (with the softmax and their gradients); the four weight matrices and theirs; the mask.
    const double B = static_cast<double>(batch), T = static_cast<double>(tokens),
                 C = static_cast<double>(dim), H = static_cast<double>(heads);
    ember::bench::check_fits_in_memory(4 * (16 * B * T * C + 4 * B * H * T * T + 8 * C * C + T * T),
                                       "--batch, --tokens, --dim, --heads");
  }
};

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  using namespace ember;
  Settings s;
  ember::examples::Flags app{
      "bench_attention: the chapter's MultiHeadAttention, forward and backward, timed"};
  s.add_to(app);
  if (auto code = examples::parse(app, argc, argv)) return *code;
  s.check_sizes();
  const int threads = s.threads;
  const int64_t batch = s.batch, tokens = s.tokens, dim = s.dim, heads = s.heads;
  const int reps = s.reps, calls = s.calls;
  const bool composite = s.composite != 0;
  examples::set_threads(threads);
  manual_seed(0);
  nn::MultiHeadAttention m(dim, dim, tokens, 0.0, heads);
  m.fused_attention = !composite;
  Tensor x = randn({batch, tokens, dim}).requires_grad_(true);
  for (int i = 0; i < 2; ++i) m.forward(x).sum().backward();

  using clock = std::chrono::steady_clock;
  std::vector<double> fwd, fwdbwd, fwd_cpu, fwdbwd_cpu;
  for (int rep = 0; rep < reps; ++rep) {
    auto t = clock::now();
    double c0 = cpu_ms();
    for (int c = 0; c < calls; ++c) {
      NoGradGuard no_grad;
      m.forward(x);
    }
    fwd.push_back(std::chrono::duration<double, std::milli>(clock::now() - t).count() / calls);
    fwd_cpu.push_back((cpu_ms() - c0) / calls);
    t = clock::now();
    c0 = cpu_ms();
    for (int c = 0; c < calls; ++c) m.forward(x).sum().backward();
    fwdbwd.push_back(std::chrono::duration<double, std::milli>(clock::now() - t).count() / calls);
    fwdbwd_cpu.push_back((cpu_ms() - c0) / calls);
  }
  std::printf(
      "{\"impl\": \"ember%s\", \"threads\": %d, \"batch\": %ld, \"tokens\": %ld, \"dim\": %ld, "
      "\"heads\": %ld, \"fwd_ms\": %.3f, \"fwdbwd_ms\": %.3f, \"peak_rss_mb\": %.3f, "
      "\"fwd_cpu_ms\": %.3f, \"fwdbwd_cpu_ms\": %.3f}\n",
      composite ? "-composite" : "", threads, static_cast<long>(batch), static_cast<long>(tokens),
      static_cast<long>(dim), static_cast<long>(heads), median(fwd), median(fwdbwd), peak_rss_mb(),
      median(fwd_cpu), median(fwdbwd_cpu));
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("bench_attention", [&] { return run(argc, argv); });
}
