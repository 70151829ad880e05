// The packed GEMM (core/kernels/gemm.cpp) against the portable reference loop: the same bits for
// every shape (edges of the micro-tile and of the cache blocks), every layout of A and B
// (transposed operands are read through their strides), accumulate or not, batched products
// with broadcast operands, and 1 or 2 threads. Plus ember::set_num_threads.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/kernels/gemm.h"
#include "tests/core/kernels/targets.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;

// Restores the thread count a test changed.
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

// n values in [-1, 1) from a 64-bit linear congruential generator (Knuth's MMIX constants): the
// same on every machine, and cheap in the test build (compiled at -O0, where std::mt19937 with
// std::uniform_real_distribution took most of the skinny sweep's time).
template <typename T>
std::vector<T> random_values(int64_t n, unsigned seed) {
  uint64_t state = (uint64_t{seed} + 1) * 0x9E3779B97F4A7C15ull;
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<T>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);  // 53 bits: [0, 2)
  }
  return v;
}

// A [M, K] and B [K, N] stored plain or transposed; C with a row stride wider than N. With a
// bias_stride (>= 0), gemm_bias against the reference accumulating onto rows set to the bias.
template <typename T>
void expect_same_as_reference(int64_t M, int64_t N, int64_t K, bool a_t, bool b_t, bool accumulate,
                              int64_t bias_stride = -1) {
  SCOPED_TRACE(::testing::Message()
               << "M=" << M << " N=" << N << " K=" << K << " a_t=" << a_t << " b_t=" << b_t
               << " accumulate=" << accumulate << " bias_stride=" << bias_stride);
  const std::vector<T> a = random_values<T>(M * K, 1), b = random_values<T>(K * N, 2);
  const std::vector<T> bias = random_values<T>(N * 3 + 1, 4);
  const int64_t lda_row = a_t ? 1 : K, lda_col = a_t ? M : 1;
  const int64_t ldb_row = b_t ? 1 : N, ldb_col = b_t ? K : 1;
  const int64_t ldc = N + 3;
  std::vector<T> c = random_values<T>(M * ldc, 3), expected = c;
  if (bias_stride >= 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) expected[i * ldc + j] = bias[j * bias_stride];
    kernels::gemm_bias<T>(M, N, K, a.data(), lda_row, lda_col, b.data(), ldb_row, ldb_col,
                          bias.data(), bias_stride, c.data(), ldc);
  } else {
    kernels::gemm<T>(M, N, K, a.data(), lda_row, lda_col, b.data(), ldb_row, ldb_col, c.data(), ldc,
                     accumulate);
  }
  kernels::gemm_reference<T>(M, N, K, a.data(), lda_row, lda_col, b.data(), ldb_row, ldb_col,
                             expected.data(), ldc, accumulate || bias_stride >= 0);
  int64_t mismatches = 0;
  for (std::size_t i = 0; i < c.size(); ++i) mismatches += c[i] != expected[i];
  EXPECT_EQ(mismatches, 0) << "first element " << c[0] << " vs " << expected[0];
}

template <typename T>
void sweep_shapes() {
  // Micro-tile edges (6 x 16 / 6 x 8 / 6 x 32), K past one K block (256), M past one M block,
  // N past one N block (4096 floats, 2048 doubles), vectors, and a C over 1 MiB (the blocks that
  // prefetch the next tile of C, also when two threads split it) with partial tiles at both edges.
  const int64_t shapes[][3] = {{7, 33, 5},   {6, 16, 40},   {13, 17, 300},  {150, 40, 70},
                               {1, 70, 80},  {90, 1, 100},  {8, 4200, 20},  {64, 64, 64},
                               {5, 2100, 9}, {31, 29, 513}, {301, 2000, 21}};
  for (const auto& s : shapes) {
    for (int layout = 0; layout < 4; ++layout) {
      expect_same_as_reference<T>(s[0], s[1], s[2], layout & 1, layout & 2, layout == 3);
    }
  }
}

