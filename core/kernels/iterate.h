// Strided iteration: the loops every elementwise kernel is built on.
//
// A tensor's element (i0, i1, ..., ik) lives at offset + sum(i_d * stride_d). Kernels walk the
// output in row-major order and each operand with its own strides (stride 0 on a broadcast
// dimension), with a fast path when everything is contiguous.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/base/shape.h"
#include "core/kernels/parallel_for.h"

namespace ember::kernels {

using ember::is_row_major;  // (core/base/shape.h)

// Calls row(offsets, n, inner_strides) for the innermost rows first .. last - 1 of `shape`
// (rows numbered in row-major order of the outer dims; `shape` has no zero dim): offsets[k] is
// where operand k's row starts, n the row length, inner_strides[k] the step along the row.
template <std::size_t N, typename RowFn>
void for_each_row_range(const Shape& shape, const std::array<const Shape*, N>& strides,
                        int64_t first, int64_t last, RowFn&& row) {
  if (first >= last) return;  // (also: an empty shape, whose dims must not be divided by)
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::array<int64_t, N> offsets{};
  std::array<int64_t, N> inner{};
  if (ndim == 0) {
    row(offsets, int64_t{1}, inner);
    return;
  }
  for (std::size_t k = 0; k < N; ++k) inner[k] = (*strides[k])[ndim - 1];
  const int64_t n = shape[ndim - 1];
  std::vector<int64_t> counter(ndim, 0);
  // Row `first` as an odometer reading (nothing to do for row 0).
  for (int64_t d = ndim - 2, rest = first; rest > 0 && d >= 0; --d) {
    counter[d] = rest % shape[d];
    rest /= shape[d];
    for (std::size_t k = 0; k < N; ++k) offsets[k] += counter[d] * (*strides[k])[d];
  }
  for (int64_t r = first; r < last; ++r) {
    row(offsets, n, inner);
    // Advance the counter over the outer dims (odometer style).
    for (int64_t d = ndim - 2; d >= 0; --d) {
      ++counter[d];
      for (std::size_t k = 0; k < N; ++k) offsets[k] += (*strides[k])[d];
      if (counter[d] < shape[d]) break;
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= (*strides[k])[d] * shape[d];
      counter[d] = 0;
    }
  }
}

// The number of innermost rows of `shape` (0 when it has a zero dim; 1 for a 0-d shape). A
// shape whose elements overflow int64 (an expanded view) is an Error: no loop walks it.
inline int64_t row_count(const Shape& shape) {
  const int64_t n = numel_of(shape);
  if (n == 0) return 0;
  return shape.empty() ? 1 : n / shape.back();
}

// Calls row(offsets, n, inner_strides) for every innermost row of `shape`, in order, on this
// thread (random fills depend on the order).
template <std::size_t N, typename RowFn>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides, RowFn&& row) {
  for_each_row_range<N>(shape, strides, 0, row_count(shape), row);
}

// The same for maps that may run in parallel (each row's result independent of the others).
template <std::size_t N, typename RowFn>
void for_each_row_parallel(const Shape& shape, const std::array<const Shape*, N>& strides,
                           RowFn&& row) {
  const int64_t rows = row_count(shape);
  const int64_t n = shape.empty() ? 1 : shape.back();
  parallel_ranges(rows, rows * n, [&](int64_t first, int64_t last) {
    for_each_row_range<N>(shape, strides, first, last, row);
  });
}

// out[i] = f(a[i]) over `shape`; out is contiguous, a is read through a_strides. Large maps
// run on get_num_threads() threads (each element computed alike: the same bits at any count);
// f must not depend on the order it is called in.
template <typename R, typename A, typename F>
void unary_map(R* out, const A* a, const Shape& shape, const Shape& a_strides, F&& f) {
  if (is_row_major(shape, a_strides)) {
    const int64_t n = numel_of(shape);
    parallel_ranges(n, n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i]);
    });
    return;
  }
  Shape out_strides = contiguous_strides(shape);
  const auto ndim = static_cast<int64_t>(shape.size());
  // A transposed input (its unit-stride dim p is not the last): walking the output row by row
  // would read a column at a time. Copy in 32 x 32 tiles of dims (p, last) instead, so both the
  // reads and the writes stay within a few cache lines.
  int64_t p = -1;
  for (int64_t d = 0; d + 1 < ndim; ++d)
    if (shape[d] > 1 && a_strides[d] == 1) p = d;
  if (p >= 0 && a_strides[ndim - 1] != 1) {
    constexpr int64_t kTile = 32;
    const int64_t rows = shape[p], cols = shape[ndim - 1];
    const int64_t out_row = out_strides[p], a_col = a_strides[ndim - 1];
    Shape outer = shape;
    outer[p] = 1;
    outer[ndim - 1] = 1;
    // Tasks: (outer row, band of kTile rows of dim p), shared out among threads.
    const int64_t bands = (rows + kTile - 1) / kTile;
    parallel_ranges(row_count(outer) * bands, numel_of(shape), [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t i0 = task % bands * kTile;
        for_each_row_range<2>(outer, {&out_strides, &a_strides}, task / bands, task / bands + 1,
                              [&](auto off, int64_t, auto) {
                                R* o = out + off[0];
                                const A* x = a + off[1];
                                for (int64_t j0 = 0; j0 < cols; j0 += kTile)
                                  for (int64_t i = i0; i < std::min(i0 + kTile, rows); ++i)
                                    for (int64_t j = j0; j < std::min(j0 + kTile, cols); ++j)
                                      o[i * out_row + j] = f(x[i + j * a_col]);
                              });
      }
    });
    return;
  }
  for_each_row_parallel<2>(shape, {&out_strides, &a_strides}, [&](auto off, int64_t n, auto step) {
    R* o = out + off[0];
    const A* x = a + off[1];
    for (int64_t i = 0; i < n; ++i) o[i * step[0]] = f(x[i * step[1]]);
  });
}

// out[i] = f(a[i], b[i]) over `shape`; a and b already broadcast through their strides.
template <typename R, typename A, typename B, typename F>
void binary_map(R* out, const A* a, const Shape& a_strides, const B* b, const Shape& b_strides,
                const Shape& shape, F&& f) {
  if (is_row_major(shape, a_strides) && is_row_major(shape, b_strides)) {
    const int64_t n = numel_of(shape);
    parallel_ranges(n, n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
    });
    return;
  }
  // Fast path: one operand is a single value broadcast everywhere (all strides 0, as a Python
  // scalar in 0.5 * x) and the other is contiguous: one flat loop instead of row by row.
  auto single = [](const Shape& strides) {
    return std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 0; });
  };
  if (single(b_strides) && is_row_major(shape, a_strides)) {
    const int64_t n = numel_of(shape);
    const B y = *b;
    parallel_ranges(n, n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], y);
    });
    return;
  }
  if (single(a_strides) && is_row_major(shape, b_strides)) {
    const int64_t n = numel_of(shape);
    const A x = *a;
    parallel_ranges(n, n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(x, b[i]);
    });
    return;
  }
  Shape out_strides = contiguous_strides(shape);
  for_each_row_parallel<3>(shape, {&out_strides, &a_strides, &b_strides},
                           [&](auto off, int64_t n, auto step) {
                             R* o = out + off[0];
                             const A* x = a + off[1];
                             const B* y = b + off[2];
                             for (int64_t i = 0; i < n; ++i)
                               o[i * step[0]] = f(x[i * step[1]], y[i * step[2]]);
                           });
}

}  // namespace ember::kernels
