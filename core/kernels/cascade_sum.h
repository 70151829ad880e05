// Floating-point sums in PyTorch's order of additions (its CPU `cascade_sum`), so that a float32
// sum rounds exactly as PyTorch's does: `tensor(1.0000)` and `tensor(1.)` in the book differ by
// one ulp, and a learner comparing outputs digit by digit should see the same one.
//
// The algorithm (aten/src/ATen/native/cpu/SumKernel.cpp), in words:
//  - Dimensions are ordered as PyTorch's TensorIterator orders them: reduced dims first (they
//    become the innermost loop), then by increasing input stride; adjacent dims that are
//    contiguous with each other are merged. The two innermost dims form a 2-d "loop".
//  - A row is summed by `row_sum`: four interleaved partial sums (elements 0,4,8.. / 1,5,9.. /
//    ...), each accumulated in chunks of 16 or more whose sums are themselves summed in chunks
//    (`multi_row_sum`, a cascade with O(1) extra storage), then the tail, then the partials.
//  - When the reduced dim is contiguous and at least one SIMD vector long (8 floats or 4
//    doubles, AVX2), the row is read as vectors: the same cascade runs lane-wise on vectors, the
//    scalar tail is added, then the vector's lanes one by one.
//  - When the kept dim is contiguous and at least one vector long, 4 vectors of outputs are
//    summed at once down the reduced dim; the leftovers one vector, then one element, at a time.
// Sums of 32768 or more elements may be split among threads in PyTorch; here they are not, so
// such sums can differ from PyTorch's in the last bits (as PyTorch's own do between thread counts).
// Threads here share out whole outputs instead (ranges of the kept dim, in whole groups), so a
// sum's bits never depend on the thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/base/shape.h"
#include "core/kernels/parallel_for.h"

