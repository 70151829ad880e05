// A block of kN x kN floats transposed in registers (8 x 8 on AVX2 and AVX-512, 4 x 4 on NEON):
// what the GEMM's packing (gemm_pack.cpp) and the skinny path's tail rows (gemm_skinny.cpp)
// share. It moves values and computes nothing.
//
// Included after a file's foreach_target.h, once per Highway target (the guard flips with
// HWY_TARGET_TOGGLE, as in core/base/fma-inl.h). Only for targets with vectors of a width known
// at compile time (not SCALAR's single lane, not SVE's sizeless vectors).

#if defined(EMBER_KERNELS_GEMM_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_GEMM_TRANSPOSE_INL_H_
#undef EMBER_KERNELS_GEMM_TRANSPOSE_INL_H_
#else
#define EMBER_KERNELS_GEMM_TRANSPOSE_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::gemm_detail::HWY_NAMESPACE {

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
namespace hn = hwy::HWY_NAMESPACE;

using BlockTag = hn::CappedTag<float, 8>;  // 8 floats on x86, 4 on NEON
using BlockVec = hn::Vec<BlockTag>;
constexpr int64_t kBlockN = static_cast<int64_t>(hn::MaxLanes(BlockTag()));

// Rows r[0..kBlockN) of a kBlockN x kBlockN block of floats become its columns (r[i] = column
// i): in each 128-bit block, pairs of rows interleaved, then pairs of pairs (a 4 x 4
// transpose); with 8 lanes, the halves of rows i and i + 4 exchanged.
HWY_INLINE void transpose_block(BlockVec* r) {
  const BlockTag d;
  const hn::Repartition<uint64_t, BlockTag> d64;
  for (int64_t j = 0; j < kBlockN; j += 4) {
    const BlockVec t0 = hn::InterleaveLower(d, r[j], r[j + 1]);
    const BlockVec t1 = hn::InterleaveUpper(d, r[j], r[j + 1]);
    const BlockVec t2 = hn::InterleaveLower(d, r[j + 2], r[j + 3]);
    const BlockVec t3 = hn::InterleaveUpper(d, r[j + 2], r[j + 3]);
    r[j] = hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, t0), hn::BitCast(d64, t2)));
    r[j + 1] = hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, t0), hn::BitCast(d64, t2)));
    r[j + 2] = hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, t1), hn::BitCast(d64, t3)));
    r[j + 3] = hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, t1), hn::BitCast(d64, t3)));
  }
  if constexpr (kBlockN == 8) {
    for (int j = 0; j < 4; ++j) {
      const BlockVec lo = r[j], hi = r[j + 4];
      r[j] = hn::ConcatLowerLower(d, hi, lo);
      r[j + 4] = hn::ConcatUpperUpper(d, hi, lo);
    }
  }
}
#endif

}  // namespace ember::kernels::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // EMBER_KERNELS_GEMM_TRANSPOSE_INL_H_
