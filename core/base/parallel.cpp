#include "core/base/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/base/error.h"

namespace ember {

namespace {

// EMBER_NUM_THREADS when it is set (anything but an integer in [1, kMaxNumThreads] is an
// Error), else OpenMP's default team size (at most kMaxNumThreads).
int default_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    check(*end == '\0' && n >= 1 && n <= kMaxNumThreads,
          "EMBER_NUM_THREADS: expected an integer in [1, ", kMaxNumThreads, "], got '", env, "'");
    return static_cast<int>(n);
  }
  return std::min(omp_get_max_threads(), kMaxNumThreads);
}

std::atomic<int>& threads() {
  static std::atomic<int> n{default_threads()};
  return n;
}

}  // namespace

int get_num_threads() { return threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  check(n >= 1 && n <= kMaxNumThreads,
        "set_num_threads: expected a number of threads >= 1 and <= ", kMaxNumThreads, ", got ", n);
  threads().store(n, std::memory_order_relaxed);
}

}  // namespace ember
