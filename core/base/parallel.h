// How many threads Ember's kernels use: ember::set_num_threads(n), like torch.set_num_threads.
//
// The default is the environment variable EMBER_NUM_THREADS when it is set (an integer in
// [1, kMaxNumThreads]), else OpenMP's default (the machine's cores, or OMP_NUM_THREADS). Every kernel that
// runs in parallel asks get_num_threads() for its team size, and a kernel's results depend on
// its inputs and this number only (never on timing).
//
// OpenMP (libgomp) starts the team's threads at the first parallel kernel, each with a stack of
// the size ulimit -s gives (8 MiB by default) or OMP_STACKSIZE. Under an address-space limit too
// small for those stacks (ulimit -v of about 40 MB with two threads) libgomp cannot create them
// and ends the program itself, with its own one-line message ("libgomp: Thread creation failed:
// Resource temporarily unavailable", exit status 1), before Ember can raise an Error. One
// thread (EMBER_NUM_THREADS=1, a program's --threads 1) or smaller stacks (OMP_STACKSIZE=1M)
// run under such a limit; Ember's own allocations there fail as ember::Errors naming the tensor.
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
