// Tensor buffers (core/base/allocator.h): aligned, reused after free without leaking old values
// (a new tensor is zeros even when its buffer held something), sizes across the cache limit.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "core/base/allocator.h"
#include "core/ops/linalg.h"
#include "core/ops/shape.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

TEST(Allocator, BuffersAreAlignedAndUsable) {
  for (std::size_t bytes : {64, 128, 192, 4096, 65536, 1 << 20, (1 << 20) + 64, 3 << 20}) {
    void* p = detail::allocate_buffer(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xAB, bytes);  // all of it is ours (ASan would catch an overflow)
    detail::free_buffer(p, bytes);
  }
}

// Buffers from 2 MiB up are mapped from the kernel, 2 MiB-aligned (for huge pages). A fresh
// mapping is zeros without a memset; a freed one is kept (up to 64 MiB in all) and handed out
// again for the same size, no longer zeros, so Storage clears it. Every byte is usable, also past
// the last whole 2 MiB (the tail the mapping keeps on small pages).
TEST(Allocator, BigBuffersAreMappedThenKept) {
  for (std::size_t bytes : {std::size_t{2} << 20, (std::size_t{2} << 20) + 4096 + 100,
                            (std::size_t{5} << 20) + 64, std::size_t{32} << 20}) {
    [[maybe_unused]] void* first = nullptr;  // (unused under ASan)
    for (int round = 0; round < 2; ++round) {
      bool zeroed = false;
      auto* p = static_cast<unsigned char*>(detail::allocate_buffer(bytes, &zeroed));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
      if (!detail::allocator_caches()) {
        // Under ASan every buffer comes from malloc (ASan fills it with 0xbe).
        EXPECT_FALSE(zeroed);
      } else {
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (std::size_t{2} << 20), 0u) << bytes;
        if (round == 0) first = p;
        if (round == 1) {
          EXPECT_EQ(p, first) << bytes;  // the buffer just freed, kept
          EXPECT_FALSE(zeroed) << bytes;
          EXPECT_EQ(p[0], 0xAB);  // what the last owner wrote: Storage must clear it
        }
      }
      if (zeroed) {
        for (std::size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], 0) << i;
        EXPECT_EQ(p[bytes - 1], 0);
      }
      std::memset(p, 0xAB, bytes);
      detail::free_buffer(p, bytes);
    }
  }
  // A Storage over a kept buffer (the one just filled with 0xAB) reads zeros.
  Tensor t = empty({(int64_t{32} << 20) / 4});
  EXPECT_EQ(t.sum().item(), 0.0);
  EXPECT_EQ(t.abs().sum().item(), 0.0);  // (0xABABABAB is a negative float)
}

// A kept buffer serves any later size of its class (sizes rounded up to a whole 2 MiB): a
// generation's activations grow by a token at each step and still reuse the last step's. Past
// the per-thread caches (1 MiB) every buffer is mapped and kept so.
TEST(Allocator, KeptBuffersServeEverySizeOfTheirClass) {
  const std::size_t mib = std::size_t{1} << 20;
  const std::vector<std::vector<std::size_t>> classes = {
      {5 * mib + 64, 5 * mib + 4096 * 7, 6 * mib, 4 * mib + 1},  // the class of 6 MiB
      {mib + mib / 2, mib + 64, 2 * mib, mib + 1}};              // of 2 MiB
  for (const auto& sizes : classes) {
    void* first = detail::allocate_buffer(sizes[0]);
    ASSERT_NE(first, nullptr);
    std::memset(first, 0x11, sizes[0]);
    detail::free_buffer(first, sizes[0]);
    for (std::size_t bytes : sizes) {
      bool zeroed = true;
      auto* p = static_cast<unsigned char*>(detail::allocate_buffer(bytes, &zeroed));
      ASSERT_NE(p, nullptr);
      if (detail::allocator_caches()) {
        EXPECT_EQ(p, first) << bytes;  // the same mapping each time
        EXPECT_FALSE(zeroed) << bytes;
      }
      std::memset(p, 0x22, bytes);  // all of the size asked for is usable
      detail::free_buffer(p, bytes);
    }
  }
  // A tensor over it reads zeros, whatever size of the class it has.
  Tensor t = empty({static_cast<int64_t>(5 * mib / 4 + 1000)});
  EXPECT_EQ(t.abs().sum().item(), 0.0);
}

