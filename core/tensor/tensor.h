// Tensor: a cheap handle to shared storage seen through a shape, strides and an offset.
//
// Copying a Tensor copies the handle, not the data (like a Python reference to a torch.Tensor).
// Views (view, transpose, slice, ...) are new handles over the same Storage. Autograd state
// (requires_grad, grad, grad_fn) lives in the TensorImpl the handle points to.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/base/args.h"
#include "core/base/dtype.h"
#include "core/base/error.h"
#include "core/base/shape.h"
#include "core/base/storage.h"
#include "core/tensor/options.h"

namespace ember {

namespace autograd {
class Node;
}

class Tensor;
struct TensorImpl;

// A gradient hook: gets the gradient, returns a replacement or an undefined Tensor to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;
// A registered hook: its handle (register_hook's return value, unique per tensor) and the
// function, shared so that a backward running it keeps it alive while it removes itself.
struct GradHookEntry {
  unsigned handle = 0;
  std::shared_ptr<const GradHook> fn;
};

// One index of Tensor::index({...}): an integer (selects, dropping the dim) or a Slice.
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(std::optional<int64_t> start_ = std::nullopt, std::optional<int64_t> stop_ = std::nullopt,
        int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};
inline constexpr std::nullopt_t None = std::nullopt;  // Slice(None, n) reads like mask[:n]
using TensorIndex = std::variant<int64_t, Slice>;

// Nested initializer lists for tensor({{1, 2}, {3, 4}}): a value or a list of them.
struct NestedList {
  NestedList(double v) : value(v), is_leaf(true) {}
  NestedList(int v) : value(v), is_leaf(true) {}
  NestedList(std::initializer_list<NestedList> l) : children(l) {}
  double value = 0;
  bool is_leaf = false;
  std::vector<NestedList> children;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (like None)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- metadata ----
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  int64_t size(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  const Shape& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const;
  DType dtype() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;

  // Pointer to the first element; T must be the dtype's C++ type.
  template <typename T>
  T* data_ptr() const;

  // ---- values ----
  double item() const;  // one-element tensors only
  // item<int64_t>() (any integer type) reads the integer itself, never through double; from a
  // float, nan, inf or a value out of int64's range is an Error, and so is a value out of T's
  // range (item<int32_t>() of 2^40, item<uint8_t>() of -1), as libtorch's checked item<T>().
  template <typename T>
  T item() const {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const int64_t v = item_int64();
      check(std::in_range<T>(v), "item: value ", v, " cannot be converted to type ",
            std::is_signed_v<T> ? "int" : "uint", sizeof(T) * 8, " without overflow");
      return static_cast<T>(v);
    } else {
      return static_cast<T>(item());
    }
  }
  int64_t item_int64() const;
  double at(const std::vector<int64_t>& index) const;         // one element, any dtype, as double
  void set(const std::vector<int64_t>& index, Scalar value);  // raw write (no autograd)
  // All elements in row-major order as float, double or int64_t (bool tensors: as int64_t).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- conversions and copies ----
  Tensor to(DType dtype) const;      // differentiable between float types
  Tensor contiguous() const;         // the same tensor when already contiguous
  Tensor clone() const;              // differentiable copy
  Tensor detach() const;             // same storage, out of the graph
  Tensor& copy_(const Tensor& src);  // in place, broadcasting src
  Tensor& fill_(Scalar value);       // an integer into int64 exactly
  Tensor& zero_() { return fill_(0.0); }
  Tensor to_bool() const { return to(DType::Bool); }  // PyTorch's t.bool()

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const;
  Tensor grad() const;                // undefined until a backward reaches this tensor
  void set_grad(const Tensor& grad);  // e.g. an undefined Tensor to reset it
  std::shared_ptr<autograd::Node> grad_fn() const;
  // libtorch's: retain_graph defaults to create_graph; create_graph records the backward's own
  // graph, so the gradients can be differentiated again (core/autograd/engine.h).
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  void retain_grad() const;  // keep .grad() on a non-leaf
  bool retains_grad() const;
  // A hook on this tensor's gradient; returns its handle for remove_hook (libtorch's API).
  // Lifetime: a hook that captures its own tensor (`y.register_hook([y](...) {...})`) makes a
  // cycle y -> grad_fn -> hook -> y. A backward without retain_graph through y's grad_fn breaks
  // it (the hooks of a node are released once it has run, with its saved tensors). Two cases
  // still need remove_hook(handle) (or a hook capturing no owning handle of its tensor) to free
  // the memory: a hook on a non-leaf whose graph is never run backward (or only with
  // retain_graph=true), and a hook on a leaf that captures the leaf (a leaf's hooks stay for
  // every backward, as in PyTorch).
  unsigned register_hook(GradHook hook) const;
  // Removes the hook `handle` (register_hook's return value on this same tensor, also after an
  // in-place op rebased it); removing one twice, or after a backward released it, does nothing.
  // A hook may register or remove hooks, itself included, while it runs: the hooks the pass
  // found on the tensor all run, once.
  void remove_hook(unsigned handle) const;
  int64_t version() const { return static_cast<int64_t>(storage()->version()); }

