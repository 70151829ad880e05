// Tensor itself: metadata, element access, fill_, the autograd flags, views' bookkeeping and the
// in-place checks. Elsewhere: the factories in core/tensor/factories.cpp, views in core/ops/view.cpp,
// to / clone / copy_ in core/ops/copy.cpp, printing in core/ops/print.cpp, equal and allclose
// in core/ops/compare.cpp, backward() in core/autograd/engine.cpp (the layers: core/README.md).
#include "core/tensor/tensor.h"

#include <cmath>
#include <new>
#include <stdexcept>

#include "core/base/allocator.h"
#include "core/base/convert.h"
#include "core/base/format.h"
#include "core/base/grad_mode.h"
#include "core/kernels/iterate.h"

namespace ember {

using detail::convert_element;
using detail::scalar_to_element;

namespace {

// Offset (in elements) of a multi-index, with bounds checks.
int64_t element_offset(const Tensor& t, const std::vector<int64_t>& index, const char* op) {
  check(static_cast<int64_t>(index.size()) == t.dim(), op, ": expected ", t.dim(),
        " indices for a tensor of shape ", t.shape(), ", got ", index.size());
  int64_t off = t.offset();
  for (std::size_t d = 0; d < index.size(); ++d) {
    int64_t i = index[d] < 0 ? index[d] + t.shape()[d] : index[d];
    check(i >= 0 && i < t.shape()[d], op, ": index ", index[d], " is out of bounds for dimension ",
          d, " with size ", t.shape()[d]);
    off += i * t.strides()[d];
  }
  return off;
}

double read_as_double(const Tensor& t, int64_t storage_offset) {
  return dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(static_cast<const T*>(t.storage()->data())[storage_offset]);
  });
}

}  // namespace

// ---- metadata ----
const Shape& Tensor::shape() const { return checked_impl("shape").shape; }
int64_t Tensor::size(int64_t d) const {
  const Shape& shape = checked_impl("size").shape;
  const auto n = static_cast<int64_t>(shape.size());
  if (d >= 0 && d < n) return shape[d];  // the common case, without a call
  return shape[wrap_dim_no_scalar(d, n, "size")];
}
int64_t Tensor::dim() const { return static_cast<int64_t>(checked_impl("dim").shape.size()); }
int64_t Tensor::numel() const { return numel_of(checked_impl("numel").shape); }
const Shape& Tensor::strides() const { return checked_impl("strides").strides; }
int64_t Tensor::stride(int64_t d) const {
  const TensorImpl& impl = checked_impl("stride");
  const auto n = static_cast<int64_t>(impl.shape.size());
  if (d >= 0 && d < n) return impl.strides[d];  // the common case, without a call
  return impl.strides[wrap_dim_no_scalar(d, n, "stride")];
}
int64_t Tensor::offset() const { return checked_impl("offset").offset; }
DType Tensor::dtype() const { return checked_impl("dtype").dtype; }
bool Tensor::is_contiguous() const {
  const TensorImpl& impl = checked_impl("is_contiguous");
  return is_row_major(impl.shape, impl.strides);
}
const std::shared_ptr<Storage>& Tensor::storage() const { return checked_impl("storage").storage; }

// ---- values ----
double Tensor::item() const {
  detail::check_defined(*this, "item");
  check(numel() == 1, "item: a Tensor with ", numel(),
        " elements cannot be converted to a scalar (shape ", shape(), ")");
  Shape zero(dim(), 0);
  return at(zero);
}

int64_t Tensor::item_int64() const {
  check(numel() == 1, "item: a Tensor with ", numel(),
        " elements cannot be converted to a scalar (shape ", shape(), ")");
  const int64_t off = element_offset(*this, Shape(dim(), 0), "item");
  return dispatch(dtype(), [&](auto tag) {
    using S = decltype(tag);
    return convert_element<int64_t>(static_cast<const S*>(storage()->data())[off], "item");
  });
}

double Tensor::at(const std::vector<int64_t>& index) const {
  detail::check_defined(*this, "at");
  return read_as_double(*this, element_offset(*this, index, "at"));
}

void Tensor::set(const std::vector<int64_t>& index, Scalar value) {
  detail::check_defined(*this, "set");
  int64_t off = element_offset(*this, index, "set");
  check_no_internal_overlap(shape(), strides(), "set");  // one write would change several elements
  dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(storage()->data())[off] = scalar_to_element<T>(value, "set");
  });
  storage()->bump_version();
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  detail::check_defined(*this, "to_vector");
  // Inside an op (gather's or embedding's index, read as a vector), the size errors name the op.
  const char* op = OpScope::name_or("to_vector");
  const int64_t n = numel_of(shape(), op);
  // More values than the machine's memory holds is refused before asking for them (an expanded
  // view of 2^40 elements would ask the allocator for 8 TB).
  if (static_cast<double>(n) * sizeof(T) > detail::physical_memory_bytes()) {
    fail(op, ": cannot allocate ", n, " values for a tensor of shape ", shape());
  }
  std::vector<T> out;
  try {
    out.resize(static_cast<std::size_t>(n));
  } catch (const std::bad_alloc&) {  // an expanded view's values may not fit in memory
    fail(op, ": cannot allocate ", n, " values for a tensor of shape ", shape());
  } catch (const std::length_error&) {
    fail(op, ": cannot allocate ", n, " values for a tensor of shape ", shape());
  }
  dispatch(dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* base = static_cast<const S*>(storage()->data()) + offset();
    kernels::unary_map(out.data(), base, shape(), strides(),
                       [](S v) { return convert_element<T>(v, "to_vector"); });
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

Tensor Tensor::detach() const {
  detail::check_defined(*this, "detach");
  return detail::make_view(*this, shape(), strides(), offset());
}

Tensor& Tensor::fill_(Scalar value) {
  // Every element gets the same value, so an expanded destination is fine (as in PyTorch).
  detail::check_inplace(*this, "fill_", /*allow_internal_overlap=*/true);
  numel_of(shape(), "fill_");  // an expanded view may count beyond int64
  check(!(GradMode::is_enabled() && requires_grad()),
        "fill_: filling a tensor that is part of a graph is not supported; use full_like");
  dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    // A value the dtype cannot hold names the op the caller called (full, masked_fill...).
    const T fill_value = scalar_to_element<T>(value, OpScope::name_or("fill_"));
    T* base = static_cast<T*>(storage()->data());
    Shape out_strides = strides();
    kernels::for_each_row<1>(shape(), {&out_strides}, [&](auto off, int64_t n, auto step) {
      T* d = base + offset() + off[0];
      for (int64_t i = 0; i < n; ++i) d[i * step[0]] = fill_value;
    });
  });
  return *this;
}

