// Tensor basics: metadata, factories, element access, copies, printing.
// Views live in ops/shape.cpp, arithmetic in ops/*.cpp, the backward engine in autograd/.
#include "core/tensor.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/autograd/engine.h"
#include "core/autograd/function.h"
#include "core/format.h"
#include "core/kernels/iterate.h"
#include "core/ops/elementwise.h"
#include "core/overlap.h"

namespace ember {

namespace {

Tensor make_contiguous_tensor(const Shape& shape, DType dtype, const char* op = "empty",
                              bool clear = true) {
  const int64_t nbytes = storage_nbytes(shape, static_cast<int64_t>(dtype_size(dtype)), op);
  auto impl = std::allocate_shared<TensorImpl>(detail::ObjectAllocator<TensorImpl>());
  const auto bytes = static_cast<std::size_t>(nbytes);
  impl->storage = clear ? std::allocate_shared<Storage>(detail::ObjectAllocator<Storage>(), bytes)
                        : std::allocate_shared<Storage>(detail::ObjectAllocator<Storage>(), bytes,
                                                        Storage::Uninitialized{});
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

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

// A double converted to element type T; an int64 that cannot hold it (inf, nan, out of range)
// is an Error, as in PyTorch ("value cannot be converted to type int64_t without overflow"),
// never undefined behaviour. With `fill` (fill_, full, set, masked_fill: PyTorch's Scalar
// checks), a finite value beyond float32's range is an Error too ("value cannot be converted to
// type float without overflow"); inf and nan are kept.
template <typename T>
T checked_cast(double value, const char* op, bool fill = false) {
  if constexpr (std::is_same_v<T, int64_t>) {
    check(std::isfinite(value) && value >= -9223372036854775808.0 && value < 9223372036854775808.0,
          op, ": value ", value, " cannot be converted to type int64 without overflow");
  } else if constexpr (std::is_same_v<T, float>) {
    check(!fill || !std::isfinite(value) ||
              std::fabs(value) <= static_cast<double>(std::numeric_limits<float>::max()),
          op, ": value ", value, " cannot be converted to type float without overflow");
  }
  return static_cast<T>(value);
}

// One element converted from S to D; a float that an int64 cannot hold is an Error.
template <typename D, typename S>
D convert_element(S v, const char* op) {
  if constexpr (std::is_same_v<D, int64_t> && std::is_floating_point_v<S>) {
    check(std::isfinite(v) && v >= S(-9223372036854775808.0) && v < S(9223372036854775808.0), op,
          ": value ", v, " cannot be converted to type int64 without overflow");
  }
  return static_cast<D>(v);
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
  return kernels::is_row_major(impl.shape, impl.strides);
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

void Tensor::set(const std::vector<int64_t>& index, double value) {
  detail::check_defined(*this, "set");
  int64_t off = element_offset(*this, index, "set");
  assert_no_internal_overlap(*this, "set");  // one write would change several elements
  dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(storage()->data())[off] = checked_cast<T>(value, "set", /*fill=*/true);
  });
  storage()->bump_version();
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  detail::check_defined(*this, "to_vector");
  std::vector<T> out(numel());
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

// ---- conversions and copies ----

// A strided copy into a new contiguous tensor of `dtype` (no autograd).
static Tensor copy_to_contiguous(const Tensor& src, DType dtype) {
  // unary_map writes every element (or throws, and `out` is never seen).
  Tensor out = detail::empty_for_overwrite(src.shape(), dtype);
  dispatch(src.dtype(), [&](auto stag) {
    using S = decltype(stag);
    dispatch(dtype, [&](auto dtag) {
      using D = decltype(dtag);
      kernels::unary_map(out.data_ptr<D>(), src.data_ptr<S>(), src.shape(), src.strides(),
                         [](S v) { return convert_element<D>(v, "to"); });
    });
  });
  return out;
}

namespace {
struct ToCopy : autograd::Function<ToCopy> {
  static constexpr const char* name = "ToCopyBackward0";
  DType input_dtype;
  Tensor forward(const Tensor& x, DType dtype) {
    input_dtype = x.dtype();
    return copy_to_contiguous(x, dtype);
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.to(input_dtype)}; }
};

struct Clone : autograd::Function<Clone> {
  static constexpr const char* name = "CloneBackward0";
  Tensor forward(const Tensor& x) { return copy_to_contiguous(x, x.dtype()); }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad}; }
};

// self.copy_(src) inside the graph (PyTorch's CopyBackwards): self's old values are
// overwritten, so its old history gets a zero gradient; src gets the gradient, summed back over
// the dims it was broadcast along (by the engine) and converted to its dtype.
struct CopyBackwards : autograd::Function<CopyBackwards> {
  static constexpr const char* name = "CopyBackwards";
  Tensor forward(const Tensor& self, const Tensor& src) {
    return copy_to_contiguous(src.expand(self.shape()), self.dtype());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {zeros_like(grad), grad}; }
};
}  // namespace