TEST(Gemm, Float32MatchesReferenceBitForBit) { sweep_shapes<float>(); }
TEST(Gemm, Float64MatchesReferenceBitForBit) { sweep_shapes<double>(); }

// gemm_bias: each C[i, j] is the chain the reference gives when C's rows start as the bias
// (what addmm did before: copy the bias, then accumulate), bit for bit: every path (tiny,
// skinny, blocked with the bias written into each tile, K = 0), operands plain and transposed,
// a bias with stride 1, 3 or 0 (one value broadcast), at 1 and 2 threads.
template <typename T>
void sweep_bias_shapes() {
  ThreadsGuard guard;
  const int64_t shapes[][3] = {{7, 33, 5},    {6, 16, 40},     {13, 17, 300}, {150, 40, 70},
                               {20, 70, 0},   {90, 1, 100},    {8, 300, 20},  {64, 64, 64},
                               {31, 29, 513}, {301, 2000, 21}, {768, 128, 64}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    for (const auto& s : shapes) {
      for (int layout = 0; layout < 4; ++layout) {
        for (int64_t bias_stride : {1, 3, 0}) {
          expect_same_as_reference<T>(s[0], s[1], s[2], layout & 1, layout & 2, false, bias_stride);
        }
      }
    }
  }
}

TEST(Gemm, Float32BiasMatchesACopiedBiasBitForBit) { sweep_bias_shapes<float>(); }
TEST(Gemm, Float64BiasMatchesACopiedBiasBitForBit) { sweep_bias_shapes<double>(); }

// The blocked path reads rows of A in place for blocks up to 1024 columns wide and packs them
// beyond (gemm.cpp, multiply_block): both sides of that width, partial row tiles (17 and 151
// rows: 6-row tiles plus 5 and 1), K within and past one K block, B plain and transposed,
// accumulating or not.
TEST(Gemm, RowsOfAReadInPlaceMatchReferenceBitForBit) {
  const int64_t shapes[][3] = {{17, 33, 300},  {151, 33, 300}, {17, 1024, 7},
                               {151, 1024, 7}, {17, 1025, 7},  {151, 1025, 7}};
  for (const auto& s : shapes) {
    for (bool b_t : {false, true}) {
      for (bool accumulate : {false, true}) {
        expect_same_as_reference<float>(s[0], s[1], s[2], false, b_t, accumulate);
      }
    }
  }
}

TEST(Gemm, SameBitsAtOneAndTwoThreads) {
  ThreadsGuard guard;
  // ({130, 256, 50}: fewer column tiles than row tiles, yet split along N, since M < N.)
  for (const auto& s :
       {std::vector<int64_t>{8, 3000, 100}, {300, 20, 200}, {100, 100, 100}, {130, 256, 50}}) {
    const int64_t M = s[0], N = s[1], K = s[2];
    const std::vector<float> a = random_values<float>(M * K, 4), b = random_values<float>(K * N, 5);
    std::vector<float> one(M * N), two(M * N);
    set_num_threads(1);
    kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), 1, K, one.data(), N, false);
    set_num_threads(2);
    kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), 1, K, two.data(), N, false);
    EXPECT_EQ(one, two) << "M=" << M << " N=" << N << " K=" << K;
  }
}

