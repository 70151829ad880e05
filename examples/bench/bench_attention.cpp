// bench_attention: the chapter's MultiHeadAttention (nn/attention.cpp) timed like
// examples/bench/torch_attention_bench.py times PyTorch's: forward alone under no-grad, and
// forward + backward of out.sum(), medians of --reps after two warm-up steps. One JSON line with
// the same keys as the PyTorch script, times in ms with 3 decimals, and the process's peak RSS.
//
//   bench_attention [--threads 1] [--batch 1] [--tokens 1024] [--dim 768] [--heads 12]
//                   [--reps 5] [--calls 1] [--composite 1]
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
#include <cstdio>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/common/bench_util.h"
#include "examples/common/program.h"
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

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  int threads = 1, reps = 5, calls = 1;
  bool composite = false;
  int64_t batch = 1, tokens = 1024, dim = 768, heads = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    const long value = std::stol(argv[i + 1]);
    if (arg == "--threads") {
      threads = static_cast<int>(value);
    } else if (arg == "--batch") {
      batch = value;
    } else if (arg == "--tokens") {
      tokens = value;
    } else if (arg == "--dim") {
      dim = value;
    } else if (arg == "--heads") {
      heads = value;
    } else if (arg == "--reps") {
      reps = static_cast<int>(std::max(1L, value));
    } else if (arg == "--calls") {
      calls = static_cast<int>(std::max(1L, value));
    } else if (arg == "--composite") {
      composite = value != 0;
    } else {
      std::fprintf(stderr, "bench_attention: unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  using namespace ember;
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
