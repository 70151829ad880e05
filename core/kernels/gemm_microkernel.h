// The micro-kernels: the innermost loops of every GEMM path, a small tile of C kept in registers
// while k runs. Each C[i, j] of a tile is one chain of fused multiply-adds over k in increasing
// order, continued from C (load) or from 0: the contract stated at the top of
// core/kernels/gemm.cpp, which every kernel here keeps whatever its width or the way it reads A.
// (Internal: include only from core/kernels/gemm*.cpp.)
//
// Two kinds:
// - packed: C[0:MR, 0:NR] = (load ? C : 0) + sum_p a[p, 0:MR]^T b[p, 0:NR], a a packed panel
//   (for each p, MR values of a column of A), b a packed panel (for each p, NR values of a row
//   of B), both 64-byte aligned; C is MR full rows of NR values, row stride ldc. The blocked
//   driver (gemm.cpp) calls them through Config's pointers.
// - A read in place: the blocked path's tile with the rows of A where they lie (in_place), and
//   gemm_packed_b's 6 x kPanelWidth tile over one packed B panel (strided) or two (pair), with A
//   read by columns or by rows.
//
// The plain loops are here; the vector tiles are written once over Highway in
// gemm_microkernel.cpp, and config() hands out the tiles of the target that runs.
#pragma once

#include "core/kernels/gemm.h"
#include "core/kernels/gemm_internal.h"

namespace ember::kernels::gemm_detail {

// Portable: plain loops (any CPU), MR = 4, NR = 4.
template <typename T>
void kernel_portable(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool load) {
  T acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = load ? c[i * ldc + j] : T(0);
  for (int64_t p = 0; p < kc; ++p, a += 4, b += 4)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = fused(a[i], b[j], acc[i][j]);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) c[i * ldc + j] = acc[i][j];
}

// Portable 6 x W tile with A read in place (element (i, p) at a[i * rs + p * ks]) over one
// packed B panel of W = kPanelWidth columns: gemm_packed_b's tile on the targets without vectors.
template <typename T>
void kernel_a_strided(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b, T* c, int64_t ldc,
                      bool load) {
  constexpr int64_t W = kPanelWidth<T>;
  T acc[6][W];
  for (int i = 0; i < 6; ++i)
    for (int64_t j = 0; j < W; ++j) acc[i][j] = load ? c[i * ldc + j] : T(0);
  for (int64_t p = 0; p < kc; ++p, b += W) {
    for (int i = 0; i < 6; ++i) {
      const T ai = a[i * rs + p * ks];
      for (int64_t j = 0; j < W; ++j) acc[i][j] = fused(ai, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < 6; ++i)
    for (int64_t j = 0; j < W; ++j) c[i * ldc + j] = acc[i][j];
}

template <typename T>
using MicroKernel = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool load);
// The packed tile with the rows of A read where they lie (row i at a + i * lda_row).
template <typename T>
using InPlaceKernel = void (*)(int64_t kc, const T* a, int64_t lda_row, const T* b, T* c,
                               int64_t ldc, bool load);
// 6 x kPanelWidth: A's element (i, p) at a[i * rs + p * ks] (rs or ks is 1), B one panel of
// gemm_packed_b (row p at b + p * kPanelWidth).
template <typename T>
using StridedKernel = void (*)(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b, T* c,
                               int64_t ldc, bool load);
// The same over two panels side by side (b0 and b1): 6 x 2 kPanelWidth of C.
template <typename T>
using PairKernel = void (*)(int64_t kc, const T* a, int64_t rs, int64_t ks, const T* b0,
                            const T* b1, T* c, int64_t ldc, bool load);

// The micro-kernels of one target, with the tile and the cache blocks that suit them.
template <typename T>
struct Config {
  MicroKernel<T> kernel;
  InPlaceKernel<T> in_place;  // nullptr: A is always packed
  int64_t MR, NR;
  int64_t KC, MC, NC;  // KC x NR of B in L1, MC x KC of A in L2, KC x NC of B in L3
  StridedKernel<T> strided;
  PairKernel<T> pair;  // nullptr: one panel at a time
  const char* isa;     // "avx512", "avx2", "neon" or "portable"
};

// The plain loops' configuration: integers, and the targets without vectors.
template <typename T>
constexpr Config<T> portable_config() {
  return {kernel_portable<T>,  nullptr, 4,         4, 256, 64, 1024,
          kernel_a_strided<T>, nullptr, "portable"};
}

// The micro-kernels of the Highway target that runs now, EMBER_CPU_CAPABILITY applied
// (gemm_microkernel.cpp; float and double, int64_t gets portable_config).
template <typename T>
Config<T> config();

}  // namespace ember::kernels::gemm_detail