// The skinny path (M <= 16 rows: B read in place, lanes down the rows of C): every row count
// 1..16 (one or two registers of 8, padded rows; 9..12 rows with B transposed take one register
// plus the transposed-block tail kernel, K = 13 and 301 with a remainder past its 8-wide
// blocks, N = 203 with chunks of 1..4 tiles and single columns), odd N (tiles of 8 or 4 columns
// plus single ones; 50257 as the GPT's vocabulary), K not a multiple of 8 nor of a cache line, B
// plain and transposed, accumulating or not; at 1 and 2 threads (N split between them), each the
// reference's bits, so both counts give the same bits.
template <typename T>
void sweep_skinny() {
  ThreadsGuard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    for (int64_t M = 1; M <= 16; ++M) {
      for (int64_t N : {1, 7, 17, 203}) {  // 203 = 25 tiles of 8 + 3 single columns
        for (int64_t K : {3, 13, 301}) {
          for (int layout = 0; layout < 4; ++layout) {
            expect_same_as_reference<T>(M, N, K, false, layout & 1, layout & 2);
          }
        }
      }
      expect_same_as_reference<T>(M, 50257, 9, false, true, M % 2 == 1);
    }
    // One row with W^T (the row kernel): 59 = 16 + 16 + 16 + 8 + 3 columns, rows of W 4 KB
    // apart (K = 1024) and not (K = 1000), accumulating or not.
    for (int64_t K : {1000, 1024}) {
      for (bool accumulate : {false, true}) {
        expect_same_as_reference<T>(1, 59, K, false, true, accumulate);
      }
    }
    // One row with B's rows contiguous (row_b_f32): 211 = 3 x 64 + 2 x 8 + 3 columns (on x86;
    // 6 x 32 + 4 x 4 + 3 on NEON), K = 1000 and 64 (attention's weights times V), accumulating or
    // not.
    for (int64_t K : {1000, 64}) {
      for (bool accumulate : {false, true}) {
        expect_same_as_reference<T>(1, 211, K, false, false, accumulate);
      }
    }
    expect_same_as_reference<T>(8, 300, 40, true, true, false);  // A^T read through strides
  }
}

// Tiny products with rows of C shorter than a vector (N < 8: the book's 6 x 3 @ 3 x 2) run one
// fma chain per element (dot_products) instead of the reference's row loop: same bits, every
// layout, accumulating or not, for floats and doubles (int64 products, whose wrapping sums do
// not depend on the order, are checked against PyTorch's in test_linalg).
template <typename T>
void sweep_tiny() {
  for (int64_t M : {1, 5, 6, 12})
    for (int64_t N = 1; N < 8; ++N)
      for (int64_t K : {1, 3, 12})
        for (int layout = 0; layout < 8; ++layout)
          expect_same_as_reference<T>(M, N, K, layout & 1, layout & 2, layout & 4);
}

TEST(Gemm, TinyNarrowProductsMatchReferenceBitForBit) {
  sweep_tiny<float>();
  sweep_tiny<double>();
}

TEST(Gemm, SkinnyFloat32MatchesReferenceBitForBit) { sweep_skinny<float>(); }
TEST(Gemm, SkinnyFloat64MatchesReferenceBitForBit) { sweep_skinny<double>(); }

TEST(Gemm, SkinnySameBitsAtOneAndTwoThreads) {
  ThreadsGuard guard;
  const int64_t M = 10, N = 5003, K = 77;  // two registers of rows, N cut in two pieces
  const std::vector<float> a = random_values<float>(M * K, 8), b = random_values<float>(K * N, 9);
  for (bool b_t : {false, true}) {
    const int64_t ldb_row = b_t ? 1 : N, ldb_col = b_t ? K : 1;
    std::vector<float> one(M * N), two(M * N);
    set_num_threads(1);
    kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), ldb_row, ldb_col, one.data(), N, false);
    set_num_threads(2);
    kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), ldb_row, ldb_col, two.data(), N, false);
    EXPECT_EQ(one, two) << "b_t=" << b_t;
  }
}

TEST(Gemm, BatchedWithBroadcastOperandMatchesEachProduct) {
  ThreadsGuard guard;
  set_num_threads(2);
  const int64_t batch = 3, M = 20, N = 50, K = 30;  // an odd batch: products are cut in pieces
  const std::vector<double> a = random_values<double>(batch * M * K, 6);
  const std::vector<double> b = random_values<double>(K * N, 7);  // one B for every product
  std::vector<double> c(batch * M * N), expected(batch * M * N);
  kernels::gemm_batched<double>(batch, M, N, K, a.data(), M * K, K, 1, b.data(), 0, N, 1, c.data(),
                                M * N, N, false);
  for (int64_t i = 0; i < batch; ++i) {
    kernels::gemm_reference<double>(M, N, K, a.data() + i * M * K, K, 1, b.data(), N, 1,
                                    expected.data() + i * M * N, N, false);
  }
  EXPECT_EQ(c, expected);
}