// A freed big buffer is kept even when it alone is past the old fixed limit of 64 MiB (the kept
// total may reach the most ever in use at once, which this buffer raised): the second round gets
// the same mapping, not zeros. ember::empty_cache() gives it back, and the next one is fresh.
TEST(Allocator, BigBuffersAreKeptUntilEmptyCache) {
  const std::size_t bytes = std::size_t{96} << 20;
  [[maybe_unused]] void* first = nullptr;
  for (int round = 0; round < 3; ++round) {
    if (round == 2) empty_cache();
    bool zeroed = false;
    auto* p = static_cast<unsigned char*>(detail::allocate_buffer(bytes, &zeroed));
    ASSERT_NE(p, nullptr);
    if (detail::allocator_caches()) {
      EXPECT_EQ(zeroed, round != 1) << round;  // fresh pages, kept, fresh again after empty_cache
      if (round == 0) first = p;
      if (round == 1) {
        EXPECT_EQ(p, first);
      }
    }
    p[0] = 1;
    p[bytes - 1] = 1;
    detail::free_buffer(p, bytes);
  }
  empty_cache();
}

// Whether two of buffers 0, 2 and 4 (each `bytes` long) lie side by side, so that freed they
// would be one kept range and no gathering would be needed.
bool side_by_side(const std::vector<unsigned char*>& buffers, std::size_t bytes) {
  for (int i : {0, 2, 4})
    for (int j : {0, 2, 4})
      if (reinterpret_cast<std::uintptr_t>(buffers[i]) + bytes ==
          reinterpret_cast<std::uintptr_t>(buffers[j]))
        return true;
  return false;
}

// Free ranges that no one request fits but that together do serve it: their pages are moved
// to one new range of addresses (gather_kept), keeping what the last owners wrote, and nothing
// is mapped afresh. Buffers 0, 2 and 4 of five are freed while 1 and 3 stay between them.
TEST(Allocator, FreeRangesInPiecesServeOneBiggerBuffer) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "under AddressSanitizer buffers come from malloc, nothing is kept";
  }
  empty_cache();
  const std::size_t piece = std::size_t{4} << 20;
  std::vector<unsigned char*> pieces;
  for (int i = 0; i < 5; ++i) {
    pieces.push_back(static_cast<unsigned char*>(detail::allocate_buffer(piece)));
    ASSERT_NE(pieces.back(), nullptr);
    std::memset(pieces.back(), 0x10 + i, piece);
  }
  if (side_by_side(pieces, piece)) GTEST_SKIP() << "the kernel placed two freed buffers together";
  const MemoryStats before = memory_stats();
  for (int i : {0, 2, 4}) detail::free_buffer(pieces[i], piece);
  EXPECT_EQ(memory_stats().mapped_kept, before.mapped_kept + 3 * piece);

  bool zeroed = true;
  auto* p = static_cast<unsigned char*>(detail::allocate_buffer(3 * piece, &zeroed));
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(zeroed);  // moved pages, not fresh ones
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (std::size_t{2} << 20), 0u);
  for (int i : {0, 2, 4}) EXPECT_NE(p, pieces[i]);                // new addresses
  EXPECT_EQ(memory_stats().mapped_kept, before.mapped_kept);      // all three taken
  EXPECT_EQ(memory_stats().mapped_in_use, before.mapped_in_use);  // 2 pieces + the 3 gathered
  // Each 4 MiB holds one of the freed buffers' bytes, each buffer once.
  std::vector<int> seen;
  for (std::size_t at = 0; at < 3 * piece; at += piece) {
    const unsigned char v = p[at];
    for (std::size_t i = at; i < at + piece; i += 4096) ASSERT_EQ(p[i], v) << i;
    ASSERT_EQ(p[at + piece - 1], v);
    seen.push_back(v);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0x10, 0x12, 0x14}));
  std::memset(p, 0xEE, 3 * piece);  // all of it is usable
  detail::free_buffer(p, 3 * piece);
  for (int i : {1, 3}) detail::free_buffer(pieces[i], piece);
  empty_cache();
  EXPECT_EQ(memory_stats().mapped_kept, 0u);
}

