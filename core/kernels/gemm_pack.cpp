// Packing for the blocked GEMM (core/kernels/gemm.cpp) and for gemm_packed_b's panels: blocks
// of A and B copied into the order the micro-kernels read them, through both strides of the
// source, so a transposed operand costs no extra pass. Packing moves values and adds zeros; it
// computes nothing, so it cannot change a bit of the result (the contract at the top of
// core/kernels/gemm.cpp).
//
// Written once over Highway and compiled for each target (core/kernels/README.md), like the
// micro-kernels: the transposes in registers and the 32-byte moves below are vector code.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/gemm_pack.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/kernels/dispatch_by_type.h"
#include "core/kernels/gemm_internal.h"
#include "core/kernels/gemm_transpose-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::gemm_detail::HWY_NAMESPACE {

namespace {

namespace hn = hwy::HWY_NAMESPACE;

// Vectors of a width known at compile time (not SCALAR's single lane, not SVE's sizeless ones,
// which cannot be held in an array): there the transposes in registers and the wide moves.
#undef EMBER_PACK_VECTORS
#define EMBER_PACK_VECTORS (HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE)

#if !EMBER_PACK_VECTORS
// The plain loops pack every row p.
int64_t pack_b_columns_f32(const float*, int64_t, int64_t, int64_t, float*) { return 0; }
int64_t pack_a_rows_f32(const float*, int64_t, int64_t, float*) { return 0; }
#else
using DF = BlockTag;  // blocks of kN x kN floats: 8 x 8 on AVX2, 4 x 4 on NEON
using VF = BlockVec;
constexpr int64_t kN = kBlockN;

// A full panel of NR columns of a B whose columns are contiguous (B = W^T, ldb_row == 1):
// out[p * NR + j] = b[j * ldb_col + p], kN x kN blocks transposed in registers. Returns the
// number of rows p done (a multiple of kN, 0 without vectors); the caller finishes the rest.
int64_t pack_b_columns_f32(const float* b, int64_t ldb_col, int64_t kc, int64_t NR, float* out) {
  if (NR % kN != 0) return 0;
  const DF d;
  const int64_t whole = kc - kc % kN;
  for (int64_t p = 0; p < whole; p += kN) {
    for (int64_t j0 = 0; j0 < NR; j0 += kN) {
      VF r[kN];
      for (int64_t j = 0; j < kN; ++j) r[j] = hn::LoadU(d, b + (j0 + j) * ldb_col + p);
      transpose_block(r);
      for (int64_t q = 0; q < kN; ++q) hn::StoreU(r[q], d, out + (p + q) * NR + j0);
    }
  }
  return whole;
}

// A full panel of 6 rows of a row-major A (lda_col == 1): out[p * 6 + r] = a[r * lda_row + p],
// the 6 rows as blocks of kN (rows past 6 zero). A store of a block's column also writes the
// floats past its rows (2 of them), which the next store (or the caller's tail, or the next
// panel) overwrites: the buffer has slack for the last one.
int64_t pack_a_rows_f32(const float* a, int64_t lda_row, int64_t kc, float* out) {
  constexpr int64_t kBlocks = (6 + kN - 1) / kN;
  const DF d;
  const int64_t whole = kc - kc % kN;
  for (int64_t p = 0; p < whole; p += kN) {
    VF r[kBlocks][kN];
    for (int64_t g = 0; g < kBlocks; ++g) {
      for (int64_t i = 0; i < kN; ++i) {
        const int64_t row = g * kN + i;
        r[g][i] = row < 6 ? hn::LoadU(d, a + row * lda_row + p) : hn::Zero(d);
      }
      transpose_block(r[g]);
    }
    for (int64_t q = 0; q < kN; ++q) {
      for (int64_t g = 0; g < kBlocks; ++g) hn::StoreU(r[g][q], d, out + (p + q) * 6 + g * kN);
    }
  }
  return whole;
}

#endif  // EMBER_PACK_VECTORS

// dst[0:bytes] = src[0:bytes], bytes a constant, in whole vectors (32 bytes on AVX2): GCC's
// inline copy of a constant size moves 16 bytes at a time under x86-64-v3's generic tuning, and
// packing is bound by its stores (a 32-float panel row takes 8 of them).
template <int64_t bytes>
[[gnu::always_inline]] inline void copy_bytes(void* __restrict dst, const void* __restrict src) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  int64_t b = 0;
#if EMBER_PACK_VECTORS
  const hn::CappedTag<uint8_t, 32> d8;
  constexpr int64_t step = static_cast<int64_t>(hn::MaxLanes(d8));
  for (; b + step <= bytes; b += step) hn::StoreU(hn::LoadU(d8, s + b), d8, d + b);
#endif
  // The rest: what is left of a whole vector (every byte without fixed-width vectors).
  if (b < bytes) std::memcpy(d + b, s + b, static_cast<std::size_t>(bytes - b));
}

