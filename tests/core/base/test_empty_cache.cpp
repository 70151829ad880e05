// The caching policy of big buffers (core/base/allocator.h): a training loop's working set is kept
// across steps, however large, and ember::empty_cache() gives back what no tensor uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/base/allocator.h"
#include "core/tensor/tensor.h"

namespace ember {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Every allocation of a "step" (buffers of 3 to 40 MiB, 300 MiB in all, more than the 64 MiB that
// used to be kept) is served from the kept buffers of the step before: the same addresses, no
// fresh mapping (a fresh mapping reports zeroed = true).
TEST(MemoryCache, ALoopsWorkingSetIsReusedStepAfterStep) {
  empty_cache();
  const std::vector<std::size_t> sizes = {40 * kMiB, 3 * kMiB,  25 * kMiB, 40 * kMiB,
                                          7 * kMiB,  33 * kMiB, 40 * kMiB, 12 * kMiB,
                                          30 * kMiB, 35 * kMiB, 20 * kMiB, 15 * kMiB};
  std::vector<void*> previous;
  for (int step = 0; step < 3; ++step) {
    std::vector<void*> live;
    int fresh = 0;
    for (std::size_t bytes : sizes) {
      bool zeroed = false;
      void* p = detail::allocate_buffer(bytes, &zeroed);
      ASSERT_NE(p, nullptr);
      static_cast<unsigned char*>(p)[bytes - 1] = 1;
      fresh += zeroed ? 1 : 0;
      live.push_back(p);
    }
    if (detail::allocator_caches()) {
      EXPECT_EQ(fresh, step == 0 ? static_cast<int>(sizes.size()) : 0) << "step " << step;
      if (step > 0) {
        std::vector<void*> a = live, b = previous;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << "step " << step;  // the same buffers
      }
      const MemoryStats stats = memory_stats();
      EXPECT_GE(stats.mapped_in_use, 300 * kMiB);
      EXPECT_GE(stats.mapped_peak, stats.mapped_in_use);
    }
    // Freed in another order than allocated, as a graph is.
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t j = (i * 5) % sizes.size();
      detail::free_buffer(live[j], sizes[j]);
    }
    previous = live;
  }
  if (detail::allocator_caches()) {
    EXPECT_GE(memory_stats().mapped_kept, 300 * kMiB);
  }
  empty_cache();
  EXPECT_EQ(memory_stats().mapped_kept, 0u);
}

// Memory freed as one size serves other sizes (best fit, as PyTorch's CUDA caching allocator
// splits and merges blocks): a GPT's activations, freed in its backward, hold AdamW's moments, and
// the gradients zero_grad frees hold the next step's activations. A freed 10 MiB buffer holds a 4
// and then a 6 MiB one, back to back; freed, the two merge again into the 10 MiB, which a 10 MiB
// buffer takes whole. Nothing is mapped afresh (a fresh mapping reports zeroed = true).
TEST(MemoryCache, FreedMemoryServesOtherSizes) {
  empty_cache();
  [[maybe_unused]] const std::size_t in_use_before = memory_stats().mapped_in_use;
  void* whole = detail::allocate_buffer(10 * kMiB);
  ASSERT_NE(whole, nullptr);
  detail::free_buffer(whole, 10 * kMiB);
  bool zeroed = true;
  void* a = detail::allocate_buffer(4 * kMiB - 64, &zeroed);
  ASSERT_NE(a, nullptr);
  if (detail::allocator_caches()) {
    EXPECT_EQ(a, whole);
    EXPECT_FALSE(zeroed);
    EXPECT_EQ(memory_stats().mapped_kept, 6 * kMiB);
  }
  zeroed = true;
  void* b = detail::allocate_buffer(5 * kMiB + 1, &zeroed);  // a range of 6 MiB
  ASSERT_NE(b, nullptr);
  if (detail::allocator_caches()) {
    EXPECT_EQ(b, static_cast<unsigned char*>(whole) + 4 * kMiB);
    EXPECT_FALSE(zeroed);
    EXPECT_EQ(memory_stats().mapped_kept, 0u);
    EXPECT_EQ(memory_stats().mapped_in_use, in_use_before + 10 * kMiB);
  }
  std::memset(a, 0x11, 4 * kMiB - 64);  // every byte of both is usable
  std::memset(b, 0x22, 5 * kMiB + 1);
  EXPECT_EQ(static_cast<unsigned char*>(a)[4 * kMiB - 65], 0x11);
  detail::free_buffer(b, 5 * kMiB + 1);
  detail::free_buffer(a, 4 * kMiB - 64);
  if (detail::allocator_caches()) {
    EXPECT_EQ(memory_stats().mapped_kept, 10 * kMiB);
  }
  zeroed = true;
  void* again = detail::allocate_buffer(10 * kMiB, &zeroed);
  ASSERT_NE(again, nullptr);
  if (detail::allocator_caches()) {
    EXPECT_EQ(again, whole);  // the two halves merged back
    EXPECT_FALSE(zeroed);
  }
  detail::free_buffer(again, 10 * kMiB);
  // A tensor over reused memory still starts as zeros.
  Tensor t = empty({static_cast<int64_t>(3 * kMiB)});
  EXPECT_EQ(t.abs().sum().item(), 0.0);
  empty_cache();
}

// empty_cache frees only what is unused: a live tensor keeps its values, and the kept buffers
// (and only they) are given back.
TEST(MemoryCache, EmptyCacheGivesBackOnlyWhatIsUnused) {
  empty_cache();
  [[maybe_unused]] const MemoryStats before = memory_stats();  // read only outside ASan
  Tensor live = full({int64_t{8} << 20}, 3.0);                 // 32 MiB, mapped
  { Tensor dead = full({int64_t{16} << 20}, 5.0); }            // 64 MiB, freed: kept
  if (detail::allocator_caches()) {
    EXPECT_EQ(memory_stats().mapped_in_use, before.mapped_in_use + 32 * kMiB);
    EXPECT_EQ(memory_stats().mapped_kept, 64 * kMiB);
  }
  empty_cache();
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.mapped_kept, 0u);
  if (detail::allocator_caches()) {
    EXPECT_EQ(after.mapped_in_use, before.mapped_in_use + 32 * kMiB);
    EXPECT_EQ(after.mapped_peak, after.mapped_in_use);  // the limit starts again from what is used
  }
  EXPECT_EQ(live.sum().item(), 3.0 * static_cast<double>(int64_t{8} << 20));
  empty_cache();  // twice is fine
}

// The kept total never passes the most ever in use at once (nor 64 MiB): buffers of sizes that
// are not asked for again (a generation's growing sequence) go back to the system, the oldest
// first.
TEST(MemoryCache, KeptBytesStayWithinThePeakInUse) {
  empty_cache();
  for (std::size_t mib = 3; mib < 60; mib += 2) {  // one class at a time, each freed at once
    void* p = detail::allocate_buffer(mib * kMiB + 64);
    ASSERT_NE(p, nullptr);
    detail::free_buffer(p, mib * kMiB + 64);
    const MemoryStats stats = memory_stats();
    EXPECT_LE(stats.mapped_kept, std::max(stats.mapped_peak, 64 * kMiB)) << mib;
  }
  if (detail::allocator_caches()) {
    // The newest (59 MiB + 64 B, a class of 60 MiB) is still kept; the older ones went first.
    bool zeroed = true;
    void* p = detail::allocate_buffer(59 * kMiB + 64, &zeroed);
    EXPECT_FALSE(zeroed);
    detail::free_buffer(p, 59 * kMiB + 64);
  }
  empty_cache();
}

}  // namespace
}  // namespace ember