// ---- autograd state ----
bool Tensor::requires_grad() const { return checked_impl("requires_grad").requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  detail::check_defined(*this, "requires_grad_");
  check(is_leaf() || on,
        "requires_grad_: you can only change requires_grad flags of leaf variables");
  check(!on || is_floating(dtype()),
        "requires_grad_: only tensors of floating point dtype can require gradients (got ",
        dtype_name(dtype()), ")");
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return checked_impl("is_leaf").grad_fn == nullptr; }
Tensor Tensor::grad() const { return checked_impl("grad").grad; }
void Tensor::set_grad(const Tensor& grad) {
  TensorImpl& impl = checked_impl("set_grad");
  // PyTorch's checks on `x.grad = g`: a gradient of another type or size would be used by the
  // optimizers and accumulated into by backward as if it fitted.
  if (grad.defined()) {
    check(grad.impl() != impl_.get(), "set_grad: can't assign Variable as its own grad");
    check(grad.dtype() == impl.dtype, "set_grad: assigned grad has data of a different type (",
          dtype_name(grad.dtype()), ", the tensor is ", dtype_name(impl.dtype), ")");
    check(grad.shape() == impl.shape, "set_grad: assigned grad has data of a different size (",
          grad.shape(), ", the tensor is ", impl.shape, ")");
    // A tensor owns its .grad: a chain of .grads leading back to this tensor (a.set_grad(b)
    // with b.grad() being a) would own itself and never be freed. (PyTorch accepts it, and
    // leaks; only the tensor itself is refused there.)
    int64_t depth = 1;
    for (const TensorImpl* g = grad.impl()->grad.impl(); g != nullptr; g = g->grad.impl()) {
      check(g != impl_.get(), "set_grad: the assigned grad (shape ", grad.shape(),
            ") leads back to this tensor through ", depth,
            " .grad link(s): the tensors would own each other and never be freed");
      ++depth;
    }
  }
  impl.grad = grad;
}
std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return checked_impl("grad_fn").grad_fn; }

void Tensor::retain_grad() const {
  detail::check_defined(*this, "retain_grad");
  check(requires_grad(), "retain_grad: can't retain_grad on Tensor that has requires_grad=False");
  if (!is_leaf()) impl_->retains_grad = true;
}

bool Tensor::retains_grad() const { return checked_impl("retains_grad").retains_grad; }

std::string size_str(const Shape& shape) { return format_size(shape); }

// ---- internals ----
namespace detail {

void fail_undefined(const char* op) {
  fail(op,
       ": expected a defined tensor, got an undefined one (a gradient that was never "
       "computed?)");
}

Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  return make_view(t, Shape(shape), Shape(strides), offset);
}

Tensor make_view(const Tensor& t, Shape&& shape, Shape&& strides, int64_t offset) {
  // A view of an empty tensor with huge dims can get a wrapped offset (view_offset in
  // core/ops/view.cpp); it addresses nothing, but data_ptr() adds it to the storage's pointer,
  // which must stay within the buffer. Such an empty view starts at the storage's start.
  const auto elements = static_cast<int64_t>(t.storage()->nbytes() / dtype_size(t.dtype()));
  if (offset < 0 || offset > elements) {
    for (int64_t size : shape) {
      if (size == 0) {
        offset = 0;
        break;
      }
    }
  }
  auto impl = std::allocate_shared<TensorImpl>(detail::ObjectAllocator<TensorImpl>());
  impl->storage = t.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

void check_inplace(const Tensor& t, const char* op, bool allow_internal_overlap) {
  check_defined(t, op);
  if (!allow_internal_overlap) check_no_internal_overlap(t.shape(), t.strides(), op);
  if (GradMode::is_enabled()) {
    check(!(t.is_leaf() && t.requires_grad()), op,
          ": a leaf Variable that requires grad is being used in an in-place operation.");
    check(!(t.impl()->is_view && t.requires_grad()), op,
          ": in-place modification of a view of a tensor that requires grad is not supported "
          "(its base would not see the change); apply the op out of place");
    check(!t.impl()->no_grad_view_of_grad, op,
          ": a view was created in no_grad mode and is being modified inplace with grad mode "
          "enabled. Move both the view and the inplace either inside the no_grad block or "
          "outside it");
  }
  t.storage()->bump_version();
}

void fail_stale_view(const Tensor& t, const char* op) {
  fail(op, ": an input of shape ", t.shape(),
       " is a view taken before an in-place operation that autograd recorded on its base (or "
       "on another view of the same storage): the view still carries the base's old history, "
       "so its gradient would be wrong. Take the view again after the in-place operation");
}

}  // namespace detail

}  // namespace ember
