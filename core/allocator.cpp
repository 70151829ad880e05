#include "core/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
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
// Past the caches' largest class buffers are mapped (and unmapped) directly, on huge pages where
// they have a whole 2 MiB (map_huge), and kept when freed. (Until 2026-11-25 only buffers of 2
// MiB and more were; those between 1 and 2 MiB went to glibc, which maps and unmaps them or
// trims its heap under them: the toy GPT's evaluation faulted in fresh pages for every one.)
constexpr std::size_t kMapBytes = kMaxCachedBytes + 1;
constexpr bool kMap = kCache;  // not under AddressSanitizer

int size_class(std::size_t bytes) {  // bytes <= kMaxCachedBytes
  const std::size_t rounded = std::bit_ceil(bytes < kAlignment ? kAlignment : bytes);
  return std::countr_zero(rounded) - std::countr_zero(kAlignment);
}

// Small objects: classes of 16 bytes up to 1 KiB, each an intrusive list (the link lives in
// the free object itself), holding at most 256 KiB per class.
constexpr std::size_t kGranule = 16;
constexpr std::size_t kMaxObjectBytes = 1024;
constexpr std::size_t kMaxObjectListBytes = std::size_t{256} << 10;
struct FreeObject {
  FreeObject* next;
};
struct ObjectList {
  FreeObject* head = nullptr;
  std::size_t count = 0;
};

struct Cache {
  std::array<std::vector<void*>, kClasses> free_lists;
  std::array<ObjectList, kMaxObjectBytes / kGranule> objects;
  ~Cache() {
    alive = false;
    for (auto& list : free_lists)
      for (void* p : list) std::free(p);
    for (ObjectList& list : objects) {
      while (list.head != nullptr) {
        FreeObject* next = list.head->next;
        ::operator delete(list.head);
        list.head = next;
      }
    }
  }
  static thread_local bool alive;
};
thread_local bool Cache::alive = true;

Cache& cache() {
  static thread_local Cache c;
  return c;
}

// Mapped buffers start on a 2 MiB boundary and ask for transparent huge pages (the kernel's THP
// mode here is "madvise"): one page fault and one TLB entry per 2 MiB instead of per 4 KiB. The
// tail past the last whole 2 MiB keeps small pages, so a 2.1 MiB buffer does not hold 4 MiB.
// Measured on the 124M GPT (bench_gpt): construction 0.39 s -> 0.22 s; forward unchanged.
constexpr std::size_t kHuge = std::size_t{2} << 20;

// Asks for transparent huge pages for the whole 2 MiB of a mapped buffer of `bytes` (a hint:
// without THP, small pages); nothing to ask, and no system call, below 2 MiB.
void advise_huge(void* p, std::size_t bytes) {
  if (bytes >= kHuge) madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
}

// A mapping of `size` bytes (a whole number of 2 MiB) for a buffer of `bytes` <= size: huge
// pages are asked for the buffer's whole 2 MiB only, so its tail, and the rest of the mapping
// that only a later, larger buffer of the same class may use, stay on small pages.
void* map_huge(std::size_t size, std::size_t bytes) {
  void* raw =
      mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t end = begin + size + kHuge;
  const std::uintptr_t aligned = (begin + kHuge - 1) / kHuge * kHuge;
  if (aligned > begin) munmap(raw, aligned - begin);
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  void* p = reinterpret_cast<void*>(aligned);
  advise_huge(p, bytes);
  return p;
}

