#include "core/base/parallel.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/base/error.h"

namespace ember {

namespace {

// EMBER_NUM_THREADS if it holds a positive integer, else OpenMP's default team size.
int default_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    check(*end == '\0' && n >= 1 && n <= 4096,
          "EMBER_NUM_THREADS: expected a positive integer, got '", env, "'");
    return static_cast<int>(n);
  }
  return omp_get_max_threads();
}

std::atomic<int>& threads() {
  static std::atomic<int> n{default_threads()};
  return n;
}

}  // namespace

int get_num_threads() { return threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  check(n >= 1, "set_num_threads: expected a number of threads >= 1, got ", n);
  threads().store(n, std::memory_order_relaxed);
}

}  // namespace ember