// pack_lines for a width known at compile time. A piece is W values, moved in 32-byte steps;
// when W values are not a whole number of steps (A's 6-row panels: 24 bytes), the piece moves
// rounded up to whole steps (`over` values) wherever that is safe: the source line has the
// values (j + over <= len) and the bytes written past the piece land on the panel's next row,
// which the next line then overwrites (p + 1 < kc). One 32-byte move instead of 16 + 8.
template <int64_t W, typename T>
void pack_lines_fixed(const T* src, int64_t stride, int64_t kc, int64_t len, T* out) {
  constexpr int64_t step = 32 / sizeof(T);
  constexpr int64_t over = (W + step - 1) / step * step;  // W rounded up to whole steps
  const int64_t whole = len - len % W;                    // values in whole pieces
  const int64_t fast = std::max<int64_t>(0, std::min(whole, len - over + 1));  // j < fast: over
  for (int64_t p = 0; p < kc; ++p) {
    const T* line = src + p * stride;
    T* row = out + p * W;  // row p of the first panel; panel j / W starts j * kc further
    int64_t j = 0;
    if (over != W && p + 1 < kc) {
      for (; j < fast; j += W) copy_bytes<over * sizeof(T)>(row + j * kc, line + j);
    }
    for (; j < whole; j += W) copy_bytes<W * sizeof(T)>(row + j * kc, line + j);
    if (whole < len) {  // the last panel's piece: len % W values, then zeros
      std::memcpy(row + whole * kc, line + whole, sizeof(T) * (len - whole));
      std::fill(row + whole * kc + (len - whole), row + whole * kc + W, T(0));
    }
  }
}

// kc stored lines of `len` contiguous values (line p at src + p * stride) as ceil(len / width)
// panels of kc x width, columns past len zeros: each line is read once, in order (a stream the
// hardware prefetcher follows), its width-long pieces going to their panels. Walking panel by
// panel instead read the lines down a column of cache lines a stride apart, and stalled on every
// one. For a row-major B (lines are rows of B) and an A^T (lines are columns of A). The panel
// widths of the micro-kernels (6 rows of A; 8, 16 or 32 columns of B) have their own loops.
template <typename T>
void pack_lines(const T* src, int64_t stride, int64_t kc, int64_t len, int64_t width, T* out) {
  switch (width) {
    case 6:
      return pack_lines_fixed<6>(src, stride, kc, len, out);
    case 8:
      return pack_lines_fixed<8>(src, stride, kc, len, out);
    case 16:
      return pack_lines_fixed<16>(src, stride, kc, len, out);
    case 32:
      return pack_lines_fixed<32>(src, stride, kc, len, out);
    default:
      break;
  }
  for (int64_t p = 0; p < kc; ++p) {
    const T* line = src + p * stride;
    for (int64_t j = 0; j < len; j += width) {
      const int64_t n = std::min(width, len - j);
      T* dst = out + j * kc + p * width;  // panel j / width, row p
      std::memcpy(dst, line + j, sizeof(T) * n);
      std::fill(dst + n, dst + width, T(0));
    }
  }
}

// A[i0:i0+mc, p0:p0+kc] as ceil(mc / MR) panels of kc x MR (rows past mc are zeros).
template <typename T>
void PackA(const Product<T>& op, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t MR,
           T* out) {
  if (op.lda_row == 1 && op.lda_col > 1) {  // A^T: columns of A contiguous
    pack_lines(op.A + i0 + p0 * op.lda_col, op.lda_col, kc, mc, MR, out);
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += MR, out += kc * MR) {
    const int64_t rows = std::min(MR, mc - ir);
    const T* a = op.A + (i0 + ir) * op.lda_row + p0 * op.lda_col;
    int64_t done = 0;  // rows p already packed by a SIMD path
    if constexpr (std::is_same_v<T, float>) {
      if (op.lda_col == 1 && MR == 6 && rows == 6) done = pack_a_rows_f32(a, op.lda_row, kc, out);
    }
    if (op.lda_col <= op.lda_row) {  // rows of A contiguous (or closer): walk along k per row
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = a + r * op.lda_row;
        for (int64_t p = done; p < kc; ++p) out[p * MR + r] = src[p * op.lda_col];
      }
    } else {  // columns of A closer than its rows: walk along rows per k
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a + p * op.lda_col;
        for (int64_t r = 0; r < rows; ++r) out[p * MR + r] = src[r * op.lda_row];
      }
    }
    if (rows < MR) {
      for (int64_t p = 0; p < kc; ++p) std::fill(out + p * MR + rows, out + (p + 1) * MR, T(0));
    }
  }
}