// The size class of a mapped buffer: its bytes rounded up to a whole 2 MiB, so that buffers a
// little apart in size (a sequence one token longer at each step of a generation) reuse each
// other's kept mapping instead of mapping, faulting in and zeroing fresh pages every time.
// Requests this large never wrap (allocate_buffer turns away anything past half the range).
std::size_t mapped_size(std::size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

// Freed mapped buffers, kept for a later buffer of the same class (at most kMaxKeptBytes in all,
// shared by the threads): a training or inference loop allocates the same activation sizes on
// every step, and mapping them afresh each time cost a page fault per 2 MiB (4 KiB where the
// kernel has no huge page to give) plus the kernel's zeroing, serialized on the process's page
// tables when two threads fault at once. The chapter's MultiHeadAttention at T = 1024 spent a
// tenth of its 2-thread forward + backward there (perf: clear_page_erms, exc_page_fault). A
// kept buffer is not known to be zeros, so Storage clears it as any reused buffer. Like glibc,
// which keeps up to 64 MiB of freed heap below its mmap threshold.
constexpr std::size_t kMaxKeptBytes = std::size_t{64} << 20;
struct KeptBuffers {
  std::mutex mutex;
  std::vector<std::pair<void*, std::size_t>> buffers;  // (data, bytes)
  std::size_t total = 0;
};
KeptBuffers& kept() {
  static KeptBuffers* k = new KeptBuffers;  // never destroyed: frees may come after exit starts
  return *k;
}

void* take_kept(std::size_t bytes) {
  KeptBuffers& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (std::size_t i = k.buffers.size(); i-- > 0;) {  // the most recently freed first
    if (k.buffers[i].second == bytes) {
      void* p = k.buffers[i].first;
      k.buffers.erase(k.buffers.begin() + static_cast<std::ptrdiff_t>(i));
      k.total -= bytes;
      return p;
    }
  }
  return nullptr;
}

bool keep(void* data, std::size_t bytes) {
  KeptBuffers& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (bytes > kMaxKeptBytes - k.total) return false;
  k.buffers.emplace_back(data, bytes);
  k.total += bytes;
  return true;
}

}  // namespace

void* allocate_buffer(std::size_t bytes, bool* zeroed) {
  if (zeroed != nullptr) *zeroed = false;
  if (kMap && bytes >= kMapBytes) {
    if (bytes > std::numeric_limits<std::size_t>::max() / 2) return nullptr;  // no wrap below
    const std::size_t size = mapped_size(bytes);
    if (void* p = take_kept(size)) {  // not zeros: Storage clears it
      // Huge pages for this buffer's whole 2 MiB too, where an earlier, smaller one of the
      // class left small pages (those not yet touched).
      advise_huge(p, bytes);
      return p;
    }
    void* p = map_huge(size, bytes);
    if (p == nullptr) return nullptr;
    if (zeroed != nullptr) *zeroed = true;  // anonymous pages start as zeros; page-aligned
    return p;
  }
  if (!kCache || bytes > kMaxCachedBytes) {
    return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  }
  const int c = size_class(bytes);
  if (Cache::alive) {
    auto& list = cache().free_lists[c];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
  }
  // The whole class, also on a thread whose cache is gone (its exit): the buffer may be freed
  // on another thread into that thread's list of this class, and handed out again as any size
  // of the class.
  return std::aligned_alloc(kAlignment, kAlignment << c);
}

void free_buffer(void* data, std::size_t bytes) {
  if (data == nullptr) return;
  if (kMap && bytes >= kMapBytes) {
    const std::size_t size = mapped_size(bytes);
    if (!keep(data, size)) munmap(data, size);
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

void* allocate_object(std::size_t bytes) {
  if (!kCache || bytes == 0 || bytes > kMaxObjectBytes) return ::operator new(bytes);
  const std::size_t c = (bytes - 1) / kGranule;
  if (Cache::alive) {
    ObjectList& list = cache().objects[c];
    if (list.head != nullptr) {
      FreeObject* object = list.head;
      list.head = object->next;
      --list.count;
      return object;
    }
  }
  // The whole class, so any object of it fits: also on a thread whose cache is gone (as for
  // buffers above, another thread may free it into its list of this class).
  return ::operator new((c + 1) * kGranule);
}

void free_object(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!kCache || bytes == 0 || bytes > kMaxObjectBytes || !Cache::alive) {
    ::operator delete(p);
    return;
  }
  const std::size_t c = (bytes - 1) / kGranule;
  ObjectList& list = cache().objects[c];
  if (list.count * (c + 1) * kGranule >= kMaxObjectListBytes) {
    ::operator delete(p);
    return;
  }
  list.head = ::new (p) FreeObject{list.head};
  ++list.count;
}

}  // namespace ember::detail
