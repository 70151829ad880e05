#include "core/base/shape.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace ember {

int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    fail(op, ": size calculation overflowed (", a, " * ", b, " does not fit in int64)");
  }
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const char* op) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    fail(op, ": size calculation overflowed (", a, " + ", b, " does not fit in int64)");
  }
  return out;
}

int64_t numel_of(const Shape& shape) { return numel_of(shape, OpScope::name_or("numel")); }

int64_t numel_of(const Shape& shape, const char* op) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : shape) overflow = __builtin_mul_overflow(n, s, &n) || overflow;
  // A zero anywhere makes the product 0 whatever the other sizes are, as in PyTorch.
  for (int64_t s : shape) {
    if (s == 0) return 0;
  }
  if (overflow) fail(op, ": the number of elements of shape ", shape, " overflows int64");
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  bool overflow = false;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = running;
    // Wraps (defined) on overflow: harmless for an empty tensor, whose strides address nothing.
    overflow = __builtin_mul_overflow(running, shape[i] > 0 ? shape[i] : 1, &running) || overflow;
  }
  if (overflow && numel_of(shape) != 0) {
    fail("contiguous_strides: the strides of shape ", shape, " overflow int64");
  }
  return strides;
}

int64_t storage_nbytes(const Shape& shape, int64_t element_size, const char* op) {
  for (int64_t s : shape) {
    check(s >= 0, op, ": Trying to create tensor with negative dimension ", s, ": ", shape);
  }
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : shape) overflow = __builtin_mul_overflow(n, s, &n) || overflow;
  int64_t bytes = 0;
  overflow = __builtin_mul_overflow(n, element_size, &bytes) || overflow;
  for (int64_t s : shape) {
    if (s == 0) return 0;
  }
  if (overflow) {
    fail(op, ": Storage size calculation overflowed with sizes=", shape,
         " and itemsize=", element_size);
  }
  return bytes;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim > 0 ? ndim : 1;  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  if (dim < -n || dim >= n) {
    fail(op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1,
         "], but got ", dim, ")");
  }
  return dim < 0 ? dim + n : dim;
}

int64_t wrap_dim_no_scalar(int64_t dim, int64_t ndim, const char* op) {
  if (ndim <= 0) {
    fail(op, ": dimension specified as ", dim, " but tensor has no dimensions");
  }
  return wrap_dim(dim, ndim, op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(op, ": shapes ", a, " and ", b, " cannot be broadcast together (dimension ", i, ": ", da,
           " != ", db, ")");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  std::size_t lead = target.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out[lead + i] = shape[i] == 1 && target[lead + i] != 1 ? 0 : strides[i];
  }
  return out;
}

bool has_internal_overlap(const Shape& shape, const Shape& strides) {
  // An empty tensor has no elements to share (and its strides may be wrapped products of huge
  // sizes: never compute with them).
  for (int64_t size : shape)
    if (size == 0) return false;
  // Fast path (every in-place op and copy_ asks): a contiguous tensor never overlaps itself.
  if (is_row_major(shape, strides)) return false;
  // Dims of size > 1, by increasing |stride|. A zero stride repeats an element (expand).
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (strides[d] == 0) return true;
    dims.emplace_back(strides[d] < 0 ? -strides[d] : strides[d], shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  // Each stride jumps past everything the smaller ones reach: no two elements can meet.
  int64_t reach = 0;
  bool nested = true;
  for (auto [stride, size] : dims) {
    if (stride <= reach) {
      nested = false;
      break;
    }
    reach += stride * (size - 1);
  }
  if (nested) return false;
  // Interleaved strides (not made by Ember's views, but decided exactly all the same).
  std::vector<int64_t> offsets{0};
  for (auto [stride, size] : dims) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<std::size_t>(size));
    for (int64_t o : offsets)
      for (int64_t i = 0; i < size; ++i) next.push_back(o + i * stride);
    offsets = std::move(next);
  }
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}

void check_no_internal_overlap(const Shape& shape, const Shape& strides, const char* op) {
  check(!has_internal_overlap(shape, strides), op,
        ": unsupported operation: more than one element of the written-to tensor refers to a "
        "single memory location. Please clone() the tensor before performing the operation. "
        "(destination shape ",
        shape, ", strides ", strides, ")");
}

}  // namespace ember