TEST(Gemm, EmptyDepthZeroesOrKeepsC) {
  std::vector<float> c(40 * 50, 2.0f);
  const float unused = 0.0f;
  kernels::gemm<float>(40, 50, 0, &unused, 0, 1, &unused, 50, 1, c.data(), 50, true);
  EXPECT_EQ(c, std::vector<float>(40 * 50, 2.0f));
  kernels::gemm<float>(40, 50, 0, &unused, 0, 1, &unused, 50, 1, c.data(), 50, false);
  EXPECT_EQ(c, std::vector<float>(40 * 50, 0.0f));
}

// gemm_packed_b (B packed once by pack_b_panels, A read in place) against the reference loop:
// the same bits, with A's rows or its columns contiguous, partial row and column tiles, depths
// past one K block (256), products over a prefix of the packed rows and columns (as fused
// attention's blocks use K and V), accumulating or not.
template <typename T>
void expect_packed_b_same_as_reference(int64_t M, int64_t N, int64_t k, int64_t K_packed,
                                       int64_t N_packed, bool a_t, bool accumulate) {
  SCOPED_TRACE(::testing::Message()
               << "M=" << M << " N=" << N << " k=" << k << " K_packed=" << K_packed
               << " N_packed=" << N_packed << " a_t=" << a_t << " accumulate=" << accumulate);
  const std::vector<T> a = random_values<T>(M * k, 11),
                       b = random_values<T>(K_packed * N_packed, 12);
  const int64_t lda_row = a_t ? 1 : k, lda_col = a_t ? M : 1;
  const int64_t ldc = N + 5;
  std::vector<T> c = random_values<T>(M * ldc, 13), expected = c;
  // B stored transposed ([N_packed, K_packed]), as attention's K^T: read through strides.
  std::vector<T> packed(static_cast<std::size_t>(kernels::packed_b_size<T>(K_packed, N_packed)) +
                        64);
  T* aligned = packed.data();
  while (reinterpret_cast<std::uintptr_t>(aligned) % 64 != 0) ++aligned;
  kernels::pack_b_panels<T>(K_packed, N_packed, b.data(), 1, K_packed, aligned);
  kernels::gemm_packed_b<T>(M, N, k, a.data(), lda_row, lda_col, aligned, K_packed, c.data(), ldc,
                            accumulate);
  kernels::gemm_reference<T>(M, N, k, a.data(), lda_row, lda_col, b.data(), 1, K_packed,
                             expected.data(), ldc, accumulate);
  int64_t mismatches = 0;
  for (std::size_t i = 0; i < c.size(); ++i) mismatches += c[i] != expected[i];
  EXPECT_EQ(mismatches, 0);
}

template <typename T>
void sweep_packed_b() {
  // M, N, k, K_packed, N_packed; the last two are attention's tiles at T = 64 (N = 48: a pair of
  // panels and a whole single one, the 6 x 16 AVX-512 tile; 16 rows: a partial row tile)
  const int64_t shapes[][5] = {
      {64, 64, 64, 64, 64}, {64, 1024, 64, 64, 1024}, {64, 70, 64, 64, 130}, {13, 64, 300, 512, 64},
      {5, 17, 9, 9, 17},    {1, 33, 257, 300, 40},    {130, 8, 70, 70, 8},   {6, 16, 1, 1, 16},
      {48, 48, 32, 32, 64}, {16, 48, 32, 32, 64}};
  for (const auto& s : shapes) {
    for (int layout = 0; layout < 4; ++layout) {
      expect_packed_b_same_as_reference<T>(s[0], s[1], s[2], s[3], s[4], layout & 1, layout & 2);
    }
  }
}

TEST(Gemm, PackedBFloat32MatchesReferenceBitForBit) { sweep_packed_b<float>(); }
TEST(Gemm, PackedBFloat64MatchesReferenceBitForBit) { sweep_packed_b<double>(); }