Tensor Tensor::to(DType target) const {
  detail::check_defined(*this, "to");
  if (target == dtype()) return *this;
  if (!is_floating(target) && requires_grad()) {
    NoGradGuard no_grad;  // integer and bool tensors carry no gradient
    return copy_to_contiguous(*this, target);
  }
  return autograd::apply<ToCopy>(*this, target);
}

Tensor Tensor::contiguous() const {
  detail::check_defined(*this, "contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  detail::check_defined(*this, "clone");
  return autograd::apply<Clone>(*this);
}

Tensor Tensor::detach() const {
  detail::check_defined(*this, "detach");
  return detail::make_view(*this, shape(), strides(), offset());
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_defined(src, "copy_");
  detail::check_inplace(*this, "copy_");
  assert_no_partial_overlap(*this, src, "copy_");
  Shape target = broadcast_shapes(src.shape(), shape(), "copy_");
  check(target == shape(), "copy_: source of shape ", src.shape(),
        " cannot be broadcast to destination of shape ", shape());
  // (An integer or bool destination takes the values only: it cannot carry a gradient.)
  if (GradMode::is_enabled() && (src.requires_grad() || requires_grad()) && is_floating(dtype())) {
    check(!impl_->is_view,
          "copy_: copying a tensor that requires grad into a view is not "
          "supported (the view's base would not see it); use cat/stack or an out-of-place op");
    // Differentiable copy: gradient flows to src, none to the overwritten values. When only
    // self is in the graph, its history is still replaced (its old values no longer matter).
    Tensor result = autograd::apply<CopyBackwards>(*this, src);
    NoGradGuard no_grad;
    copy_(result);
    // The old history no longer produces this tensor: its node must not run our hooks.
    if (impl_->grad_fn) impl_->grad_fn->output.reset();
    impl_->grad_fn = result.impl()->grad_fn;
    impl_->requires_grad = true;
    impl_->grad_fn->output = impl_;
    return *this;
  }
  // A strided source whose elements may be among the destination's is read before any write.
  if (overlap_status(*this, src) == MemOverlap::TooHard)
    return copy_(copy_to_contiguous(src, src.dtype()));
  Shape src_strides = broadcast_strides(src.shape(), src.strides(), shape());
  dispatch(src.dtype(), [&](auto stag) {
    using S = decltype(stag);
    dispatch(dtype(), [&](auto dtag) {
      using D = decltype(dtag);
      D* dst = static_cast<D*>(storage()->data());
      const S* from = static_cast<const S*>(src.storage()->data());
      auto row = [&](auto off, int64_t n, auto step) {
        D* d = dst + offset() + off[0];
        const S* s = from + src.offset() + off[1];
        for (int64_t i = 0; i < n; ++i)
          d[i * step[0]] = convert_element<D>(s[i * step[1]], "copy_");
      };
      // A contiguous destination has each element once: rows may go to different threads.
      // (Another layout may repeat elements through its strides; it is written in order.)
      if (is_contiguous()) {
        kernels::for_each_row_parallel<2>(shape(), {&impl_->strides, &src_strides}, row);
      } else {
        kernels::for_each_row<2>(shape(), {&impl_->strides, &src_strides}, row);
      }
    });
  });
  return *this;
}

Tensor& Tensor::fill_(double value) {
  // Every element gets the same value, so an expanded destination is fine (as in PyTorch).
  detail::check_inplace(*this, "fill_", /*allow_internal_overlap=*/true);
  check(!(GradMode::is_enabled() && requires_grad()),
        "fill_: filling a tensor that is part of a graph is not supported; use full_like");
  dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T fill_value = checked_cast<T>(value, "fill_", /*fill=*/true);
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
  }
  impl.grad = grad;
}
std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return checked_impl("grad_fn").grad_fn; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  detail::check_defined(*this, "backward");
  autograd::backward({*this}, {gradient}, retain_graph);
}

void Tensor::retain_grad() const {
  detail::check_defined(*this, "retain_grad");
  check(requires_grad(), "retain_grad: can't retain_grad on Tensor that has requires_grad=False");
  if (!is_leaf()) impl_->retains_grad = true;
}

bool Tensor::retains_grad() const { return checked_impl("retains_grad").retains_grad; }

