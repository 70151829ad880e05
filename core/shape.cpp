#include "core/shape.h"

#include <string>

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

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : shape) overflow = __builtin_mul_overflow(n, s, &n) || overflow;
  // A zero anywhere makes the product 0 whatever the other sizes are, as in PyTorch.
  for (int64_t s : shape) {
    if (s == 0) return 0;
  }
  if (overflow) fail("numel: the number of elements of shape ", shape, " overflows int64");
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

}  // namespace ember
