// Loops split over OpenMP threads, or run on this thread alone.
//
// `#pragma omp parallel for num_threads(t) if (t > 1)` still enters libgomp when the condition
// is false: a team of one is set up and torn down, thousands of instructions per loop (12% of a
// book-size attention forward + backward, counted with callgrind). These helpers run a plain
// loop when one thread is asked for, and otherwise exactly the OpenMP loop the pragma would.
// Internal to Ember's kernels (included from .cpp files compiled with OpenMP).
#pragma once

#include <omp.h>

#include <cstdint>

namespace ember::kernels {

// body(i, thread) for i in [0, n), thread in [0, threads): contiguous, equal ranges of i per
// thread (schedule(static)), so which thread computes what depends on n and threads only.
template <typename F>
void parallel_for_static(int64_t n, int threads, F&& body) {
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i, 0);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
}

// The same with iterations handed out one at a time as threads become free (schedule(dynamic)):
// for iterations of unequal cost. Each iteration must write its own outputs only, so that the
// results do not depend on which thread ran it.
template <typename F>
void parallel_for_dynamic(int64_t n, int threads, F&& body) {
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i, 0);
    return;
  }
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
}

}  // namespace ember::kernels
