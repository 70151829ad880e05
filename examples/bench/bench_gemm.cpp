// bench_gemm: Ember's GEMM (core/kernels/gemm.cpp) beside OpenBLAS's sgemm, in the same process,
// at the shapes of GPT-2-size layers, at 1 and 2 threads. The two alternate rep by rep and the
// medians are compared, so a machine busy with something else slows both alike.
//
//   bench_gemm [--threads 1,2] [--reps 7] [--json] [--shapes 768x512x128bt,512x128x768at]
//
// Each shape is "M x N x K" (C[M, N] = A[M, K] B[K, N]); "B^T" reads B from a [N, K] matrix
// (a linear layer's weight) and "A^T" reads A from a [K, M] matrix (a weight gradient's
// activations), through strides on Ember's side and CblasTrans on OpenBLAS's. --shapes replaces
// the list: "MxNxK" with "at" and/or "bt" after it for a transposed A or B.
//
// OpenBLAS (Debian's pthread build) keeps its worker threads busy-waiting after each call for
// 2^28 cycles (~0.1 s) before they sleep. In one process that alternates with Ember, they spun on
// one of the two cores through Ember's next timed rep: Ember's 2-thread rate fell from ~100 to
// ~52 GFLOP/s in a third of the reps, whichever shape it was. OPENBLAS_THREAD_TIMEOUT=4 (2^4
// cycles, its minimum) makes them sleep at once; OpenBLAS reads it when the library is loaded,
// so without it the program sets it and starts itself again. (Ember's OpenMP workers spin for
// libgomp's default 300,000 iterations, well under a millisecond, before OpenBLAS's rep.)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/base/parallel.h"
#include "core/kernels/gemm.h"
#include "examples/common/bench_util.h"
#include "examples/common/program.h"

#ifdef EMBER_BENCH_WITH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace {

using ember::bench::median;

struct Shape {
  int64_t M, N, K;
  bool a_t, b_t;
  std::string name() const {
    std::ostringstream s;
    s << M << "x" << N << "x" << K << (a_t ? " A^T" : "") << (b_t ? " B^T" : "");
    return s.str();
  }
};

// "768x512x128bt" -> {768, 512, 128, false, true}; false if it is not a shape.
bool parse_shape(const std::string& text, Shape& out) {
  long long m = 0, n = 0, k = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3) return false;
  const std::string rest = text.substr(static_cast<std::size_t>(used));
  if (m < 1 || n < 1 || k < 1 || m * n > (1LL << 28) || m * k > (1LL << 28) ||
      n * k > (1LL << 28)) {
    return false;
  }
  if (rest != "" && rest != "at" && rest != "bt" && rest != "atbt") return false;
  out = {m, n, k, rest.find("at") != std::string::npos, rest.find("bt") != std::string::npos};
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Result {
  double ember_gflops = 0, blas_gflops = 0;
};

Result run(const Shape& s, int threads, int reps) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(s.M * s.K), b(s.K * s.N), c(s.M * s.N);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  // Row-major strides of A [M, K] (or A^T stored [K, M]) and B [K, N] (or B^T stored [N, K]).
  const int64_t lda_row = s.a_t ? 1 : s.K, lda_col = s.a_t ? s.M : 1;
  const int64_t ldb_row = s.b_t ? 1 : s.N, ldb_col = s.b_t ? s.K : 1;
  const double flop = 2.0 * s.M * s.N * s.K;

  auto ember = [&] {
    ember::kernels::gemm<float>(s.M, s.N, s.K, a.data(), lda_row, lda_col, b.data(), ldb_row,
                                ldb_col, c.data(), s.N, false);
  };
#ifdef EMBER_BENCH_WITH_OPENBLAS
  auto blas = [&] {
    cblas_sgemm(CblasRowMajor, s.a_t ? CblasTrans : CblasNoTrans, s.b_t ? CblasTrans : CblasNoTrans,
                s.M, s.N, s.K, 1.0f, a.data(), s.a_t ? s.M : s.K, b.data(), s.b_t ? s.K : s.N, 0.0f,
                c.data(), s.N);
  };
  openblas_set_num_threads(threads);
#endif
  ember::examples::set_threads(threads);

  // Enough calls per rep for ~20 ms of work at 100 GFLOP/s.
  const int calls = std::max(1, static_cast<int>(2e9 / flop));
  std::vector<double> ours, theirs;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up
    auto t = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) ember();
    if (rep >= 0) ours.push_back(flop * calls / seconds_since(t) / 1e9);
#ifdef EMBER_BENCH_WITH_OPENBLAS
    t = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) blas();
    if (rep >= 0) theirs.push_back(flop * calls / seconds_since(t) / 1e9);
#endif
  }
  return {median(ours), theirs.empty() ? 0.0 : median(theirs)};
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
#ifdef EMBER_BENCH_WITH_OPENBLAS
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr,
                 "bench_gemm: could not restart with OPENBLAS_THREAD_TIMEOUT=4; OpenBLAS's "
                 "idle threads may spin through Ember's reps\n");
  }
#endif
  std::vector<int> thread_counts = {1, 2};
  int reps = 7;
  bool json = false;
  std::vector<Shape> shapes = {
      {1024, 1024, 1024, false, false}, {1024, 1024, 1024, true, false},
      {1024, 1024, 1024, false, true},  {1024, 768, 768, false, false},
      {1024, 2304, 768, false, false},  {1024, 1024, 64, false, false},
      {1024, 64, 1024, false, false},   {8, 50257, 768, false, true},
  };
  const char* usage =
      "usage: bench_gemm [--threads 1,2] [--reps 7] [--json] [--shapes MxNxK[at][bt],...]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');)
        thread_counts.push_back(std::stoi(item));
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--shapes" && i + 1 < argc) {
      shapes.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) {
        Shape shape{};
        if (!parse_shape(item, shape)) {
          std::fprintf(stderr, "bench_gemm: '%s' is not a shape MxNxK[at][bt]\n%s", item.c_str(),
                       usage);
          return 2;
        }
        shapes.push_back(shape);
      }
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  if (!json) {
    std::printf("Ember GEMM (%s micro-kernel) vs OpenBLAS sgemm, median GFLOP/s of %d reps\n",
                ember::kernels::gemm_isa(), reps);
    std::printf(
        "| shape (M x N x K) | threads | Ember | OpenBLAS | ratio |\n|---|---|---|---|---|\n");
  }
  for (int threads : thread_counts) {
    for (const Shape& s : shapes) {
      const Result r = run(s, threads, reps);
      const double ratio = r.blas_gflops > 0 ? r.ember_gflops / r.blas_gflops : 0.0;
      if (json) {
        std::printf(
            "{\"shape\": \"%s\", \"threads\": %d, \"ember_gflops\": %.3f, \"openblas_gflops\": "
            "%.3f, \"ratio\": %.3f}\n",
            s.name().c_str(), threads, r.ember_gflops, r.blas_gflops, ratio);
      } else {
        std::printf("| %s | %d | %.1f | %.1f | %.2fx |\n", s.name().c_str(), threads,
                    r.ember_gflops, r.blas_gflops, ratio);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("bench_gemm", [&] { return run(argc, argv); });
}
