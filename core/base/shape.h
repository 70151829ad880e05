// Shapes and strides: the arithmetic every view and kernel relies on.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/error.h"
#include "core/base/small_shape.h"

namespace ember {

// class Shape (core/base/small_shape.h): a std::vector<int64_t> that keeps short lists inline.

// The op the user called, while it runs. autograd::apply and the ops that do not go through it
// open an OpScope; the outermost one open on this thread names the size errors of the steps the
// op takes on the way: `contiguous: Storage size calculation overflowed ...` for an expanded
// view too large to copy, not the internal step's `empty: ...` or `numel: ...`.
class OpScope {
 public:
  explicit OpScope(const char* op) : outer_(current_) {
    if (current_ == nullptr) current_ = op;
  }
  ~OpScope() { current_ = outer_; }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  // The outermost open scope's op, or `fallback` (the step's own name) when none is open.
  static const char* name_or(const char* fallback) {
    return current_ != nullptr ? current_ : fallback;
  }

 private:
  const char* outer_;
  static inline thread_local const char* current_ = nullptr;
};

// Number of elements of a shape (1 for the empty shape of a 0-d tensor). Throws when the product
// overflows int64 (a shape containing 0 has 0 elements, whatever its other sizes).
int64_t numel_of(const Shape& shape);
// The same, the Error naming `op`: every op that walks all the elements of a tensor counts them
// so first, since an expanded view ([1, 1] expanded to [2^40, 2^40]) may hold more than int64
// counts while its storage holds one element.
int64_t numel_of(const Shape& shape, const char* op);

// a * b and a + b, or an Error naming `op` when the result does not fit in int64.
int64_t checked_mul(int64_t a, int64_t b, const char* op);
// a * b wrapping on overflow (defined, unlike signed *): for products of sizes of an empty tensor,
// whose other dims may be huge ([0, 2^61, 25] is a valid empty tensor, as in PyTorch); such a
// product is never used to address memory.
inline int64_t mul_wrap(int64_t a, int64_t b) {
  int64_t r;
  __builtin_mul_overflow(a, b, &r);
  return r;
}
int64_t checked_add(int64_t a, int64_t b, const char* op);

// Bytes of a contiguous buffer for `shape`: negative sizes and overflow are Errors (PyTorch:
// "Storage size calculation overflowed with sizes=[...] and itemsize=8").
int64_t storage_nbytes(const Shape& shape, int64_t element_size, const char* op);

// Row-major strides: the last dimension moves fastest.
Shape contiguous_strides(const Shape& shape);

// True when `strides` walk `shape` in row-major order without gaps (size-1 dims ignored).
// An empty tensor addresses nothing and counts as row-major (PyTorch: contiguous), and the
// running product wraps as in contiguous_strides, never overflowing (an empty tensor's other
// dims may be huge: [0, 2^61, 25]).
inline bool is_row_major(const Shape& shape, const Shape& strides) {
  for (int64_t s : shape)
    if (s == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    if (__builtin_mul_overflow(expected, shape[d], &expected)) return false;
  }
  return true;
}

// Whether two indices of `shape` reach one element through `strides` (an expand()ed view: a
// write into it would depend on the order of the writes). core/tensor/overlap.h has the Tensor forms.
bool has_internal_overlap(const Shape& shape, const Shape& strides);
// An Error naming `op` if has_internal_overlap(shape, strides).
void check_no_internal_overlap(const Shape& shape, const Shape& strides, const char* op);

// Turns a possibly negative dim into [0, ndim); throws naming `op` when out of range.
// PyTorch's message: "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The same for ops that have no meaning on a 0-d tensor (size, stride, narrow, ...):
// "size: dimension specified as 0 but tensor has no dimensions".
int64_t wrap_dim_no_scalar(int64_t dim, int64_t ndim, const char* op);

// The shape two operands broadcast to (NumPy rules), or an Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that read `shape`/`strides` as if it had shape `target` (stride 0 on broadcast dims).
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target);

}  // namespace ember