// Gathering moves only pieces whose pages are all resident: a free range never written (a
// fresh mapping nobody touched) would be faulted in by the new owner, adding the resident memory
// gathering is there to save. With one of three freed buffers untouched, two of them serve an
// 8 MiB request, and a 12 MiB one is mapped afresh (zeros) while the three stay free.
TEST(Allocator, GatheringSkipsPagesNeverTouched) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "under AddressSanitizer buffers come from malloc, nothing is kept";
  }
  empty_cache();
  const std::size_t piece = std::size_t{4} << 20;
  std::vector<unsigned char*> pieces;
  for (int i = 0; i < 5; ++i) {
    bool zeroed = false;
    pieces.push_back(static_cast<unsigned char*>(detail::allocate_buffer(piece, &zeroed)));
    ASSERT_NE(pieces.back(), nullptr);
    ASSERT_TRUE(zeroed);  // fresh: its pages are not resident until written
    if (i != 4) std::memset(pieces.back(), 0x20 + i, piece);
  }
  if (side_by_side(pieces, piece)) GTEST_SKIP() << "the kernel placed two freed buffers together";
  for (int i : {0, 2, 4}) detail::free_buffer(pieces[i], piece);
  const std::size_t kept_before = memory_stats().mapped_kept;

  bool zeroed = true;
  auto* big = static_cast<unsigned char*>(detail::allocate_buffer(3 * piece, &zeroed));
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(zeroed);  // mapped afresh: the untouched buffer was not moved
  EXPECT_EQ(memory_stats().mapped_kept, kept_before);
  detail::free_buffer(big, 3 * piece);  // kept too now, on its own

  // 8 MiB: no one range of 4 MiB holds it, nor the 12 MiB just freed (a better fit is not
  // looked for: that range holds it alone, so take_kept serves it). So first take that range
  // out of the way, then ask for 8 MiB from the three pieces.
  auto* again = static_cast<unsigned char*>(detail::allocate_buffer(3 * piece, &zeroed));
  ASSERT_EQ(again, big);
  auto* p = static_cast<unsigned char*>(detail::allocate_buffer(2 * piece, &zeroed));
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(zeroed);  // gathered
  std::vector<int> seen = {p[0], p[piece]};
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0x20, 0x22}));  // the two written buffers, not the third
  detail::free_buffer(p, 2 * piece);
  detail::free_buffer(again, 3 * piece);
  for (int i : {1, 3}) detail::free_buffer(pieces[i], piece);
  empty_cache();
}

// Ops that write every element of their output skip clearing its buffer
// (detail::empty_for_overwrite). Over a kept big buffer still full of an earlier tensor's NaNs,
// a product (also of depth 0) and a contiguous copy still give exactly their values.
TEST(Allocator, OverwrittenOutputsShowNothingOfAReusedBuffer) {
  const int64_t rows = 1024, cols = 512;  // 2 MiB of float32: a kept buffer
  for (int64_t depth : {3, 0}) {
    { Tensor dirty = full({rows, cols}, std::nan("")); }
    Tensor c = matmul(ones({rows, depth}), ones({depth, cols}));
    EXPECT_EQ(c.sum().item(), static_cast<double>(rows * cols * depth)) << depth;
  }
  { Tensor dirty = full({rows, cols}, std::nan("")); }
  Tensor source = arange(rows * cols).reshape({cols, rows});
  Tensor copy = source.t().contiguous();
  EXPECT_EQ(copy.sum().item(), source.sum().item());
  EXPECT_EQ(copy.index({3, 5}).item(), source.index({5, 3}).item());
}

// A size no machine has is a null pointer (Storage turns it into an ember::Error), not a
// mapping of a wrapped-around small size.
TEST(Allocator, ImpossibleSizesAreNull) {
  for (std::size_t bytes :
       {std::numeric_limits<std::size_t>::max() - 64,
        std::numeric_limits<std::size_t>::max() / 2 + 1, std::size_t{1} << 60}) {
    void* p = detail::allocate_buffer(bytes);
    EXPECT_EQ(p, nullptr) << bytes;
    detail::free_buffer(p, bytes);
  }
}

// A request the system cannot map (2^47 bytes: more than a 47-bit address space holds, whatever
// the overcommit policy) is an Error and leaves memory_stats as it was: its size is never counted
// as in use, nor as the peak (which bounds what the allocator keeps for reuse).
TEST(Allocator, AFailedRequestRaisesNoPeak) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "under AddressSanitizer buffers come from malloc, nothing is counted";
  }
  empty_cache();
  const Tensor live = empty({(int64_t{3} << 20) / 4});  // 3 MiB: 4 MiB counted
  const MemoryStats before = memory_stats();
  EXPECT_GE(before.mapped_in_use, std::size_t{4} << 20);
  EXPECT_EQ(before.mapped_peak, before.mapped_in_use);
  const std::size_t huge = std::size_t{1} << 47;
  EXPECT_EQ(detail::allocate_buffer(huge), nullptr);
  EXPECT_THROW(empty({static_cast<int64_t>(huge / 4)}), Error);
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.mapped_in_use, before.mapped_in_use);
  EXPECT_EQ(after.mapped_peak, before.mapped_peak);
  EXPECT_EQ(after.mapped_kept, before.mapped_kept);
}

