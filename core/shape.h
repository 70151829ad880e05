// Shapes and strides: the arithmetic every view and kernel relies on.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace ember {

using Shape = std::vector<int64_t>;

// Number of elements of a shape (1 for the empty shape of a 0-d tensor).
int64_t numel_of(const Shape& shape);

// Row-major strides: the last dimension moves fastest.
Shape contiguous_strides(const Shape& shape);

// Turns a possibly negative dim into [0, ndim); throws naming `op` when out of range.
// PyTorch's message: "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// The shape two operands broadcast to (NumPy rules), or an Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that read `shape`/`strides` as if it had shape `target` (stride 0 on broadcast dims).
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target);

}  // namespace ember