// B[p0:p0+kc, j0:j0+nc] as ceil(nc / NR) panels of kc x NR (columns past nc are zeros).
template <typename T>
void PackB(const Product<T>& op, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t NR,
           T* out) {
  if (op.ldb_col == 1) {  // rows of B contiguous
    pack_lines(op.B + p0 * op.ldb_row + j0, op.ldb_row, kc, nc, NR, out);
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += NR, out += kc * NR) {
    const int64_t cols = std::min(NR, nc - jr);
    const T* b = op.B + p0 * op.ldb_row + (j0 + jr) * op.ldb_col;
    if (op.ldb_row <= op.ldb_col) {  // B transposed (W^T): walk down each column
      int64_t done = 0;              // rows p already packed by a SIMD path
      if constexpr (std::is_same_v<T, float>) {
        if (op.ldb_row == 1 && cols == NR) done = pack_b_columns_f32(b, op.ldb_col, kc, NR, out);
      }
      for (int64_t j = 0; j < cols; ++j) {
        const T* src = b + j * op.ldb_col;
        for (int64_t p = done; p < kc; ++p) out[p * NR + j] = src[p * op.ldb_row];
      }
      if (cols < NR) {
        for (int64_t p = 0; p < kc; ++p) std::fill(out + p * NR + cols, out + (p + 1) * NR, T(0));
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < cols; ++j) out[p * NR + j] = b[p * op.ldb_row + j * op.ldb_col];
        std::fill(out + p * NR + cols, out + (p + 1) * NR, T(0));
      }
    }
  }
}

}  // namespace

// The entry points of this target, one per type (HWY_EXPORT takes plain functions).
EMBER_ENTRIES_BY_TYPE(PackA)
EMBER_ENTRIES_BY_TYPE(PackB)
constexpr auto& PackAI64 = PackA<int64_t>;
constexpr auto& PackBI64 = PackB<int64_t>;

}  // namespace ember::kernels::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels::gemm_detail {

EMBER_EXPORT_BY_TYPE(PackA);
EMBER_EXPORT_BY_TYPE(PackB);
HWY_EXPORT(PackAI64);
HWY_EXPORT(PackBI64);

// EMBER_DISPATCH_BY_TYPE with int64_t's entry point too: integer matmuls pack as floats do.
#define EMBER_DISPATCH_PACK(T, Kernel, ...)           \
  do {                                                \
    if constexpr (std::is_same_v<T, int64_t>) {       \
      HWY_DYNAMIC_DISPATCH(Kernel##I64)(__VA_ARGS__); \
    } else {                                          \
      EMBER_DISPATCH_BY_TYPE(T, Kernel, __VA_ARGS__); \
    }                                                 \
  } while (false)

template <typename T>
void pack_a(const Product<T>& op, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t MR,
            T* out) {
  EMBER_DISPATCH_PACK(T, PackA, op, i0, mc, p0, kc, MR, out);
}

template <typename T>
void pack_b(const Product<T>& op, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t NR,
            T* out) {
  EMBER_DISPATCH_PACK(T, PackB, op, p0, kc, j0, nc, NR, out);
}

#undef EMBER_DISPATCH_PACK

#define EMBER_INSTANTIATE_PACK(T)                                                              \
  template void pack_a<T>(const Product<T>&, int64_t, int64_t, int64_t, int64_t, int64_t, T*); \
  template void pack_b<T>(const Product<T>&, int64_t, int64_t, int64_t, int64_t, int64_t, T*);
EMBER_INSTANTIATE_PACK(float)
EMBER_INSTANTIATE_PACK(double)
EMBER_INSTANTIATE_PACK(int64_t)
#undef EMBER_INSTANTIATE_PACK

}  // namespace ember::kernels::gemm_detail
#endif  // HWY_ONCE