// Packing memory is the calling thread's, kept from one product to the next (gemm_internal.h's
// ThreadBuffer): a product that follows another asks the system for no new pages even when the
// tensors' allocator has since handed the memory it freed to tensors. (Until 2026-11-26 the
// workspace came from that allocator: here the second product then mapped fresh pages and
// faulted them in.)
TEST(Gemm, PackingMemoryIsKeptAcrossProducts) {
  ThreadsGuard guard;
  set_num_threads(2);
  const int64_t M = 288, N = 4096, K = 512;  // two threads' blocks of packed B: ~8 MiB
  const std::vector<float> a = random_values<float>(M * K, 8), b = random_values<float>(K * N, 9);
  std::vector<float> c(M * N), again(M * N);
  kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), N, 1, c.data(), N, false);
  kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), N, 1, again.data(), N, false);
  // Every free range the tensors' allocator keeps, taken by buffers of 2 MiB (and touched).
  const std::size_t bytes = std::size_t{2} << 20;
  std::vector<void*> held;
  while (memory_stats().mapped_kept > 0 && held.size() < 4096) {
    held.push_back(detail::allocate_buffer(bytes));
    ASSERT_NE(held.back(), nullptr);
    std::memset(held.back(), 1, bytes);
  }
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), N, 1, again.data(), N, false);
  getrusage(RUSAGE_SELF, &after);
  for (void* p : held) detail::free_buffer(p, bytes);
  // Fresh packing memory would be ~8 MiB faulted in: 2,048 faults in 4 KiB pages, 4 even in 2 MiB
  // ones. A stray fault or two is not that (ASan's shadow memory, a worker's stack: seen once
  // under ASan at AVX2).
  EXPECT_LT(after.ru_minflt - before.ru_minflt, 3);
  EXPECT_EQ(c, again);
}

// A workspace past ThreadBuffer::kKeptPerThread (the skinny path's packed A grows with K: 64 MiB
// here) is not kept by the thread for the rest of its life, out of sight of memory_stats and
// empty_cache: it comes from the tensors' allocator, counted while the product runs.
TEST(Gemm, LargePackingMemoryComesFromTheAllocator) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "under AddressSanitizer buffers come from malloc, nothing is counted";
  }
  if (std::string(kernels::gemm_isa()) == "portable") {
    GTEST_SKIP() << "no skinny path on " << cpu::target_name()
                 << ": every product packs blocks of KC, a few MiB a thread";
  }
  ThreadsGuard guard;
  set_num_threads(1);
  const int64_t M = 16, N = 3, K = int64_t{1} << 20;        // packed A: 16 x 2^20 floats, 64 MiB
  const std::vector<float> a(M * K, 1.0f), b(K * N, 0.5f);  // from malloc: not counted
  std::vector<float> c(M * N);
  empty_cache();
  const MemoryStats before = memory_stats();
  kernels::gemm<float>(M, N, K, a.data(), K, 1, b.data(), N, 1, c.data(), N, false);
  const MemoryStats after = memory_stats();
  EXPECT_GE(after.mapped_peak, before.mapped_in_use + sizeof(float) * M * K);
  EXPECT_EQ(after.mapped_in_use, before.mapped_in_use);  // given back after the product
  EXPECT_EQ(c, std::vector<float>(M * N, 0.5f * static_cast<float>(K)));
  empty_cache();
  EXPECT_EQ(memory_stats().mapped_kept, 0u);
}

TEST(Gemm, IsaIsNamed) {
  const std::string isa = kernels::gemm_isa();
  EXPECT_TRUE(isa == "avx2" || isa == "avx512" || isa == "neon" || isa == "portable") << isa;
}

