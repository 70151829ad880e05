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

#include <cstdint>

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

}  // namespace ember::kernels