namespace ember::kernels {

namespace cascade {

// A SIMD register's worth of lanes, added lane by lane (what Vectorized<T> does).
template <typename T, int L>
struct Lanes {
  std::array<T, L> v{};
  Lanes& operator+=(const Lanes& o) {
    for (int i = 0; i < L; ++i) v[i] += o.v[i];
    return *this;
  }
};

template <typename T>
constexpr int kLanes = 32 / static_cast<int>(sizeof(T));  // AVX2: 256 bits

// kLanes<T> values in one 256-bit register (GCC's vector extensions), added lane by lane.
template <typename T>
struct Register;
template <>
struct Register<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Register<double> {
  typedef double type __attribute__((vector_size(32)));
};

// Element `index` of a strided sequence starting at `base`: a scalar, or L consecutive scalars.
template <typename Acc, typename T>
Acc load(const T* base, int64_t stride, int64_t index) {
  if constexpr (std::is_same_v<Acc, T>) {
    return base[index * stride];
  } else {
    Acc a;
    for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] = base[index * stride + i];
    return a;
  }
}

inline int64_t ceil_log2(int64_t x) {
  int64_t bits = 0;
  while ((int64_t{1} << bits) < x) ++bits;
  return bits;
}

// The cascade's schedule over `size` rows, 4 levels of chunks of level_step (>= 16) additions:
// add(i) adds row i into level 0; after each chunk, carry(j) adds level j - 1 into level j and
// clears it, for as many levels as the rows so far have filled. The caller then adds levels
// 1..3 into level 0. multi_row_sum and multi_column_sum keep their sums their own way.
constexpr int64_t kLevels = 4;
template <typename Add, typename Carry>
[[gnu::always_inline]] inline void cascade_levels(int64_t size, Add&& add, Carry&& carry) {
  const int64_t level_power = std::max<int64_t>(4, ceil_log2(size) / kLevels);
  const int64_t level_step = int64_t{1} << level_power;
  const int64_t level_mask = level_step - 1;
  int64_t i = 0;
  while (i + level_step <= size) {
    for (int64_t j = 0; j < level_step; ++j, ++i) add(i);
    for (int64_t j = 1; j < kLevels; ++j) {
      carry(j);
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i) add(i);
}

// Sums `size` rows of nrows columns at once: out[k] = sum_i base[i*row_stride + k*col_stride],
// in the cascade of cascade_levels.
template <typename Acc, int nrows, typename T>
std::array<Acc, nrows> multi_row_sum(const T* base, int64_t row_stride, int64_t col_stride,
                                     int64_t size) {
  Acc acc[kLevels][nrows] = {};
  cascade_levels(
      size,
      [&](int64_t i) {
        for (int k = 0; k < nrows; ++k)
          acc[0][k] += load<Acc>(base + i * row_stride, col_stride, k);
      },
      [&](int64_t j) {
        for (int k = 0; k < nrows; ++k) {
          acc[j][k] += acc[j - 1][k];
          acc[j - 1][k] = Acc{};
        }
      });
  for (int64_t j = 1; j < kLevels; ++j)
    for (int k = 0; k < nrows; ++k) acc[0][k] += acc[j][k];

  std::array<Acc, nrows> out;
  for (int k = 0; k < nrows; ++k) out[k] = acc[0][k];
  return out;
}

// multi_row_sum's sums for `cols` contiguous columns (column c at base + c, rows row_stride
// apart), with the same additions per column, taken a row at a time across all the columns: a
// row is one contiguous read, where multi_row_sum walks down a strip of columns at a stride
// (a sum over the 768 rows of a [768, 512] gradient reads the matrix in 16 strips of 128 bytes
// per row, 2 KiB apart). The sums are left in acc[0 : cols]; acc holds
// kLevels * cols values, zeros on entry.
template <typename T>
void multi_column_sum(const T* base, int64_t row_stride, int64_t cols, int64_t size, T* acc) {
  auto add_row = [cols](T* __restrict to, const T* __restrict from) {
    for (int64_t c = 0; c < cols; ++c) to[c] += from[c];
  };
  cascade_levels(
      size, [=](int64_t i) { add_row(acc, base + i * row_stride); },
      [=](int64_t j) {
        add_row(acc + j * cols, acc + (j - 1) * cols);
        std::fill_n(acc + (j - 1) * cols, cols, T(0));
      });
  for (int64_t j = 1; j < kLevels; ++j) add_row(acc, acc + j * cols);
}

// One row of `size` elements `stride` apart, as four interleaved partial sums.
template <typename Acc, typename T>
Acc row_sum(const T* base, int64_t stride, int64_t size) {
  constexpr int ilp = 4;
  const int64_t size_ilp = size / ilp;
  auto partial = multi_row_sum<Acc, ilp>(base, stride * ilp, stride, size_ilp);
  for (int64_t i = size_ilp * ilp; i < size; ++i) partial[0] += load<Acc>(base, stride, i);
  for (int k = 1; k < ilp; ++k) partial[0] += partial[k];
  return partial[0];
}

// The 2-d loop: size0 x size1 elements, strides in elements; the output has stride 0 along
// one of the two dims (the reduced one) and out_stride along the other.
template <typename T>
void loop2d(const T* in, T* out, int64_t size0, int64_t size1, int64_t in_stride0,
            int64_t in_stride1, int64_t out_stride0, int64_t out_stride1) {
  using Vec = Lanes<T, kLanes<T>>;
  constexpr int64_t L = kLanes<T>;
  if (out_stride0 != 0 && out_stride1 == 0) {  // move the reduction to dim 0
    std::swap(in_stride0, in_stride1);
    std::swap(out_stride0, out_stride1);
    std::swap(size0, size1);
  }
  // Threads (for a large loop) take ranges of the kept dim j. Where columns are summed in
  // groups (4 vectors, or 4 rows, at a time), ranges start at a multiple of the group, so every
  // output is summed exactly as one thread sums it: the same bits at any thread count.
  const int64_t elements = size0 * size1;
  if (out_stride0 != 0) {  // nothing reduced in this loop: out += in elementwise
    parallel_ranges(size1, elements, [&](int64_t first, int64_t last) {
      for (int64_t j = first; j < last; ++j)
        for (int64_t i = 0; i < size0; ++i)
          out[j * out_stride1 + i * out_stride0] += in[j * in_stride1 + i * in_stride0];
    });
    return;
  }
  const int64_t out_stride = out_stride1;
  // body(j0, j1) over groups of `group` columns of the kept dim, in ranges of whole groups.
  auto grouped = [&](int64_t group, auto&& body) {
    parallel_ranges((size1 + group - 1) / group, elements, [&](int64_t first, int64_t last) {
      body(first * group, std::min(size1, last * group));
    });
  };
  if (in_stride0 == 1 && size0 >= L) {
    // Contiguous inner reduction: the row as vectors, then the tail, then the lanes.
    const int64_t vec_size = size0 / L;
    grouped(1, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const T* row = in + j * in_stride1;
        Vec vec_acc = row_sum<Vec>(row, L, vec_size);
        T final_acc = 0;
        for (int64_t k = vec_size * L; k < size0; ++k) final_acc += row[k];
        for (int64_t k = 0; k < L; ++k) final_acc += vec_acc.v[k];
        out[j * out_stride] += final_acc;
      }
    });
  } else if (in_stride1 == 1 && size1 >= L) {
    // Contiguous outer reduction: columns of outputs, 4 vectors wide, then 1 vector, then 1.
    constexpr int nrows = 4;
    grouped(nrows * L, [&](int64_t j0, int64_t j1) {
      // The whole groups (each lane of multi_row_sum<Vec, nrows> one column's chain), in
      // blocks of columns whose four levels of sums stay in L1, a row at a time.
      constexpr int64_t block = 2048 / sizeof(T);  // a multiple of nrows * L
      T acc[kLevels * block];
      const int64_t whole = j0 + (j1 - j0) / (nrows * L) * (nrows * L);
      for (int64_t b = j0; b < whole; b += block) {
        const int64_t cols = std::min(block, whole - b);
        std::fill_n(acc, kLevels * cols, T(0));
        multi_column_sum(in + b, in_stride0, cols, size0, acc);
        for (int64_t c = 0; c < cols; ++c) out[(b + c) * out_stride] += acc[c];
      }
      int64_t j = whole;
      for (; j + L <= j1; j += L) {
        Vec sums = row_sum<Vec>(in + j, in_stride0, size0);
        for (int64_t k = 0; k < L; ++k) out[(j + k) * out_stride] += sums.v[k];
      }
      for (; j < j1; ++j) out[j * out_stride] += row_sum<T>(in + j, in_stride0, size0);
    });
  } else if (in_stride0 < in_stride1) {
    grouped(1, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j)
        out[j * out_stride] += row_sum<T>(in + j * in_stride1, in_stride0, size0);
    });
  } else {
    constexpr int nrows = 4;
    grouped(nrows, [&](int64_t j0, int64_t j1) {
      int64_t j = j0;
      for (; j + nrows - 1 < j1; j += nrows) {
        auto sums = multi_row_sum<T, nrows>(in + j * in_stride1, in_stride0, in_stride1, size0);
        for (int r = 0; r < nrows; ++r) out[(j + r) * out_stride] += sums[r];
      }
      for (; j < j1; ++j) out[j * out_stride] += row_sum<T>(in + j * in_stride1, in_stride0, size0);
    });
  }
}

}  // namespace cascade