// The micro-kernels of every Highway target this CPU has (the tile written once in
// core/kernels/gemm_microkernel.cpp, and the plain loops on SCALAR) against the reference loop:
// the blocked path's sweep and gemm_packed_b's, float and double, each target naming its tile.
TEST(Gemm, EveryTargetsTilesMatchReferenceBitForBit) {
  const std::vector<std::string> targets = test::on_every_target([] {
    const std::string target = cpu::target_name();
    const std::string expected = target == "AVX3" || target == "AVX3_DL" ? "avx512"
                                 : target == "AVX2"                      ? "avx2"
                                 : target == "NEON"                      ? "neon"
                                                                         : "portable";
    EXPECT_EQ(kernels::gemm_isa(), expected);
    sweep_shapes<float>();
    sweep_shapes<double>();
    sweep_packed_b<float>();
    sweep_packed_b<double>();
  });
  EXPECT_FALSE(targets.empty());
}

// The skinny path (core/kernels/gemm_skinny.cpp, written once over Highway) on every target this
// CPU has against the reference loop: sweep_skinny's shapes, rows 1..16 (with the tail kernel
// for 9..12 rows where the target's vectors hold 8 floats), B plain and transposed, 1 and 2
// threads. The targets without a skinny path (SCALAR) run the blocked path's plain loops.
TEST(Gemm, EveryTargetsSkinnyPathMatchesReferenceBitForBit) {
  const std::vector<std::string> targets = test::on_every_target([] { sweep_skinny<float>(); });
  EXPECT_FALSE(targets.empty());
}

// One row times W^T from W packed in row panels (generation's linear layers) is gemm's product
// of that row with W^T read in place, bit for bit, from 0 and accumulating onto a bias, on every
// target and at 1 and 2 threads: widths around the panel's 64 (a narrow last panel, fewer
// columns than one panel), depths with and without a vector's tail, and W read through strides.
TEST(Gemm, RowTimesPackedPanelsIsTheProductInPlaceBitForBit) {
  ThreadsGuard guard;
  const std::vector<std::string> targets = test::on_every_target([] {
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (int64_t N : {1, 7, 63, 64, 65, 130, 2304, 3001}) {
        for (int64_t K : {1, 5, 64, 771}) {
          for (bool transposed : {false, true}) {  // W stored row-major, or as (W^T)^T
            SCOPED_TRACE(::testing::Message() << "threads=" << threads << " N=" << N << " K=" << K
                                              << " transposed=" << transposed);
            const std::vector<float> w = random_values<float>(N * K, 11),
                                     x = random_values<float>(K, 12),
                                     bias = random_values<float>(N, 13);
            const int64_t w_row = transposed ? 1 : K, w_col = transposed ? N : 1;
            std::vector<float> panels(N * K);
            kernels::pack_row_panels(N, K, w.data(), w_row, w_col, panels.data());
            std::vector<float> expect(N), got(N, -1.0f);
            kernels::gemm<float>(1, N, K, x.data(), K, 1, w.data(), w_col, w_row, expect.data(), N,
                                 false);
            kernels::gemm_row_panels(N, K, x.data(), panels.data(), got.data(), false);
            ASSERT_EQ(std::memcmp(got.data(), expect.data(), sizeof(float) * N), 0);
            kernels::gemm_bias<float>(1, N, K, x.data(), K, 1, w.data(), w_col, w_row, bias.data(),
                                      1, expect.data(), N);
            got = bias;
            kernels::gemm_row_panels(N, K, x.data(), panels.data(), got.data(), true);
            ASSERT_EQ(std::memcmp(got.data(), expect.data(), sizeof(float) * N), 0);
          }
        }
      }
    }
  });
  EXPECT_FALSE(targets.empty());
}

