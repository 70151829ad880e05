// Storage: one aligned buffer shared by a tensor and all its views, with a version counter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ember {

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line; enough for AVX-512 loads

  explicit Storage(std::size_t nbytes) : nbytes_(nbytes) {
    std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, rounded == 0 ? kAlignment : rounded);  // no uninitialised reads, ever
  }
  ~Storage() { std::free(data_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

  // Bumped by every in-place write; saved tensors remember the version they saw.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  uint64_t version_ = 0;
};

}  // namespace ember
