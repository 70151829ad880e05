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
#include <type_traits>
#include <vector>

#include "core/base/parallel.h"

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
namespace detail {
// parallel_ranges without its template: range(context, begin, end) over [0, n), as described
// above. Compiled once (parallel_for.cpp), so that each body's loop is compiled once too (in
// the thunk parallel_ranges passes), not once more inline for the one-thread case.
void run_ranges(int64_t n, int64_t elements, void (*range)(void*, int64_t, int64_t), void* context);
}  // namespace detail

template <typename Body>
void parallel_ranges(int64_t n, int64_t elements, Body&& body) {
  using B = std::remove_reference_t<Body>;
  detail::run_ranges(
      n, elements,
      [](void* context, int64_t begin, int64_t end) { (*static_cast<B*>(context))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace ember::kernels
