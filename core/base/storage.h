// Storage: one aligned buffer shared by a tensor and all its views, with a version counter.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "core/base/allocator.h"
#include "core/base/error.h"

namespace ember {

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line; enough for AVX-512 loads

  // A buffer that cannot be had is an ember::Error (as PyTorch's "DefaultCPUAllocator: not enough
  // memory"), never std::bad_alloc or a null pointer used later.
  explicit Storage(std::size_t nbytes) : Storage(nbytes, true) {}
  // A buffer that is not cleared: only for an op that writes every byte of it before any other
  // code can see it (a matrix product's output, a contiguous copy). A reused big buffer then
  // skips a pass over memory that the op overwrites anyway (detail::empty_for_overwrite).
  struct Uninitialized {};
  Storage(std::size_t nbytes, Uninitialized) : Storage(nbytes, false) {}
  ~Storage() { detail::free_buffer(data_, allocated_bytes(nbytes_)); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

  // Bumped by every in-place write; saved tensors remember the version they saw.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // The version at the last in-place write that gave a tensor of this storage a new history in
  // the graph (an in-place op recorded by autograd). Views taken before it still carry the old
  // history: autograd refuses them (detail::view_is_stale in core/tensor/tensor.h).
  uint64_t graph_write_version() const { return graph_write_.load(std::memory_order_relaxed); }
  void mark_graph_write() { graph_write_.store(version(), std::memory_order_relaxed); }

 private:
  Storage(std::size_t nbytes, bool clear) : nbytes_(nbytes) {
    check(
        nbytes <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - kAlignment,
        "Storage: cannot allocate ", nbytes, " bytes (larger than the address space)");
    bool zeroed = false;
    data_ = detail::allocate_buffer(allocated_bytes(nbytes), &zeroed);  // core/base/allocator.h
    check(data_ != nullptr, "DefaultCPUAllocator: not enough memory: you tried to allocate ",
          nbytes, " bytes.");
    // No uninitialised reads, ever (a big buffer fresh from the kernel is zeros already).
    if (!zeroed) {
      const std::size_t from = clear ? 0 : nbytes;  // uncleared: still the padding past nbytes
      std::memset(static_cast<char*>(data_) + from, 0, allocated_bytes(nbytes) - from);
    }
  }

  // nbytes rounded up to whole cache lines (one line for an empty storage).
  static std::size_t allocated_bytes(std::size_t nbytes) {
    return nbytes == 0 ? kAlignment : (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::atomic<uint64_t> version_{0};  // atomic: tensors may be read from several threads
  std::atomic<uint64_t> graph_write_{0};
};

}  // namespace ember
