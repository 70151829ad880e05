// How many threads Ember's kernels use: ember::set_num_threads(n), like torch.set_num_threads.
//
// The default is the environment variable EMBER_NUM_THREADS when it is set (an integer in
// [1, kMaxNumThreads]), else OpenMP's default (the machine's cores, or OMP_NUM_THREADS). Every kernel that
// runs in parallel asks get_num_threads() for its team size, and a kernel's results depend on
// its inputs and this number only (never on timing).
#pragma once

namespace ember {

// The most threads kernels may use: far above any machine Ember runs on, low enough that the
// kernels' products of the thread count with tile counts and sizes stay far from overflow.
inline constexpr int kMaxNumThreads = 1024;

// The number of threads kernels use (>= 1, <= kMaxNumThreads).
int get_num_threads();

// Sets it for every later kernel call; n must be in [1, kMaxNumThreads] (an ember::Error
// otherwise).
void set_num_threads(int n);

}  // namespace ember
