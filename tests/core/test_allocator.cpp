// Tensor buffers (core/allocator.h): aligned, reused after free without leaking old values
// (a new tensor is zeros even when its buffer held something), sizes across the cache limit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
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

// Buffers from 2 MiB up are mapped from the kernel, 2 MiB-aligned (for huge pages): zeros
// without a memset, and again after a reuse; every byte is usable, also past the last whole
// 2 MiB (the tail the mapping keeps on small pages).
TEST(Allocator, HugeBuffersAreFreshZeros) {
  for (std::size_t bytes : {std::size_t{2} << 20, (std::size_t{2} << 20) + 4096 + 100,
                            (std::size_t{5} << 20) + 64, std::size_t{32} << 20}) {
    for (int round = 0; round < 2; ++round) {
      bool zeroed = false;
      auto* p = static_cast<unsigned char*>(detail::allocate_buffer(bytes, &zeroed));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
#if defined(__SANITIZE_ADDRESS__)
      EXPECT_FALSE(zeroed);  // under ASan every buffer comes from malloc (ASan fills it with 0xbe)
#else
      EXPECT_TRUE(zeroed) << bytes;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (std::size_t{2} << 20), 0u) << bytes;
#endif
      if (zeroed) {
        for (std::size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], 0) << i;
        EXPECT_EQ(p[bytes - 1], 0);
      }
      std::memset(p, 0xAB, bytes);
      detail::free_buffer(p, bytes);
    }
  }
  Tensor t = empty({(int64_t{32} << 20) / 4 + 16});  // a Storage over such a buffer: zeros
  EXPECT_EQ(t.sum().item(), 0.0);
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

}  // namespace
}  // namespace ember