// out (zero-filled, shaped like `shape` with reduced dims of out_strides 0) += the sum of `in`
// over the dims whose out_strides are 0. Strides are in elements. A shape whose elements
// overflow int64 (an expanded view) is an Error: the merged sizes below must fit.
template <typename T>
void cascade_sum(const T* in, const Shape& shape, const Shape& in_strides, T* out,
                 const Shape& out_strides) {
  if (numel_of(shape, "sum") == 0) return;
  struct Dim {
    int64_t size, in_stride, out_stride;
  };
  // TensorIterator's order: innermost first. Start from the reversed dims, drop size-1 dims.
  std::vector<Dim> dims;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 0) return;
    if (shape[d] != 1) dims.push_back({shape[d], in_strides[d], out_strides[d]});
  }
  // Insertion sort with PyTorch's comparison: reduced dims first, then smaller input strides.
  auto should_swap = [](const Dim& a, const Dim& b) {
    if ((a.out_stride == 0) != (b.out_stride == 0)) return b.out_stride == 0 ? 1 : -1;
    if (a.out_stride != 0 && b.out_stride != 0) {
      if (a.out_stride < b.out_stride) return -1;
      if (a.out_stride > b.out_stride) return 1;
      if (a.size > b.size) return 1;
    }
    if (a.in_stride == 0 || b.in_stride == 0) return 0;
    if (a.in_stride < b.in_stride) return -1;
    if (a.in_stride > b.in_stride) return 1;
    return a.size > b.size ? 1 : 0;
  };
  for (std::size_t i = 1; i < dims.size(); ++i) {
    std::size_t d1 = i;
    for (int64_t d0 = static_cast<int64_t>(i) - 1; d0 >= 0; --d0) {
      int c = should_swap(dims[d0], dims[d1]);
      if (c > 0) {
        std::swap(dims[d0], dims[d1]);
        d1 = static_cast<std::size_t>(d0);
      } else if (c < 0) {
        break;
      }
    }
  }
  // Merge neighbours that are contiguous with each other in both operands.
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty()) {
      Dim& last = merged.back();
      if (last.in_stride * last.size == d.in_stride &&
          last.out_stride * last.size == d.out_stride) {
        last.size *= d.size;
        continue;
      }
    }
    merged.push_back(d);
  }
  if (merged.empty()) merged.push_back({1, 1, 0});
  if (merged.size() == 1) merged.push_back({1, 0, 0});

  // Outer dims (beyond the first two) are walked one 2-d loop at a time.
  const std::size_t outer = merged.size() - 2;
  std::vector<int64_t> counter(outer, 0);
  while (true) {
    int64_t in_off = 0, out_off = 0;
    for (std::size_t k = 0; k < outer; ++k) {
      in_off += counter[k] * merged[k + 2].in_stride;
      out_off += counter[k] * merged[k + 2].out_stride;
    }
    cascade::loop2d(in + in_off, out + out_off, merged[0].size, merged[1].size, merged[0].in_stride,
                    merged[1].in_stride, merged[0].out_stride, merged[1].out_stride);
    std::size_t k = 0;
    for (; k < outer; ++k) {
      if (++counter[k] < merged[k + 2].size) break;
      counter[k] = 0;
    }
    if (k == outer) return;
  }
}

