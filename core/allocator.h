// Tensor buffers come from here: a small cache of freed buffers per thread, so that the many
// small tensors of a training step (the book's 6 x 3 matrices, their gradients, the graph's
// saved values) reuse memory instead of going through aligned_alloc and free every time
// (glibc's aligned allocations bypass its fast per-thread cache).
//
// Buffers up to kMaxCachedBytes are rounded up to a power of two and, when freed, kept in the
// freeing thread's list for their size (at most kMaxCachedPerSize each); a thread's lists are
// returned to the system when it exits. Larger buffers go straight to aligned_alloc / free,
// except huge ones (32 MiB and more, which glibc would map anyway): those are mapped from the
// kernel directly, so they are known to be zeros and Storage need not clear them (the 163M
// parameters of GPT-124M are 650 MB of buffers a model's construction writes right away).
// Under AddressSanitizer nothing is cached or mapped, so a use after free is still caught.
#pragma once

#include <cstddef>

namespace ember::detail {

// `bytes` (> 0) of memory aligned to 64 bytes, or null if the system has none. When `zeroed` is
// given, it is set to whether the memory is known to hold zeros (fresh pages from the kernel).
void* allocate_buffer(std::size_t bytes, bool* zeroed = nullptr);

// Gives back a buffer from allocate_buffer(bytes) (the same `bytes`).
void free_buffer(void* data, std::size_t bytes);

}  // namespace ember::detail