unsigned Tensor::register_hook(GradHook hook) const {
  detail::check_defined(*this, "register_hook");
  check(requires_grad(),
        "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  check(static_cast<bool>(hook), "register_hook: the hook is an empty function");
  std::vector<GradHook>& hooks = is_leaf() ? impl_->hooks : impl_->grad_fn->pre_hooks;
  hooks.push_back(std::move(hook));
  return static_cast<unsigned>(hooks.size() - 1);
}

void Tensor::remove_hook(unsigned handle) const {
  detail::check_defined(*this, "remove_hook");
  std::vector<GradHook>* hooks = nullptr;
  if (is_leaf()) {
    hooks = &impl_->hooks;
  } else {
    hooks = &impl_->grad_fn->pre_hooks;
  }
  check(handle < hooks->size(), "remove_hook: invalid index, no hook at position ", handle,
        " (this tensor has ", hooks->size(), ")");
  (*hooks)[handle] = nullptr;  // the slot stays: the other handles keep their meaning
}

// ---- factories ----
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
Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = make_contiguous_tensor(shape, dtype, "full");
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor zeros_like(const Tensor& t) {
  detail::check_defined(t, "zeros_like");
  return zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  detail::check_defined(t, "ones_like");
  return ones(t.shape(), t.dtype());
}
Tensor full_like(const Tensor& t, double value) {
  detail::check_defined(t, "full_like");
  return full(t.shape(), value, t.dtype());
}
Tensor empty_like(const Tensor& t) {
  detail::check_defined(t, "empty_like");
  return empty(t.shape(), t.dtype());
}
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
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
  Tensor t = zeros({n, n}, dtype);
  for (int64_t i = 0; i < n; ++i) t.set({i, i}, 1.0);
  return t;
}

static Tensor triangle(const Tensor& t, int64_t diagonal, bool upper, const char* op) {
  check(t.dim() >= 2, op, ": input tensor must have at least 2 dimensions, got shape ", t.shape());
  Tensor out = copy_to_contiguous(t, t.dtype());
  if (out.numel() == 0) return out;  // (rows * cols may be a product of an empty tensor's sizes)
  const int64_t rows = t.size(-2), cols = t.size(-1), matrices = t.numel() / (rows * cols);
  dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data_ptr<T>();
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          bool keep = upper ? (j - i >= diagonal) : (j - i <= diagonal);
          if (!keep) p[(m * rows + i) * cols + j] = T(0);
        }
  });
  return out;
}
namespace {
// y = x with the entries outside a triangle zeroed:  dx = dy with the same entries zeroed.
template <bool Upper>
struct Triangle : autograd::Function<Triangle<Upper>> {
  static constexpr const char* name = Upper ? "TriuBackward0" : "TrilBackward0";
  static constexpr const char* op = Upper ? "triu" : "tril";
  int64_t diagonal = 0;
  Tensor forward(const Tensor& x, int64_t d) {
    diagonal = d;
    return triangle(x, d, Upper, op);
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {triangle(grad, diagonal, Upper, op)}; }
};
}  // namespace

Tensor triu(const Tensor& t, int64_t diagonal) {
  return autograd::apply<Triangle<true>>(t, diagonal);
}
Tensor tril(const Tensor& t, int64_t diagonal) {
  return autograd::apply<Triangle<false>>(t, diagonal);
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

// ---- whole-tensor comparisons ----
bool equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  return x == y;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  Shape target = broadcast_shapes(a.shape(), b.shape(), "allclose");
  auto x = a.expand(target).to_vector<double>(), y = b.expand(target).to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (!(equal_nan && std::isnan(x[i]) && std::isnan(y[i]))) return false;
      continue;
    }
    if (x[i] == y[i]) continue;  // equal infinities
    // Unequal infinities: |inf - (-inf)| = inf is not > atol + rtol * inf, so say it here.
    if (std::isinf(x[i]) || std::isinf(y[i])) return false;
    if (std::fabs(x[i] - y[i]) > atol + rtol * std::fabs(y[i])) return false;
  }
  return true;
}

// ---- printing ----
std::string repr(const Tensor& t) {
  if (!t.defined()) return "None";
  std::vector<std::string> suffixes;
  if (t.grad_fn()) {
    suffixes.push_back("grad_fn=<" + t.grad_fn()->name() + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  if (!is_floating(t.dtype()))
    return format_int_tensor(t.shape(), t.to_vector<int64_t>(), t.dtype(), suffixes);
  return format_tensor(t.shape(), t.to_vector<double>(), t.dtype(), suffixes);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << repr(t); }

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
  if (!allow_internal_overlap) assert_no_internal_overlap(t, op);
  if (GradMode::is_enabled()) {
    check(!(t.is_leaf() && t.requires_grad()), op,
          ": a leaf Variable that requires grad is being used in an in-place operation.");
    check(!(t.impl()->is_view && t.requires_grad()), op,
          ": in-place modification of a view of a tensor that requires grad is not supported "
          "(its base would not see the change); apply the op out of place");
  }
  t.storage()->bump_version();
}

}  // namespace detail

}  // namespace ember
