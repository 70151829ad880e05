// The factories: empty, zeros, ones, full, arange, eye, tensor, from_vector, with a dtype or with
// TensorOptions (dtype, requires_grad); rand and randn with options (their kernels are in
// core/tensor/random.cpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>

#include "core/base/convert.h"
#include "core/base/error.h"
#include "core/tensor/options.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"

namespace ember {

namespace {

// Size and allocation errors name `op`, or the op the user called when an op allocates
// (OpScope), and the shape.
Tensor make_contiguous_tensor(const Shape& shape, DType dtype, const char* op = "empty",
                              bool clear = true) {
  const char* name = OpScope::name_or(op);
  const int64_t nbytes = storage_nbytes(shape, static_cast<int64_t>(dtype_size(dtype)), name);
  const auto bytes = static_cast<std::size_t>(nbytes);
  std::shared_ptr<TensorImpl> impl;
  try {
    impl = std::allocate_shared<TensorImpl>(detail::ObjectAllocator<TensorImpl>());
    impl->storage = clear ? std::allocate_shared<Storage>(detail::ObjectAllocator<Storage>(), bytes)
                          : std::allocate_shared<Storage>(detail::ObjectAllocator<Storage>(), bytes,
                                                          Storage::Uninitialized{});
  } catch (const Error& e) {  // Storage's: its buffer
    fail(name, ": cannot allocate a tensor of shape ", shape, " and dtype ", dtype_name(dtype),
         ": ", e.what());
  } catch (const std::bad_alloc&) {  // the tensor's or the storage's object
    fail(name, ": cannot allocate a tensor of shape ", shape, " and dtype ", dtype_name(dtype),
         ": not enough memory");
  }
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace

using detail::checked_cast;

Tensor empty(const Shape& shape, DType dtype) { return make_contiguous_tensor(shape, dtype); }
namespace detail {
Tensor empty_for_overwrite(const Shape& shape, DType dtype) {
  return make_contiguous_tensor(shape, dtype, "empty", /*clear=*/false);
}
}  // namespace detail
Tensor zeros(const Shape& shape, DType dtype) {
  return make_contiguous_tensor(shape, dtype, "zeros");
}
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor full(const Shape& shape, Scalar value, DType dtype) {
  OpScope scope("full");  // a value the dtype cannot hold is full's error, not fill_'s
  Tensor t = make_contiguous_tensor(shape, dtype, "full");
  t.fill_(value);  // (a new tensor is no part of a graph: no grad mode needed)
  return t;
}
Tensor zeros_like(const Tensor& t) {
  detail::check_defined(t, "zeros_like");
  OpScope scope("zeros_like");
  return zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  detail::check_defined(t, "ones_like");
  OpScope scope("ones_like");
  return ones(t.shape(), t.dtype());
}
Tensor full_like(const Tensor& t, Scalar value) {
  detail::check_defined(t, "full_like");
  OpScope scope("full_like");
  return full(t.shape(), value, t.dtype());
}
Tensor empty_like(const Tensor& t) {
  detail::check_defined(t, "empty_like");
  OpScope scope("empty_like");
  return empty(t.shape(), t.dtype());
}
Tensor scalar_tensor(Scalar value, DType dtype) { return full({}, value, dtype); }

Tensor arange(Scalar end, std::optional<DType> dtype) { return arange(0, end, 1, dtype); }

namespace {

// arange of integers into int64, exact as PyTorch's (a double holds integers exactly only up to
// 2^53): the count ceil((end - start) / step) and each value start + i * step in 128 bits, where
// neither overflows. A count beyond int64 is an Error; each value lies in [start, end) (or
// (end, start]), so it fits in int64.
Tensor arange_int64(int64_t start, int64_t end, int64_t step) {
  __extension__ using Int128 = __int128;
  check(step != 0, "arange: step must be nonzero");
  check((step > 0 && end >= start) || (step < 0 && end <= start),
        "arange: upper bound and larger bound inconsistent with step sign");
  const Int128 span = Int128{end} - start;                         // same sign as step, or 0
  const Int128 size = (span + step - (step > 0 ? 1 : -1)) / step;  // ceil(span / step)
  check(size <= std::numeric_limits<int64_t>::max(),
        "arange: invalid size, possible overflow? (start ", start, ", end ", end, ", step ", step,
        ")");
  const auto n = static_cast<int64_t>(size);
  Tensor t = make_contiguous_tensor({n}, DType::Int64, "arange");
  auto* out = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(start + Int128{i} * step);
  return t;
}

}  // namespace

Tensor arange(Scalar start_bound, Scalar end_bound, Scalar step_bound,
              std::optional<DType> dtype_given) {
  const bool integral =
      start_bound.is_integral() && end_bound.is_integral() && step_bound.is_integral();
  const DType dtype = dtype_given.value_or(integral ? DType::Int64 : get_default_dtype());
  if (dtype == DType::Int64) {
    // As PyTorch's: each bound is converted to int64 first (a float truncated toward zero; nan,
    // inf or a value out of range is an Error), then the count and the values are integers:
    // arange(0.5, 6, 1.7, kInt64) is [0, 1, 2, 3, 4, 5], arange(0, 5, 0.5, kInt64) an Error.
    auto whole = [](const Scalar& s) {
      return s.is_integral() ? s.to_int64()
                             : detail::checked_cast<int64_t>(s.to_double(), "arange");
    };
    return arange_int64(whole(start_bound), whole(end_bound), whole(step_bound));
  }
  check(dtype != DType::Bool,
        "arange: not implemented for bool tensors (\"arange_cpu\" not "
        "implemented for 'Bool')");
  const double start = start_bound.to_double(), end = end_bound.to_double(),
               step = step_bound.to_double();
  check(std::isfinite(start) && std::isfinite(end), "arange: unsupported range: ", start, " -> ",
        end);
  check(step != 0, "arange: step must be nonzero");
  check((step > 0 && end >= start) || (step < 0 && end <= start),
        "arange: upper bound and larger bound inconsistent with step sign");
  const double size = std::ceil((end - start) / step);
  check(std::isfinite(size) && size >= 0 && size < 9223372036854775808.0,
        "arange: invalid size, possible overflow? (start ", start, ", end ", end, ", step ", step,
        ")");
  auto n = static_cast<int64_t>(size);
  Tensor t = make_contiguous_tensor({n}, dtype, "arange");
  for (int64_t i = 0; i < n; ++i) t.set({i}, start + static_cast<double>(i) * step);
  return t;
}

Tensor eye(int64_t n, DType dtype) {
  OpScope scope("eye");  // size errors (a negative n, or n * n too large) name eye
  Tensor t = zeros({n, n}, dtype);
  for (int64_t i = 0; i < n; ++i) t.set({i, i}, 1.0);
  return t;
}

// Every list at depth d must have length shape[d], and numbers appear exactly at depth
// shape.size(): the shape is read off the first element at each depth, then checked everywhere.
static void flatten_nested(const NestedList& node, std::size_t depth, const Shape& shape,
                           std::vector<double>& values) {
  if (depth == shape.size()) {
    check(node.is_leaf, "tensor: nested lists have uneven depth (expected a number at depth ",
          depth, ", got a list)");
    values.push_back(node.value);
    return;
  }
  check(!node.is_leaf, "tensor: nested lists have uneven depth (expected a list of length ",
        shape[depth], " at depth ", depth, ", got a number)");
  auto n = static_cast<int64_t>(node.children.size());
  check(shape[depth] == n, "tensor: expected a list of length ", shape[depth], " at depth ", depth,
        ", got ", n);
  for (const NestedList& c : node.children) flatten_nested(c, depth + 1, shape, values);
}

Tensor tensor(const NestedList& values, DType dtype) {
  Shape shape;
  for (const NestedList* n = &values; !n->is_leaf; n = &n->children.front()) {
    shape.push_back(static_cast<int64_t>(n->children.size()));
    if (n->children.empty()) break;
  }
  std::vector<double> flat;
  flatten_nested(values, 0, shape, flat);
  return from_vector(flat, shape, dtype);
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  check(static_cast<int64_t>(values.size()) == numel_of(shape), "from_vector: ", values.size(),
        " values cannot fill shape ", shape);
  Tensor t = make_contiguous_tensor(shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = checked_cast<T>(values[i], "tensor");
  });
  return t;
}

// ---- with TensorOptions ----

namespace {

// The finishing touch of every factory with options: requires_grad.
Tensor finish(Tensor t, const TensorOptions& options, const char* op) {
  if (options.requires_grad()) {
    check(is_floating(t.dtype()), op,
          ": only Tensors of floating point dtype can require gradients, got dtype ",
          dtype_name(t.dtype()));
    t.requires_grad_(true);
  }
  return t;
}

}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& options) {
  return finish(empty(shape, options.dtype()), options, "empty");
}
Tensor zeros(const Shape& shape, const TensorOptions& options) {
  return finish(zeros(shape, options.dtype()), options, "zeros");
}
Tensor ones(const Shape& shape, const TensorOptions& options) {
  return finish(ones(shape, options.dtype()), options, "ones");
}
Tensor full(const Shape& shape, Scalar value, const TensorOptions& options) {
  return finish(full(shape, value, options.dtype()), options, "full");
}
Tensor eye(int64_t n, const TensorOptions& options) {
  return finish(eye(n, options.dtype()), options, "eye");
}
Tensor rand(const Shape& shape, const TensorOptions& options, Generator* gen) {
  return finish(rand(shape, options.dtype(), gen), options, "rand");
}
Tensor randn(const Shape& shape, const TensorOptions& options, Generator* gen) {
  return finish(randn(shape, options.dtype(), gen), options, "randn");
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   const TensorOptions& options) {
  return finish(from_vector(values, shape, options.dtype()), options, "from_vector");
}

template <typename T>
requires(std::same_as<T, float> || std::same_as<T, int64_t>) Tensor
    from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  if constexpr (std::same_as<T, float>) {
    // Every float is a double exactly.
    return from_vector(std::vector<double>(values.begin(), values.end()), shape, options);
  } else {
    if (options.dtype() != DType::Int64) {
      // Into a float or bool tensor, each value rounds once, as PyTorch's int64 -> dtype cast
      // does (through a double, a value beyond 2^53 could round twice).
      return finish(
          from_vector(values, shape, TensorOptions().dtype(DType::Int64)).to(options.dtype()),
          options, "from_vector");
    }
    check(static_cast<int64_t>(values.size()) == numel_of(shape), "from_vector: ", values.size(),
          " values cannot fill shape ", shape);
    Tensor t = empty(shape, DType::Int64);
    std::copy(values.begin(), values.end(), t.data_ptr<int64_t>());
    return finish(t, options, "from_vector");
  }
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&,
                                     const TensorOptions&);

}  // namespace ember
