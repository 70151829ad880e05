#include "core/allocator.h"

#include <sys/mman.h>

#include <array>
#include <bit>
#include <cstdlib>
#include <vector>

namespace ember::detail {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kMaxCachedBytes = std::size_t{1} << 20;  // 1 MiB
constexpr std::size_t kMaxCachedPerSize = 32;
constexpr int kClasses = 15;  // 64 B, 128 B, ..., 1 MiB
// From here on buffers are mapped (and unmapped) directly: glibc's own largest mmap threshold.
constexpr std::size_t kMapBytes = std::size_t{32} << 20;
constexpr bool kMap = kCache;  // not under AddressSanitizer

int size_class(std::size_t bytes) {  // bytes <= kMaxCachedBytes
  const std::size_t rounded = std::bit_ceil(bytes < kAlignment ? kAlignment : bytes);
  return std::countr_zero(rounded) - std::countr_zero(kAlignment);
}

struct Cache {
  std::array<std::vector<void*>, kClasses> free_lists;
  ~Cache() {
    alive = false;
    for (auto& list : free_lists)
      for (void* p : list) std::free(p);
  }
  static thread_local bool alive;
};
thread_local bool Cache::alive = true;

Cache& cache() {
  static thread_local Cache c;
  return c;
}

}  // namespace

void* allocate_buffer(std::size_t bytes, bool* zeroed) {
  if (zeroed != nullptr) *zeroed = false;
  if (kMap && bytes >= kMapBytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (zeroed != nullptr) *zeroed = true;  // anonymous pages start as zeros; page-aligned
    return p;
  }
  if (!kCache || bytes > kMaxCachedBytes || !Cache::alive) {
    return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  }
  const int c = size_class(bytes);
  auto& list = cache().free_lists[c];
  if (!list.empty()) {
    void* p = list.back();
    list.pop_back();
    return p;
  }
  return std::aligned_alloc(kAlignment, kAlignment << c);
}

void free_buffer(void* data, std::size_t bytes) {
  if (data == nullptr) return;
  if (kMap && bytes >= kMapBytes) {
    munmap(data, bytes);
    return;
  }
  if (!kCache || bytes > kMaxCachedBytes || !Cache::alive) {
    std::free(data);
    return;
  }
  auto& list = cache().free_lists[size_class(bytes)];
  if (list.size() >= kMaxCachedPerSize) {
    std::free(data);
    return;
  }
  list.push_back(data);
}

}  // namespace ember::detail
