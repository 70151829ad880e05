// Tensor buffers come from here: a small cache of freed buffers per thread, so that the many
// small tensors of a training step (the book's 6 x 3 matrices, their gradients, the graph's
// saved values) reuse memory instead of going through aligned_alloc and free every time
// (glibc's aligned allocations bypass its fast per-thread cache).
//
// Buffers up to kMaxCachedBytes are rounded up to a power of two and, when freed, kept in the
// freeing thread's list for their size (at most 32 each, or as many as the thread has had out at
// once, whichever is more: a training step's working set); a thread's lists are
// returned to the system when it exits. Larger buffers are mapped from the kernel directly,
// 2 MiB-aligned and on transparent huge pages where the kernel has them (for each whole 2 MiB
// of the buffer), so they are known to be zeros and Storage need not clear them (the 163M
// parameters of GPT-124M are 650 MB of buffers a model's construction writes right away). Freed, a
// big buffer's memory (in whole 2 MiB) is kept, merged with kept memory beside it, and a later big
// buffer takes the smallest kept range that holds it, as PyTorch's CUDA caching allocator splits
// and merges blocks (not zeros then, so Storage clears it): a loop's activations do not fault in
// fresh pages on every step, nor do those of a generation whose sequence grows by a token at each
// step, and memory one kind of tensor freed serves another (a GPT's activations, freed in its
// backward, hold AdamW's moments; the gradients zero_grad frees hold the next activations). The
// kept memory may add up to the most mapped memory the program has had in use at once (its
// working set: a training step's activations, gradients and temporaries; at least 64 MiB), the
// memory freed longest ago going back first; ember::empty_cache() gives it all back (as
// torch.cuda.empty_cache), and so does a request the system refuses, which is then tried again.
//
// The small objects every op makes (a TensorImpl, a Storage, a graph node) come from per-thread
// free lists too (allocate_object, ObjectAllocator for std::allocate_shared): a graph is built
// and freed as a whole, dozens of objects of one size at a time, more than glibc's per-thread
// cache keeps (7 per size), whose slow path would be a fifth of the book-size module's
// instructions.
//
// Under AddressSanitizer nothing is cached or mapped, so a use after free is still caught.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace ember::detail {

// `bytes` (> 0) of memory aligned to 64 bytes, or null if the system has none. When `zeroed` is
// given, it is set to whether the memory is known to hold zeros (fresh pages from the kernel).
void* allocate_buffer(std::size_t bytes, bool* zeroed = nullptr);

// Gives back a buffer from allocate_buffer(bytes) (the same `bytes`).
void free_buffer(void* data, std::size_t bytes);

// `bytes` (> 0) of memory aligned as operator new's; throws std::bad_alloc when there is none.
void* allocate_object(std::size_t bytes);
// Gives back memory from allocate_object(bytes) (the same `bytes`).
void free_object(void* p, std::size_t bytes) noexcept;

// The machine's physical memory in bytes (2^40 where the system does not say). Containers sized
// by a caller's number (split's views, randperm's order) are refused beyond it as an
// ember::Error before anything is allocated: with overcommit a huge allocation can succeed and
// fail only when its pages are touched, and AddressSanitizer's operator new aborts on one.
double physical_memory_bytes();

// Whether this build of the library caches and maps buffers: false under AddressSanitizer, where
// every buffer comes from malloc and goes back to it at once. (For the tests, whose own code is
// compiled the same way in every build and asks the library at run time.)
bool allocator_caches();

// A standard allocator over allocate_object, for std::allocate_shared and the small vectors of
// graph nodes (ObjectVector).
template <typename T>
struct ObjectAllocator {
  using value_type = T;
  ObjectAllocator() = default;
  template <typename U>
  ObjectAllocator(const ObjectAllocator<U>&) {}  // NOLINT: rebinding is implicit
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_object(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { free_object(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const ObjectAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using ObjectVector = std::vector<T, ObjectAllocator<T>>;

}  // namespace ember::detail

namespace ember {

// The big (mapped) buffers, in bytes: those held by tensors, those kept for reuse, and the most
// ever held at once (since the start or the last empty_cache). All zeros under AddressSanitizer,
// which keeps nothing.
struct MemoryStats {
  std::size_t mapped_in_use = 0;
  std::size_t mapped_kept = 0;
  std::size_t mapped_peak = 0;
};
MemoryStats memory_stats();

// Gives the memory the allocator keeps for reuse back to the system, as torch.cuda.empty_cache:
// every kept big buffer, and the calling thread's cached small buffers. Memory of live tensors is
// untouched (only what is unused is freed); the limit of what may be kept starts again from what
// is in use now. Safe to call from any thread at any time.
void empty_cache();

}  // namespace ember