// Every C[i, j] is its own fma chain (gemm.h), so a row of a product does not depend on the
// rows around it: A[i0:i0 + m] @ B is rows i0 .. i0 + m - 1 of A @ B bit for bit, whichever path
// each takes (tiny, skinny with its tail rows, blocked; 1 or 2 threads). Generation relies on it:
// the last position's logits alone (GPTForward::last_token_only) and a KV cache's new rows. The
// shapes are the GPT's linear layers (B = W^T: columns contiguous) and plain B.
TEST(Gemm, ARowOfAProductDoesNotDependOnTheRowsAroundIt) {
  ThreadsGuard guard;
  struct Dims {
    int64_t M, N, K;
  };
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Dims s : {Dims{100, 2304, 768}, Dims{50, 3072, 768}, Dims{50, 768, 3072},
                         Dims{30, 3001, 768}, Dims{17, 768, 768}, Dims{9, 64, 7}}) {
      for (bool b_t : {true, false}) {
        const std::vector<float> a = random_values<float>(s.M * s.K, 1),
                                 b = random_values<float>(s.K * s.N, 2);
        const int64_t ldb_row = b_t ? 1 : s.N, ldb_col = b_t ? s.K : 1;
        const std::vector<float> bias = random_values<float>(s.N, 3);
        std::vector<float> whole(s.M * s.N), whole_bias(s.M * s.N);
        kernels::gemm<float>(s.M, s.N, s.K, a.data(), s.K, 1, b.data(), ldb_row, ldb_col,
                             whole.data(), s.N, false);
        kernels::gemm_bias<float>(s.M, s.N, s.K, a.data(), s.K, 1, b.data(), ldb_row, ldb_col,
                                  bias.data(), 1, whole_bias.data(), s.N);
        for (int64_t m : {1, 2, 8, 9, 12, 13, 16, 17, 48}) {
          for (int64_t i0 : {int64_t{0}, s.M - m, s.M / 3}) {
            if (i0 < 0 || i0 + m > s.M) continue;
            SCOPED_TRACE(::testing::Message()
                         << "threads=" << threads << " M=" << s.M << " N=" << s.N << " K=" << s.K
                         << " b_t=" << b_t << " rows " << i0 << "+" << m);
            std::vector<float> rows(m * s.N);
            kernels::gemm<float>(m, s.N, s.K, a.data() + i0 * s.K, s.K, 1, b.data(), ldb_row,
                                 ldb_col, rows.data(), s.N, false);
            ASSERT_EQ(std::memcmp(rows.data(), whole.data() + i0 * s.N, sizeof(float) * m * s.N),
                      0);
            kernels::gemm_bias<float>(m, s.N, s.K, a.data() + i0 * s.K, s.K, 1, b.data(), ldb_row,
                                      ldb_col, bias.data(), 1, rows.data(), s.N);
            ASSERT_EQ(
                std::memcmp(rows.data(), whole_bias.data() + i0 * s.N, sizeof(float) * m * s.N), 0);
          }
        }
      }
    }
  }
}

TEST(NumThreads, SetAndGet) {
  ThreadsGuard guard;
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  const std::string message = error_of([] { set_num_threads(0); });
  EXPECT_NE(message.find("set_num_threads"), std::string::npos) << message;
  EXPECT_NE(message.find(">= 1"), std::string::npos) << message;
  EXPECT_EQ(get_num_threads(), 3);
}

TEST(NumThreads, CountsAboveTheMaximumAreErrors) {
  ThreadsGuard guard;
  set_num_threads(kMaxNumThreads);
  EXPECT_EQ(get_num_threads(), kMaxNumThreads);
  set_num_threads(2);
  for (int n : {kMaxNumThreads + 1, std::numeric_limits<int>::max()}) {
    test::expect_error(
        [n] { set_num_threads(n); },
        "set_num_threads: expected a number of threads >= 1 and <= 1024, got " + std::to_string(n));
  }
  EXPECT_EQ(get_num_threads(), 2);
  // The largest count is usable: a parallel product splits its tiles over no more threads than
  // it has tasks (gemm's tile arithmetic is in int64).
  set_num_threads(kMaxNumThreads);
  const int64_t n = 96;  // n^3 multiply-adds: above kParallelWork
  std::vector<float> a(n * n, 1.0f), b(n * n, 2.0f), c(n * n, 0.0f);
  kernels::gemm<float>(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false);
  EXPECT_EQ(c, std::vector<float>(n * n, 2.0f * n));
}

}  // namespace
}  // namespace ember
