#include "core/base/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <tuple>
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
// they have a whole 2 MiB (map_huge), and kept when freed. Buffers between 1 and 2 MiB are
// mapped too: glibc would map and unmap them or trim its heap under them, and an evaluation
// loop (the toy GPT's) would fault in fresh pages for every one.
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

// A thread's lists keep at most kMaxCachedPerSize buffers of a class, or as many as the thread
// has ever had out at once (taken and not given back to its lists), whichever is more: a step of
// the small GPT config holds more than 32 activations of one class at its peak, and those past
// 32 would go back to glibc and come back as fresh pages on every step.
struct Cache {
  std::array<std::vector<void*>, kClasses> free_lists;
  std::array<std::size_t, kClasses> out{};   // buffers of the class handed out, not yet back
  std::array<std::size_t, kClasses> peak{};  // the most `out` has been
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
// The 124M GPT's construction (bench_gpt), which writes 650 MB of fresh parameters, gains most.
constexpr std::size_t kHuge = std::size_t{2} << 20;

// Asks for transparent huge pages for the whole 2 MiB of a mapped buffer of `bytes` (a hint:
// without THP, small pages); nothing to ask, and no system call, below 2 MiB.
void advise_huge(void* p, std::size_t bytes) {
  if (bytes >= kHuge) madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
}

// An anonymous mapping of `size` bytes starting on a 2 MiB boundary (a larger one, trimmed at
// both ends), or null.
void* map_aligned(std::size_t size, int protection, int flags) {
  void* raw = mmap(nullptr, size + kHuge, protection, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t end = begin + size + kHuge;
  const std::uintptr_t aligned = (begin + kHuge - 1) / kHuge * kHuge;
  if (aligned > begin) munmap(raw, aligned - begin);
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  return reinterpret_cast<void*>(aligned);
}

// A mapping of `size` bytes (a whole number of 2 MiB) for a buffer of `bytes` <= size: huge
// pages are asked for the buffer's whole 2 MiB only, so its tail, and the rest of the mapping
// that only a later, larger buffer of the same class may use, stay on small pages.
void* map_huge(std::size_t size, std::size_t bytes) {
  void* p = map_aligned(size, PROT_READ | PROT_WRITE, 0);
  if (p != nullptr) advise_huge(p, bytes);
  return p;
}

// The size class of a mapped buffer: its bytes rounded up to a whole 2 MiB, so that buffers a
// little apart in size (a sequence one token longer at each step of a generation) reuse each
// other's kept mapping instead of mapping, faulting in and zeroing fresh pages every time.
// Requests this large never wrap (allocate_buffer turns away anything past half the range).
std::size_t mapped_size(std::size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

// Freed mapped buffers are kept for later buffers (shared by the threads): a training or
// inference loop allocates the same activation sizes on every step, and mapping them afresh each
// time cost a page fault per 2 MiB (4 KiB where the kernel has no huge page to give) plus the
// kernel's zeroing, serialized on the process's page tables when two threads fault at once. The
// chapter's MultiHeadAttention at T = 1024 spent a tenth of its 2-thread forward + backward there
// (perf: clear_page_erms, exc_page_fault). A kept buffer is not known to be zeros, so Storage
// clears it as any reused buffer.
//
// What is kept are free ranges of whole 2 MiB, on 2 MiB boundaries, as PyTorch's CUDA caching
// allocator keeps blocks: a request takes the smallest free range that holds it (best fit; an
// exact one when there is one), and what it leaves of a larger range stays free; a freed buffer
// is merged with the free ranges on either side of it. So memory freed as one kind of tensor
// serves another: a GPT-124M training step frees ~600 MiB of activations in its backward just
// before AdamW's first step asks for ~1.2 GB of moments, and the next forward's activations then
// reuse the gradients zero_grad freed. (Were a kept buffer to serve only its own size class,
// the activations' and the gradients' memory would both stay resident beside each other, and a
// training step's peak would be params + grads + moments + all activations.)
//
// How much is kept is sized from what the program really uses, as PyTorch's CUDA caching
// allocator holds a loop's working set: up to the most mapped bytes ever in use at once (the
// peak), and at least kMinKeptBytes (64 MiB, as glibc keeps up to 64 MiB of freed heap below its
// mmap threshold). A training step frees its activations, gradients and temporaries (GBs for
// GPT-124M) and asks for as much in the next step: all of it is kept, and the step after the
// first maps nothing (with a fixed 64 MiB, the chapter-5 GPT-124M step spends a quarter of its
// time in the kernel's clear_page_erms). Past the limit the ranges freed
// longest ago go back to the system first, as much of them as is past the limit (a generation's
// sequence grows a token per step, so its sizes grow too and the oldest are not asked for again).
// ember::empty_cache() gives every kept range back and starts the peak again from what is in use.
constexpr std::size_t kMinKeptBytes = std::size_t{64} << 20;
struct FreeRange {
  std::size_t bytes = 0;
  std::uint64_t freed = 0;  // when (a count of frees): the oldest go back first
};
struct KeptBuffers {
  std::mutex mutex;
  std::map<std::uintptr_t, FreeRange> by_address;  // the free ranges
  // The same, smallest first, and of one size the most recently freed first (its pages are the
  // likeliest to be in the caches).
  std::set<std::tuple<std::size_t, std::uint64_t, std::uintptr_t>> by_size;
  std::uint64_t frees = 0;
  std::size_t total = 0;   // bytes in the free ranges
  std::size_t in_use = 0;  // mapped bytes handed out, not yet freed
  std::size_t peak = 0;    // the most `in_use` has been
};
KeptBuffers& kept() {
  static KeptBuffers* k = new KeptBuffers;  // never destroyed: frees may come after exit starts
  return *k;
}

// Lists a free range; when there is no memory to list it in (a program at its address-space
// limit), the range goes back to the system instead: frees run in destructors and never throw.
void add_range(KeptBuffers& k, std::uintptr_t at, FreeRange range) noexcept {
  try {
    const auto it = k.by_address.emplace(at, range).first;
    try {
      k.by_size.emplace(range.bytes, ~range.freed, at);
    } catch (...) {
      k.by_address.erase(it);
      throw;
    }
    k.total += range.bytes;
  } catch (const std::bad_alloc&) {
    munmap(reinterpret_cast<void*>(at), range.bytes);
  }
}

void remove_range(KeptBuffers& k, std::map<std::uintptr_t, FreeRange>::iterator it) {
  k.by_size.erase({it->second.bytes, ~it->second.freed, it->first});
  k.total -= it->second.bytes;
  k.by_address.erase(it);
}

// Counts `bytes` as in use (the caller maps them or has taken them from the free ranges).
void count_in_use(KeptBuffers& k, std::size_t bytes) {
  k.in_use += bytes;
  k.peak = std::max(k.peak, k.in_use);
}

// `bytes` (a whole number of 2 MiB) from the smallest free range that holds them, counted as in
// use; null when none does. The rest of the range stays free.
void* take_kept(std::size_t bytes) {
  KeptBuffers& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  const auto fit = k.by_size.lower_bound({bytes, 0, 0});
  if (fit == k.by_size.end()) return nullptr;
  count_in_use(k, bytes);
  const std::uintptr_t at = std::get<2>(*fit);
  const auto it = k.by_address.find(at);
  const FreeRange range = it->second;
  remove_range(k, it);
  if (range.bytes > bytes) add_range(k, at + bytes, {range.bytes - bytes, range.freed});
  return reinterpret_cast<void*>(at);
}

// `bytes` (a whole number of 2 MiB), counted as in use, gathered from the free ranges when no one
// range holds them: whole 2 MiB pieces whose pages are all resident, from the smallest ranges first
// (the pieces a step's frees left, which serve large requests least), are moved (mremap) to one new
// range of addresses. A training step frees its activations in pieces while its gradients take
// their places, and its last gradient, the token embedding's ([50257, 768]: 147 MiB for GPT-124M),
// finds no free range that large although hundreds of MiB of kept, resident pages lie free in
// pieces: mapped afresh, it would set the chapter-5 step's peak RSS. Moving pages copies nothing
// and faults nothing in (a whole 2 MiB on a huge page moves as one page-table entry); pieces with
// pages never touched (the tail of a 2.25 MiB buffer's 4 MiB) are left where they are, since
// writing them would fault them in and add to the resident memory this is to save. Every free range
// and every mapping lies on 2 MiB boundaries, so no move spans two mappings. Null when the resident
// pieces are too few, or a move fails (what was moved is then one more free range, and the caller
// maps the buffer afresh).
void* gather_kept(std::size_t bytes) {
  KeptBuffers& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (k.total < bytes) return nullptr;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<std::uintptr_t> pieces;
  std::vector<unsigned char> resident;
  for (const auto& [size, freed, at] : k.by_size) {
    if (pieces.size() * kHuge >= bytes) break;
    resident.resize(size / page);
    if (mincore(reinterpret_cast<void*>(at), size, resident.data()) != 0) continue;
    for (std::size_t piece = 0; piece < size / kHuge && pieces.size() * kHuge < bytes; ++piece) {
      const auto first = resident.begin() + static_cast<std::ptrdiff_t>(piece * (kHuge / page));
      if (std::all_of(first, first + static_cast<std::ptrdiff_t>(kHuge / page),
                      [](unsigned char r) { return (r & 1) != 0; })) {
        pieces.push_back(at + piece * kHuge);
      }
    }
  }
  if (pieces.size() * kHuge < bytes) return nullptr;
  // The new addresses: reserved without memory (PROT_NONE), on a 2 MiB boundary.
  void* reserve = map_aligned(bytes, PROT_NONE, MAP_NORESERVE);
  if (reserve == nullptr) return nullptr;
  const auto to = reinterpret_cast<std::uintptr_t>(reserve);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    // The piece out of its free range: what lies before and after it stays free.
    const std::uintptr_t at = pieces[i];
    const auto it = std::prev(k.by_address.upper_bound(at));
    const std::uintptr_t start = it->first;
    const FreeRange range = it->second;
    remove_range(k, it);
    if (at > start) add_range(k, start, {at - start, range.freed});
    if (start + range.bytes > at + kHuge) {
      add_range(k, at + kHuge, {start + range.bytes - at - kHuge, range.freed});
    }
    void* moved = mremap(reinterpret_cast<void*>(at), kHuge, kHuge, MREMAP_MAYMOVE | MREMAP_FIXED,
                         reinterpret_cast<void*>(to + i * kHuge));
    if (moved == MAP_FAILED) {
      add_range(k, at, {kHuge, range.freed});                              // still where it was
      if (i > 0) add_range(k, to, {i * kHuge, ++k.frees});                 // what was moved
      munmap(reinterpret_cast<void*>(to + i * kHuge), bytes - i * kHuge);  // the reserve's rest
      return nullptr;
    }
  }
  count_in_use(k, bytes);
  return reinterpret_cast<void*>(to);
}

// Keeps a freed buffer, merged with the free ranges beside it; returns what is past the limit,
// the ranges freed longest ago, for the caller to unmap (outside the lock: munmap of GBs takes a
// while).
std::vector<std::pair<void*, std::size_t>> keep(void* data, std::size_t bytes) {
  KeptBuffers& k = kept();
  std::vector<std::pair<void*, std::size_t>> evicted;
  // Unmapped after the lock, or at once when there is no memory to list it in.
  const auto evict = [&evicted](std::uintptr_t at, std::size_t size) {
    try {
      evicted.emplace_back(reinterpret_cast<void*>(at), size);
    } catch (const std::bad_alloc&) {
      munmap(reinterpret_cast<void*>(at), size);
    }
  };
  std::lock_guard<std::mutex> lock(k.mutex);
  k.in_use -= bytes;
  std::uintptr_t at = reinterpret_cast<std::uintptr_t>(data);
  FreeRange range{bytes, ++k.frees};
  if (auto after = k.by_address.find(at + bytes); after != k.by_address.end()) {
    range.bytes += after->second.bytes;
    remove_range(k, after);
  }
  if (auto before = k.by_address.lower_bound(at); before != k.by_address.begin()) {
    --before;
    if (before->first + before->second.bytes == at) {
      at = before->first;
      range.bytes += before->second.bytes;
      remove_range(k, before);
    }
  }
  add_range(k, at, range);
  const std::size_t limit = std::max(kMinKeptBytes, k.peak);
  while (k.total > limit) {
    auto oldest = k.by_address.begin();
    for (auto it = k.by_address.begin(); it != k.by_address.end(); ++it) {
      if (it->second.freed < oldest->second.freed) oldest = it;
    }
    // The end of the range, as much as is past the limit in whole 2 MiB, or all of it.
    const std::size_t excess = (k.total - limit + kHuge - 1) / kHuge * kHuge;
    const std::uintptr_t start = oldest->first;
    FreeRange left = oldest->second;
    remove_range(k, oldest);
    if (left.bytes > excess) {
      left.bytes -= excess;
      evict(start + left.bytes, excess);
      add_range(k, start, left);
    } else {
      evict(start, left.bytes);
    }
  }
  return evicted;
}

// Unmaps every kept range, for a request the system refused: the memory kept for reuse may be
// what it lacks (a program under an address-space limit, ulimit -v), as PyTorch's CUDA caching
// allocator frees its cached blocks and tries again. Whether there was any. (Under the lock:
// this is the rare path, and the ranges must be gone before the request is tried again.)
bool unmap_kept() {
  KeptBuffers& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (k.by_address.empty()) return false;
  for (const auto& [at, range] : k.by_address) munmap(reinterpret_cast<void*>(at), range.bytes);
  k.by_address.clear();
  k.by_size.clear();
  k.total = 0;
  return true;
}

}  // namespace

void* allocate_buffer(std::size_t bytes, bool* zeroed) {
  if (zeroed != nullptr) *zeroed = false;
  if (kMap && bytes >= kMapBytes) {
    if (bytes > std::numeric_limits<std::size_t>::max() / 2) return nullptr;  // no wrap below
    const std::size_t size = mapped_size(bytes);
    void* p = take_kept(size);  // not zeros: Storage clears it
    if (p == nullptr) {
      try {
        p = gather_kept(size);
      } catch (const std::bad_alloc&) {  // its lists of pieces: nothing was moved
        p = nullptr;
      }
    }
    if (p != nullptr) {
      // Huge pages for this buffer's whole 2 MiB too, where an earlier, smaller one left small
      // pages (those not yet touched).
      advise_huge(p, bytes);
      return p;
    }
    p = map_huge(size, bytes);
    if (p == nullptr && unmap_kept()) p = map_huge(size, bytes);
    if (p == nullptr) return nullptr;  // counted nowhere: a failed request raises no peak
    {
      KeptBuffers& k = kept();
      std::lock_guard<std::mutex> lock(k.mutex);
      count_in_use(k, size);
    }
    if (zeroed != nullptr) *zeroed = true;  // anonymous pages start as zeros; page-aligned
    return p;
  }
  if (!kCache || bytes > kMaxCachedBytes) {
    const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr && kMap && unmap_kept()) p = std::aligned_alloc(kAlignment, rounded);
    return p;
  }
  const int c = size_class(bytes);
  if (Cache::alive) {
    Cache& k = cache();
    k.peak[c] = std::max(k.peak[c], ++k.out[c]);
    auto& list = k.free_lists[c];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
  }
  // The whole class, also on a thread whose cache is gone (its exit): the buffer may be freed
  // on another thread into that thread's list of this class, and handed out again as any size
  // of the class.
  void* p = std::aligned_alloc(kAlignment, kAlignment << c);
  if (p == nullptr && kMap && unmap_kept()) p = std::aligned_alloc(kAlignment, kAlignment << c);
  if (p == nullptr && Cache::alive) --cache().out[c];  // none handed out
  return p;
}

