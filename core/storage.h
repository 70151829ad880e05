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

#include "core/allocator.h"
#include "core/error.h"

namespace ember {

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line; enough for AVX-512 loads

  // A buffer that cannot be had is an ember::Error (as PyTorch's "DefaultCPUAllocator: not enough
  // memory"), never std::bad_alloc or a null pointer used later.
  explicit Storage(std::size_t nbytes) : nbytes_(nbytes) {
    check(
        nbytes <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - kAlignment,
        "Storage: cannot allocate ", nbytes, " bytes (larger than the address space)");
    bool zeroed = false;
    data_ = detail::allocate_buffer(allocated_bytes(nbytes), &zeroed);  // core/allocator.h
    check(data_ != nullptr, "DefaultCPUAllocator: not enough memory: you tried to allocate ",
          nbytes, " bytes.");
    // No uninitialised reads, ever (a huge buffer fresh from the kernel is zeros already).
    if (!zeroed) std::memset(data_, 0, allocated_bytes(nbytes));
  }
  ~Storage() { detail::free_buffer(data_, allocated_bytes(nbytes_)); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

  // Bumped by every in-place write; saved tensors remember the version they saw.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  // nbytes rounded up to whole cache lines (one line for an empty storage).
  static std::size_t allocated_bytes(std::size_t nbytes) {
    return nbytes == 0 ? kAlignment : (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::atomic<uint64_t> version_{0};  // atomic: tensors may be read from several threads
};

}  // namespace ember