// x[0] + ... + x[n-1] for one contiguous row, the bits cascade_sum gives for a {1, n} tensor
// summed over its last dim (what the merged dims above reduce to: one 2-d loop of n x 1), without
// building shapes: for kernels that sum a row at a time.
//
// A row of fewer than 64 vectors (a LayerNorm row of 128 or 768 floats) fills no level of the
// cascade, and loop2d's steps for it reduce to: four vector sums (vector v into sum v mod 4, each
// from +0), the vectors past the last four into the first, the other three added to it, then
// the scalar tail and the lanes one by one. That path is written out below: through loop2d a
// LayerNorm row paid more in calls and generic loops than in additions. (The cascade's upper
// levels, added at its end, are +0 here: a sum that starts at +0 is never -0, so adding them
// changes nothing.) ReduceSum.CascadeRowSumIsCascadeSumOfOneRow checks both against cascade_sum.
template <typename T>
T cascade_row_sum(const T* x, int64_t n) {
  constexpr int64_t L = cascade::kLanes<T>;
  if (n >= L && n < 64 * L) {
    using Vec = typename cascade::Register<T>::type;  // cascade::Lanes<T, L> in one register
    auto load = [&](int64_t v) {
      Vec out;
      std::memcpy(&out, x + v * L, sizeof(Vec));
      return out;
    };
    const int64_t vectors = n / L, fours = vectors / 4;
    Vec acc[4] = {};
    for (int64_t i = 0; i < fours; ++i)
      for (int k = 0; k < 4; ++k) acc[k] += load(4 * i + k);
    for (int64_t v = fours * 4; v < vectors; ++v) acc[0] += load(v);
    for (int k = 1; k < 4; ++k) acc[0] += acc[k];
    T total = 0;
    for (int64_t j = vectors * L; j < n; ++j) total += x[j];
    for (int64_t k = 0; k < L; ++k) total += acc[0][k];
    return total;
  }
  T out = 0;
  cascade::loop2d(x, &out, n, int64_t{1}, int64_t{1}, int64_t{0}, int64_t{0}, int64_t{0});
  return out;
}

}  // namespace ember::kernels
