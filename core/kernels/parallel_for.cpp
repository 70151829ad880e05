// The OpenMP team of kernels::parallel_ranges (parallel_for.h), in one place.
#include "core/kernels/parallel_for.h"

#include <algorithm>
#include <exception>
#include <vector>

namespace ember::kernels::detail {

void run_ranges(int64_t n, int64_t elements, void (*range)(void*, int64_t, int64_t),
                void* context) {
  int threads = 1;
  if (elements >= kParallelElements && n > 1 && !omp_in_parallel()) {
    threads = static_cast<int>(std::min<int64_t>(get_num_threads(), n));
  }
  if (threads <= 1) {
    range(context, 0, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int r = 0; r < threads; ++r) {
    try {
      range(context, n * r / threads, n * (r + 1) / threads);
    } catch (...) {
      errors[static_cast<std::size_t>(r)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ember::kernels::detail
