// bench_gemm: Ember's GEMM (core/kernels/gemm.cpp) beside OpenBLAS's sgemm, in the same process,
// at the shapes of GPT-2-size layers, at 1 and 2 threads. The two alternate rep by rep and the
// medians are compared, so a machine busy with something else slows both alike.
//
//   bench_gemm [--threads 1,2] [--reps 7] [--json] [--shapes 768x512x128bt,512x128x768at]
// (--help lists the flags; a thread count out of [1, 256], or a shape that is not one or whose
// matrices would not fit in memory, is refused before any work.)
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
//
// OpenBLAS chooses its kernels by CPU model when it is loaded, and a version older than the CPU
// falls back to generic ones (Prescott's SSE3 sgemm, a quarter of the AVX-512 rate). The output
// names the kernels OpenBLAS runs, and a warning says when they are such a fallback
// (OPENBLAS_CORETYPE chooses others; scripts/bench sets it).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/base/parallel.h"
#include "core/kernels/gemm.h"
#include "examples/common/bench_util.h"
#include "examples/common/flags.h"

#ifdef EMBER_BENCH_WITH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
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

// "768x512x128bt" -> {768, 512, 128, false, true}; false if it is not a shape MxNxK[at][bt] or if
// a matrix would hold more than 2^28 floats (1 GiB).
bool parse_shape(const std::string& text, Shape& out) {
  static const std::regex pattern("([0-9]+)x([0-9]+)x([0-9]+)(at)?(bt)?");
  std::smatch m;
  if (!std::regex_match(text, m, pattern)) return false;
  constexpr int64_t kMaxElements = int64_t{1} << 28;
  int64_t size[3] = {};
  for (int i = 0; i < 3; ++i) {
    if (!ember::examples::parse_number(m[i + 1].str(), size[i]) || size[i] < 1 ||
        size[i] > kMaxElements) {
      return false;
    }
  }
  const auto [M, N, K] = size;
  if (M * N > kMaxElements || M * K > kMaxElements || N * K > kMaxElements) return false;
  out = {M, N, K, m[4].matched, m[5].matched};
  return true;
}

// The shape as --shapes spells it: "768x512x128bt".
std::string shape_text(const Shape& s) {
  return std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) +
         (s.a_t ? "at" : "") + (s.b_t ? "bt" : "");
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

// The command line; --help lists it.
struct Settings {
  std::vector<int> thread_counts = {1, 2};
  int reps = 7;
  bool json = false;
  std::vector<Shape> shapes = {
      {1024, 1024, 1024, false, false}, {1024, 1024, 1024, true, false},
      {1024, 1024, 1024, false, true},  {1024, 768, 768, false, false},
      {1024, 2304, 768, false, false},  {1024, 1024, 64, false, false},
      {1024, 64, 1024, false, false},   {8, 50257, 768, false, true},
  };

  void add_to(ember::examples::Flags& app) {
    using namespace ember::examples;
    number_list_option(app, "--threads", thread_counts, 1, kMaxThreads,
                       "thread counts to run every shape at, comma-separated");
    positive_option(app, "--reps", reps, "timed reps per shape (the medians are compared)",
                    1000000);
    app.add_flag("--json", json, "one JSON line per shape and thread count instead of a table");
    std::string defaults;
    for (const Shape& shape : shapes) {
      if (!defaults.empty()) defaults += ',';
      defaults += shape_text(shape);
    }
    list_option(app, "--shapes", shapes, parse_shape,
                "expected a comma-separated list of shapes MxNxK[at][bt], each matrix at most "
                "2^28 floats",
                defaults,
                "the shapes, replacing the list: MxNxK (C[M, N] = A[M, K] B[K, N]), \"at\" after "
                "it for A read from [K, M], \"bt\" for B read from [N, K]");
  }
};

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  Settings s;
  ember::examples::Flags app{"bench_gemm: Ember's GEMM beside OpenBLAS's sgemm, in GFLOP/s"};
  s.add_to(app);
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
#ifdef EMBER_BENCH_WITH_OPENBLAS
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr,
                 "bench_gemm: could not restart with OPENBLAS_THREAD_TIMEOUT=4; OpenBLAS's "
                 "idle threads may spin through Ember's reps\n");
  }
#endif
  double largest = 0;  // the bytes of the three matrices of the largest shape
  for (const Shape& shape : s.shapes) {
    largest = std::max(largest, 4.0 * static_cast<double>(shape.M * shape.K + shape.K * shape.N +
                                                          shape.M * shape.N));
  }
  ember::bench::check_fits_in_memory(largest, "--shapes");
  const std::vector<int>& thread_counts = s.thread_counts;
  const std::vector<Shape>& shapes = s.shapes;
  const int reps = s.reps;
  const bool json = s.json;
  std::string blas_core = "none";
#ifdef EMBER_BENCH_WITH_OPENBLAS
  blas_core = openblas_get_corename();
  std::string lower = blas_core;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* generic : {"prescott", "core2", "nehalem", "katmai", "coppermine"}) {
    if (lower == generic) {
      std::fprintf(stderr,
                   "bench_gemm: OpenBLAS runs its generic %s kernels here (it does not know this "
                   "CPU): OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) gives its fast "
                   "ones\n",
                   blas_core.c_str());
    }
  }
#endif
  if (!json) {
    std::printf(
        "Ember GEMM (%s micro-kernel) vs OpenBLAS sgemm (its %s kernels), median GFLOP/s of %d "
        "reps\n",
        ember::kernels::gemm_isa(), blas_core.c_str(), reps);
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
            "%.3f, \"ratio\": %.3f, \"openblas_core\": \"%s\"}\n",
            s.name().c_str(), threads, r.ember_gflops, r.blas_gflops, ratio, blas_core.c_str());
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