void free_buffer(void* data, std::size_t bytes) {
  if (data == nullptr) return;
  if (kMap && bytes >= kMapBytes) {
    for (const auto& [p, size] : keep(data, mapped_size(bytes))) munmap(p, size);
    return;
  }
  if (!kCache || bytes > kMaxCachedBytes || !Cache::alive) {
    std::free(data);
    return;
  }
  Cache& k = cache();
  const int c = size_class(bytes);
  if (k.out[c] > 0) --k.out[c];  // (a buffer from another thread was not counted here)
  auto& list = k.free_lists[c];
  if (list.size() >= std::max(kMaxCachedPerSize, k.peak[c])) {
    std::free(data);
    return;
  }
  try {
    list.push_back(data);
  } catch (const std::bad_alloc&) {  // no memory to grow the list in: to the system
    std::free(data);
  }
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

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size)
                                    : 0x1p40;
}

bool allocator_caches() { return kCache; }

}  // namespace ember::detail

namespace ember {

MemoryStats memory_stats() {
  MemoryStats stats;
  if (!detail::kMap) return stats;
  detail::KeptBuffers& k = detail::kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  stats.mapped_in_use = k.in_use;
  stats.mapped_kept = k.total;
  stats.mapped_peak = k.peak;
  return stats;
}

void empty_cache() {
  if (!detail::kMap) return;  // under AddressSanitizer nothing is kept
  std::vector<std::pair<void*, std::size_t>> buffers;
  {
    detail::KeptBuffers& k = detail::kept();
    std::lock_guard<std::mutex> lock(k.mutex);
    for (const auto& [at, range] : k.by_address) {
      buffers.emplace_back(reinterpret_cast<void*>(at), range.bytes);
    }
    k.by_address.clear();
    k.by_size.clear();
    k.total = 0;
    k.peak = k.in_use;
  }
  for (const auto& [p, size] : buffers) munmap(p, size);
  // This thread's small buffers too (other threads' lists are theirs alone; they go back to the
  // system when those threads exit).
  if (detail::Cache::alive) {
    detail::Cache& k = detail::cache();
    for (int c = 0; c < detail::kClasses; ++c) {
      for (void* p : k.free_lists[c]) std::free(p);
      k.free_lists[c].clear();
      k.peak[c] = k.out[c];
    }
  }
}

}  // namespace ember