// A program at its address-space limit (ulimit -v) still frees its tensors. Freeing keeps a
// buffer in a list (the thread's small buffers, the big buffers' free ranges), and a list that
// has to grow finds no memory there: the buffer then goes back to the system, since a
// std::bad_alloc thrown in a tensor's destructor would end the program (std::terminate). Run in
// a child process (a death test), whose limit the others do not share.
TEST(Allocator, FreeingAtTheAddressSpaceLimit) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: no limit fits it";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto fill_then_free = [](const Shape& shape) {
    std::vector<Tensor> live;
    live.reserve(std::size_t{1} << 20);  // before the limit
    if (!test::limit_address_space(std::size_t{64} << 20)) std::_Exit(2);
    try {
      while (live.size() < live.capacity()) live.push_back(empty(shape));
    } catch (const std::exception&) {  // out of memory: the limit is reached
    }
    if (live.size() < 8) std::_Exit(4);
    live.clear();  // every buffer freed
    const Tensor again = full(shape, 2.0);
    std::_Exit(again.sum().item() == 2.0 * static_cast<double>(again.numel()) ? 0 : 5);
  };
  EXPECT_EXIT(fill_then_free({1000}), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(fill_then_free({1 << 19}), ::testing::ExitedWithCode(0), "");
}

// Memory kept for reuse is given back when the system refuses a request for want of it: under an
// address-space limit (ulimit -v) that 256 MiB of kept buffers would exceed, a 300 MiB tensor
// and then 1 MiB ones are had, not refused ("not enough memory") while the memory they need lies
// unused in the allocator's keeping. In a child process (a death test).
TEST(Allocator, KeptMemoryIsGivenBackWhenARequestIsRefused) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: no limit fits it";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto at_the_limit = [](int64_t later_bytes, int count) {
    empty_cache();
    { const Tensor kept = full({(int64_t{256} << 20) / 4}, 1.0); }  // freed: kept for reuse
    if (memory_stats().mapped_kept < (std::size_t{256} << 20)) std::_Exit(2);
    if (!test::limit_address_space(std::size_t{64} << 20)) std::_Exit(3);
    std::vector<Tensor> later;
    later.reserve(static_cast<std::size_t>(count));
    try {
      for (int i = 0; i < count; ++i) later.push_back(full({later_bytes / 4}, 2.0));
    } catch (const Error&) {
      std::_Exit(5);
    }
    std::_Exit(later.back().sum().item() == 2.0 * static_cast<double>(later_bytes / 4) ? 0 : 6);
  };
  EXPECT_EXIT(at_the_limit(int64_t{300} << 20, 1), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(at_the_limit(int64_t{1} << 20, 100), ::testing::ExitedWithCode(0), "");
}

TEST(Allocator, ReusedBufferStartsAsZeros) {
  for (int round = 0; round < 3; ++round) {
    {
      Tensor t = empty({37, 5});
      t.fill_(7.0);
    }
    Tensor fresh = empty({37, 5});  // most likely the buffer just freed
    for (double v : test::values(fresh)) ASSERT_EQ(v, 0.0);
  }
}

TEST(Allocator, ManyLiveBuffersOfOneSize) {
  std::vector<Tensor> live;
  for (int i = 0; i < 100; ++i) live.push_back(full({4, 4}, static_cast<double>(i)));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(test::values(live[i])[15], static_cast<double>(i));
  live.clear();
  for (int i = 0; i < 100; ++i) live.push_back(zeros({4, 4}));
  for (const Tensor& t : live) EXPECT_EQ(test::values(t), std::vector<double>(16, 0.0));
}