  // ---- views (share storage; differentiable) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-d transpose; PyTorch's .T for 2-d
  Tensor mT() const { return transpose(-2, -1); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor index(const std::vector<TensorIndex>& indices) const;  // t[:n, 2]
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  // ---- common ops as methods (defined with the ops) ----
  Tensor sum() const;
  Tensor sum(Dim dim, Bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(Dim dim, Bool keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor pow(Scalar exponent) const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor dot(const Tensor& other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  template <std::same_as<bool> B>  // a dim is an integer: softmax(true) does not compile
  Tensor softmax(B) const = delete;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  Tensor argmax(Dim dim, Bool keepdim = false) const;

  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  // torch.var(x, dim, unbiased, keepdim), x.std(...) (defined with the reductions).
  Tensor var(Dim dim, Bool unbiased = true, Bool keepdim = false) const;
  Tensor std(Dim dim, Bool unbiased = true, Bool keepdim = false) const;

  // In-place arithmetic with libtorch's signatures (core/ops/inplace.cpp). Refused on leaves
  // that require grad and on destinations with internal overlap; the result type must be
  // castable to this tensor's dtype ("result type Float can't be cast to the desired output type
  // Long"); an input partially overlapping this tensor is an Error, as in PyTorch.
  Tensor& add_(const Tensor& other, Scalar alpha = 1);  // this += alpha * other
  Tensor& add_(Scalar other, Scalar alpha = 1);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(Scalar other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar factor);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar divisor);
  Tensor& addcmul_(const Tensor& tensor1, const Tensor& tensor2, double value = 1);
  Tensor& addcdiv_(const Tensor& tensor1, const Tensor& tensor2, double value = 1);
  Tensor& lerp_(const Tensor& end, double weight);
  Tensor& lerp_(const Tensor& end, const Tensor& weight);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& sqrt_();
  Tensor& operator+=(const Tensor& other) { return add_(other); }
  Tensor& operator-=(const Tensor& other) { return sub_(other); }
  Tensor& operator*=(const Tensor& other) { return mul_(other); }
  Tensor& operator/=(const Tensor& other) { return div_(other); }

 private:
  // The impl, or an Error naming `op` when this tensor is undefined (every accessor goes here).
  TensorImpl& checked_impl(const char* op) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Everything a tensor is: where its numbers are, how to read them, and its autograd state.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = kDefaultDType;

  // Autograd.
  bool requires_grad = false;
  Tensor grad;                                     // accumulated on leaves
  std::shared_ptr<autograd::Node> grad_fn;         // null on leaves
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: their AccumulateGrad node
  bool retains_grad = false;                       // non-leaves that keep .grad
  std::vector<GradHookEntry> hooks;  // leaves (run by AccumulateGrad); non-leaves: on grad_fn
  // Non-leaves: the node each hook registered on this tensor lives on (its grad_fn then: an
  // in-place op rebases the tensor, the hooks stay), for remove_hook.
  std::vector<std::pair<unsigned, std::weak_ptr<autograd::Node>>> hook_nodes;
  unsigned hooks_registered = 0;  // the next handle
  // A differentiable view of another tensor (view, transpose, slice...): in-place writes to it
  // would also change its base, which autograd does not follow here, so they are refused.
  bool is_view = false;
  // Views only: the storage's graph_write_version when the view's history was taken (from its
  // base, or from the view it was taken of). An in-place op recorded on the base since then
  // gave the base a new history that the view does not have (PyTorch regenerates the view's
  // grad_fn; Ember refuses the stale view: detail::view_is_stale).
  uint64_t view_graph_version = 0;
  // Views only: taken under NoGradGuard of a tensor that required grad. An in-place write to it
  // with grad mode on is refused, as in PyTorch (it would change the base behind autograd).
  bool no_grad_view_of_grad = false;
};

// ---- factories (the default dtype, get_default_dtype(), unless a dtype is given; TensorOptions
// overloads in core/tensor/options.h) ----
Tensor empty(const Shape& shape, DType dtype = get_default_dtype());
Tensor zeros(const Shape& shape, DType dtype = get_default_dtype());
Tensor ones(const Shape& shape, DType dtype = get_default_dtype());
Tensor full(const Shape& shape, Scalar value, DType dtype = get_default_dtype());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor empty_like(const Tensor& t);
Tensor scalar_tensor(Scalar value, DType dtype = get_default_dtype());  // 0-d
// arange(end), arange(start, end, step), as torch.arange: unless a dtype is given, int64 when
// every bound is a C++ integer (arange(5)), the default dtype when one is floating (arange(5.0),
// arange(0, 1, 0.25)).
Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt);
Tensor eye(int64_t n, DType dtype = get_default_dtype());
Tensor triu(const Tensor& t, int64_t diagonal = 0);  // keeps j - i >= diagonal
Tensor tril(const Tensor& t, int64_t diagonal = 0);  // keeps j - i <= diagonal
// tensor({{0.43, 0.15}, {0.55, 0.87}}): shape from the nesting, the default dtype unless given.
Tensor tensor(const NestedList& values, DType dtype = get_default_dtype());
// From a flat vector and a shape.
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   DType dtype = get_default_dtype());

// ---- comparisons of whole tensors ----
bool equal(const Tensor& a, const Tensor& b);  // same shape and values
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

// ---- printing, exactly like PyTorch's repr ----
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string repr(const Tensor& t);
std::string size_str(const Shape& shape);  // torch.Size([2, 6, 3])

// ---- internals shared by the op files ----
namespace detail {
// "sum: expected a defined tensor, got an undefined one (a gradient that was never computed?)"
[[noreturn]] void fail_undefined(const char* op);
inline void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) fail_undefined(op);
}
// A new handle over t's storage with another shape/strides/offset (no autograd state).
Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset);
// The same, taking over shape and strides a view op has just computed (no copies).
Tensor make_view(const Tensor& t, Shape&& shape, Shape&& strides, int64_t offset);
// A new contiguous tensor whose buffer is not cleared first: only for an op that writes every
// element before it returns it (empty() is zeros, so no one ever reads memory nobody wrote).
Tensor empty_for_overwrite(const Shape& shape, DType dtype);
// Refuses in-place writes PyTorch refuses (incl. a destination with internal overlap, unless
// every element gets the same value); bumps the storage version.
void check_inplace(const Tensor& t, const char* op, bool allow_internal_overlap = false);
// A view taken before an in-place op recorded on its base (or on another view of the same
// storage) carries the base's old history: its gradient would be silently wrong. Ops recorded
// with grad mode on refuse such an input (PyTorch would regenerate its history; take the view
// again after the in-place op).
inline bool view_is_stale(const Tensor& t) {
  const TensorImpl* impl = t.impl();
  return impl->is_view && impl->storage->graph_write_version() > impl->view_graph_version;
}
[[noreturn]] void fail_stale_view(const Tensor& t, const char* op);
}  // namespace detail

template <typename T>
T* Tensor::data_ptr() const {
  const TensorImpl& impl = checked_impl("data_ptr");
  check(dtype_of<T>() == impl.dtype, "data_ptr: tensor has dtype ", dtype_name(impl.dtype),
        ", asked for ", dtype_name(dtype_of<T>()));
  return static_cast<T*>(impl.storage->data()) + impl.offset;
}

inline TensorImpl& Tensor::checked_impl(const char* op) const {
  if (impl_ == nullptr) [[unlikely]]
    detail::fail_undefined(op);
  return *impl_;
}

}  // namespace ember
