// Copies and conversions: to, clone, contiguous, copy_, and triu / tril (a copy with a triangle
// zeroed). Each op's forward and backward side by side, as in the other files of core/ops/.
#include <cmath>

#include "core/base/convert.h"
#include "core/graph/function.h"
#include "core/kernels/iterate.h"
#include "core/tensor/overlap.h"
#include "core/tensor/tensor.h"

namespace ember {

using detail::convert_element;

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
struct ToCopy : autograd::OpFunction<ToCopy> {
  static constexpr const char* name = "ToCopyBackward0";
  static constexpr const char* formula = "y = x in another dtype:  dx = dy converted back";
  DType input_dtype;
  Tensor forward(const Tensor& x, DType dtype) {
    input_dtype = x.dtype();
    return copy_to_contiguous(x, dtype);
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.to(input_dtype)}; }
};

struct Clone : autograd::OpFunction<Clone> {
  static constexpr const char* name = "CloneBackward0";
  static constexpr const char* formula = "y = x (a copy):  dx = dy";
  Tensor forward(const Tensor& x) { return copy_to_contiguous(x, x.dtype()); }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad}; }
};

// self.copy_(src) inside the graph (PyTorch's CopyBackwards): self's old values are
// overwritten, so its old history gets a zero gradient; src gets the gradient, summed back over
// the dims it was broadcast along (by the engine) and converted to its dtype.
struct CopyBackwards : autograd::OpFunction<CopyBackwards> {
  static constexpr const char* name = "CopyBackwards";
  static constexpr bool has_constant_gradients = true;  // self's zero gradient
  static constexpr const char* formula = "self.copy_(src):  dself = 0, dsrc = dy";
  Tensor forward(const Tensor& self, const Tensor& src) {
    return copy_to_contiguous(src.expand(self.shape()), self.dtype());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {zeros_like(grad), grad}; }
};
}  // namespace

Tensor Tensor::to(DType target) const {
  detail::check_defined(*this, "to");
  OpScope scope("to");
  if (target == dtype()) return *this;
  if (!is_floating(target) && requires_grad()) {
    NoGradGuard no_grad;  // integer and bool tensors carry no gradient
    return copy_to_contiguous(*this, target);
  }
  return autograd::apply<ToCopy>(*this, target);
}

Tensor Tensor::contiguous() const {
  detail::check_defined(*this, "contiguous");
  OpScope scope("contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  detail::check_defined(*this, "clone");
  return autograd::apply<Clone>(*this);
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_defined(src, "copy_");
  OpScope scope("copy_");
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
    storage()->mark_graph_write();  // earlier views of this tensor keep the old history
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
struct Triangle : autograd::OpFunction<Triangle<Upper>> {
  static constexpr const char* name = Upper ? "TriuBackward0" : "TrilBackward0";
  static constexpr const char* formula =
      Upper ? "y = x with entries below the diagonal zeroed:  dx = dy with them zeroed"
            : "y = x with entries above the diagonal zeroed:  dx = dy with them zeroed";
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

}  // namespace ember