// Small objects (core/base/allocator.h's allocate_object): every size up to the pooled limit and past
// it is usable in full, live objects never share memory, and a freed one is handed out again.
TEST(Allocator, SmallObjectsAreDistinctAndReused) {
  for (std::size_t bytes : {1, 8, 16, 17, 200, 1023, 1024, 1025, 5000}) {
    std::vector<unsigned char*> live;
    for (int i = 0; i < 50; ++i) {
      auto* p = static_cast<unsigned char*>(detail::allocate_object(bytes));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0u);
      std::memset(p, i, bytes);
      live.push_back(p);
    }
    for (int i = 0; i < 50; ++i) {
      for (std::size_t b = 0; b < bytes; ++b) ASSERT_EQ(live[i][b], i) << bytes << " " << b;
    }
    for (unsigned char* p : live) detail::free_object(p, bytes);
    void* again = detail::allocate_object(bytes);
    if (detail::allocator_caches()) {
      if (bytes <= 1024) {
        EXPECT_EQ(again, live.back()) << bytes;  // the last freed, first reused
      }
    }
    detail::free_object(again, bytes);
  }
}

// An object may die on another thread than the one that made it (a tensor handed to a worker);
// it then joins that thread's lists, which go back to the system when the thread exits.
TEST(Allocator, ObjectsFreedOnAnotherThread) {
  std::vector<Tensor> made;
  for (int i = 0; i < 200; ++i)
    made.push_back(full({2, 3}, static_cast<double>(i)).requires_grad_());
  std::vector<Tensor> sums(made.size());
  std::thread worker([&] {
    for (std::size_t i = 0; i < made.size(); ++i) sums[i] = (made[i] * 2.0).sum();
    made.clear();  // the handles, storages and nodes made on the main thread die here
  });
  worker.join();
  for (std::size_t i = 0; i < sums.size(); ++i) {
    EXPECT_EQ(sums[i].item(), 12.0 * static_cast<double>(i));
    sums[i].backward();  // the graph made on the worker runs (and dies) on this thread
  }
}

// Graph nodes keep their edges in ObjectVector: a node with many inputs (past the pooled size)
// works as one with two.
TEST(Allocator, NodesWithManyInputs) {
  std::vector<Tensor> parts;
  for (int i = 0; i < 300; ++i) parts.push_back(full({1}, 1.0).requires_grad_());
  Tensor total = cat(parts, 0).sum();
  ASSERT_EQ(total.grad_fn()->next_functions.size(), 1u);
  EXPECT_EQ(total.grad_fn()->next_functions[0]->next_functions.size(), 300u);
  total.backward();
  for (const Tensor& p : parts) EXPECT_EQ(p.grad().item(), 1.0);
}

// At a thread's exit its caches are destroyed before the thread_local objects made earlier on
// it; what such a destructor allocates bypasses the (gone) caches, but is still of its whole
// size class: another thread may free it into its own list of that class, which hands it out
// again for any size of the class (a 40-byte object as a 48-byte one, a 300-byte buffer as a
// 512-byte one). The tensor a destructor makes there also works, and dies on this thread.
struct MadeAtThreadExit {
  void* object = nullptr;
  void* buffer = nullptr;
  Tensor tensor;
};
MadeAtThreadExit made_at_exit;

struct AllocatesAtThreadExit {
  ~AllocatesAtThreadExit() {
    made_at_exit.object = detail::allocate_object(40);
    made_at_exit.buffer = detail::allocate_buffer(300);
    made_at_exit.tensor = full({3, 5}, 2.0) * 3.0;
  }
};

TEST(Allocator, AllocationsAfterAThreadsCachesAreGoneFitTheirClass) {
  std::thread([] {
    thread_local AllocatesAtThreadExit late;  // made before this thread's caches: dies after
    static_cast<void>(&late);
    detail::free_object(detail::allocate_object(16), 16);  // the caches exist from here
    Tensor t = ones({2, 2}) + 1.0;
  }).join();
  ASSERT_NE(made_at_exit.object, nullptr);
  ASSERT_NE(made_at_exit.buffer, nullptr);
  if (detail::allocator_caches()) {  // (no caches under AddressSanitizer: sizes are exact there)
    EXPECT_GE(malloc_usable_size(made_at_exit.object), 48u);
    EXPECT_GE(malloc_usable_size(made_at_exit.buffer), 512u);
  }
  detail::free_object(made_at_exit.object, 40);  // into this thread's lists
  detail::free_buffer(made_at_exit.buffer, 300);
  void* object = detail::allocate_object(48);
  void* buffer = detail::allocate_buffer(512);
  std::memset(object, 0xAB, 48);
  std::memset(buffer, 0xAB, 512);
  detail::free_object(object, 48);
  detail::free_buffer(buffer, 512);
  EXPECT_EQ(test::values(made_at_exit.tensor), std::vector<double>(15, 6.0));
  made_at_exit.tensor = Tensor();
}

}  // namespace
}  // namespace ember
