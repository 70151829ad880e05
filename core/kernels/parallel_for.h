// Loops split over OpenMP threads, or run on this thread alone.
//
// `#pragma omp parallel for num_threads(t) if (t > 1)` still enters libgomp when the condition
// is false: a team of one is set up and torn down, thousands of instructions per loop (5% of
// the instructions of a book-size attention forward + backward, counted with callgrind).
// parallel_for runs a plain loop when one thread is asked for, and otherwise exactly the OpenMP
// loop the pragma would.
// Internal to Ember's kernels (included from .cpp files compiled with OpenMP).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <vector>

#include "core/parallel.h"

namespace ember::kernels {

// How iterations are shared: kStatic gives each thread one contiguous, equal range of i (which
// thread computes what depends on n and the thread count only); kDynamic hands them out one at a
// time as threads become free (for iterations of unequal cost; each must then write only its own
// outputs, so that results do not depend on which thread ran it).
enum class Schedule { kStatic, kDynamic };

// body(i, thread) for i in [0, n), with thread in [0, threads).
template <Schedule S = Schedule::kStatic, typename F>
void parallel_for(int64_t n, int threads, F&& body) {
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i, 0);
  } else if constexpr (S == Schedule::kDynamic) {
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
  } else {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
  }
}

// Elements an elementwise map must touch before a second thread pays for waking it.
constexpr int64_t kParallelElements = int64_t{1} << 16;

// body(begin, end) over [0, n): one contiguous range per thread when `elements` (what the whole
// job touches) reaches kParallelElements and no parallel region is running already, else
// body(0, n) on this thread. For maps whose every item is computed the same way wherever the
// split falls, so that any thread count gives the same bits. An exception thrown by a range is
// rethrown here after every thread has finished: the lowest range's, which holds the first item
// that failed, as a single thread would have reported it.
template <typename Body>
void parallel_ranges(int64_t n, int64_t elements, Body&& body) {
  int threads = 1;
  if (elements >= kParallelElements && n > 1 && !omp_in_parallel()) {
    threads = static_cast<int>(std::min<int64_t>(get_num_threads(), n));
  }
  if (threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int r = 0; r < threads; ++r) {
    try {
      body(n * r / threads, n * (r + 1) / threads);
    } catch (...) {
      errors[static_cast<std::size_t>(r)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ember::kernels
