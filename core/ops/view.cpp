// View ops: new shapes and strides over the same storage, no copy. Each is differentiable;
// its backward maps the gradient of the view back to the shape of its input.
#include <algorithm>
#include <numeric>

#include "core/graph/function.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;

namespace {

// offset + index * stride for a view. For a non-empty tensor it fits (it addresses the
// storage); an empty tensor's strides may be wrapped products of huge sizes ([0, 2^62, 4]), so
// this wraps too (defined behaviour), and a view of an empty tensor never addresses memory.
int64_t view_offset(int64_t offset, int64_t index, int64_t stride) {
  int64_t r;
  __builtin_add_overflow(offset, mul_wrap(index, stride), &r);
  return r;
}

// A view of x flagged as such: an in-place write to it would also change x.
// (shape and strides by value: the callers' freshly computed ones are moved in, not copied.)
Tensor make_tracked_view(const Tensor& x, Shape shape, Shape strides, int64_t offset) {
  Tensor v = detail::make_view(x, std::move(shape), std::move(strides), offset);
  TensorImpl* impl = v.impl();
  impl->is_view = true;
  // A view of a view keeps the history's version of the first view (if that one is stale, so
  // is this one); a view of a base takes the storage's now.
  impl->view_graph_version =
      x.impl()->is_view ? x.impl()->view_graph_version : x.storage()->graph_write_version();
  impl->no_grad_view_of_grad =
      x.impl()->no_grad_view_of_grad || (!GradMode::is_enabled() && x.requires_grad());
  return v;
}

// Replaces one -1 in `shape` by what makes the element count equal `numel`.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      check(infer_at < 0, op, ": only one dimension can be inferred, got shape ", shape);
      infer_at = static_cast<int64_t>(i);
    } else {
      check(shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in ", shape);
      if (__builtin_mul_overflow(known, shape[i], &known)) {
        fail(op, ": shape '", shape, "' is invalid for input of size ", numel);
      }
    }
  }
  if (infer_at >= 0) {
    check(known != 0 && numel % known == 0, op, ": shape '", shape,
          "' is invalid for input of size ", numel);
    out[infer_at] = numel / known;
  }
  check(numel_of(out) == numel, op, ": shape '", shape, "' is invalid for input of size ", numel);
  return out;
}

// Strides that let `new_shape` read the same elements as (old_shape, old_strides) in row-major
// order, or nothing when a new dimension would span two non-mergeable old ones (PyTorch's
// computeStride): old dims are grouped into chunks that are contiguous with each other, and each
// chunk must be split exactly by the new dims.
std::optional<Shape> view_strides(const Shape& old_shape_in, const Shape& old_strides_in,
                                  const Shape& new_shape) {
  if (numel_of(old_shape_in) == 0) return contiguous_strides(new_shape);
  // A 0-d tensor reads as [1] with stride 1 (only then are the inputs copied).
  static const Shape kOne = {1};
  const Shape& old_shape = old_shape_in.empty() ? kOne : old_shape_in;
  const Shape& old_strides = old_shape_in.empty() ? kOne : old_strides_in;
  Shape new_strides(new_shape.size(), 0);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel = mul_wrap(tensor_numel, old_shape[d]);  // wraps only for empty tensors
    bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 &&
                                 old_strides[d - 1] != mul_wrap(tensor_numel, chunk_base_stride));
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = mul_wrap(view_numel, chunk_base_stride);
      view_numel = mul_wrap(view_numel, new_shape[view_d]);
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// y = x seen with another shape:  dx = dy reshaped back
struct View : OpFunction<View> {
  static constexpr const char* name = "ViewBackward0";
  static constexpr const char* formula = "y = x seen with another shape:  dx = dy reshaped back";
  Shape input_shape;
  Tensor forward(const Tensor& x, const Shape& shape) {
    input_shape = x.shape();
    Shape target = infer_shape(shape, x.numel(), "view");
    auto strides = view_strides(x.shape(), x.strides(), target);
    check(strides.has_value(),
          "view: size is not compatible with input tensor's size and stride "
          "(at least one dimension spans across two contiguous subspaces); input shape ",
          x.shape(), ", strides ", x.strides(), ", requested shape ", shape,
          ". Use .reshape(...) instead.");
    return make_tracked_view(x, std::move(target), std::move(*strides), x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.reshape(input_shape)}; }
};

// y = x with dims d0 and d1 swapped:  dx = dy with them swapped back
struct Transpose : OpFunction<Transpose> {
  static constexpr const char* name = "TransposeBackward0";
  static constexpr const char* formula =
      "y = x with dims d0, d1 swapped:  dx = dy with them swapped back";
  int64_t dim0 = 0, dim1 = 0;
  Tensor forward(const Tensor& x, int64_t d0, int64_t d1) {
    dim0 = wrap_dim(d0, x.dim(), "transpose");
    dim1 = wrap_dim(d1, x.dim(), "transpose");
    Shape shape = x.shape(), strides = x.strides();
    if (x.dim() > 0) {
      std::swap(shape[dim0], shape[dim1]);
      std::swap(strides[dim0], strides[dim1]);
    }
    return make_tracked_view(x, std::move(shape), std::move(strides), x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.transpose(dim0, dim1)}; }
};

// 2-d transpose (x.t()).
struct T2 : OpFunction<T2> {
  static constexpr const char* name = "TBackward0";
  static constexpr const char* formula = "y = x^T:  dx = dy^T";
  Tensor forward(const Tensor& x) {
    check(x.dim() <= 2, "t: expects a tensor with <= 2 dimensions, but got shape ", x.shape());
    if (x.dim() < 2) return make_tracked_view(x, x.shape(), x.strides(), x.offset());
    return make_tracked_view(x, {x.shape()[1], x.shape()[0]}, {x.strides()[1], x.strides()[0]},
                             x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.t()}; }
};

// y = x with dims reordered:  dx = dy with the inverse order
struct Permute : OpFunction<Permute> {
  static constexpr const char* name = "PermuteBackward0";
  static constexpr const char* formula =
      "y = x with dims reordered:  dx = dy with the inverse order";
  std::vector<int64_t> inverse;
  Tensor forward(const Tensor& x, const std::vector<int64_t>& dims) {
    check(static_cast<int64_t>(dims.size()) == x.dim(),
          "permute: number of dims don't match: ", "got ", dims.size(),
          " dims for a tensor of shape ", x.shape());
    Shape shape(dims.size()), strides(dims.size());
    inverse.assign(dims.size(), -1);
    for (std::size_t i = 0; i < dims.size(); ++i) {
      int64_t d = wrap_dim(dims[i], x.dim(), "permute");
      check(inverse[d] < 0, "permute: repeated dim ", dims[i], " in ", dims);
      inverse[d] = static_cast<int64_t>(i);
      shape[i] = x.shape()[d];
      strides[i] = x.strides()[d];
    }
    return make_tracked_view(x, std::move(shape), std::move(strides), x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.permute(inverse)}; }
};

// y = x with a size-1 dim inserted:  dx = dy with it removed
struct Unsqueeze : OpFunction<Unsqueeze> {
  static constexpr const char* name = "UnsqueezeBackward0";
  static constexpr const char* formula =
      "y = x with a size-1 dim inserted:  dx = dy with it removed";
  int64_t dim = 0;
  Tensor forward(const Tensor& x, int64_t d) {
    dim = wrap_dim(d, x.dim() + 1, "unsqueeze");
    Shape shape = x.shape(), strides = x.strides();
    int64_t stride = dim < x.dim() ? mul_wrap(x.strides()[dim], x.shape()[dim]) : 1;
    shape.insert(shape.begin() + dim, 1);
    strides.insert(strides.begin() + dim, stride);
    return make_tracked_view(x, std::move(shape), std::move(strides), x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.squeeze(dim)}; }
};

// y = x without size-1 dims (all, or one):  dx = dy reshaped back
struct Squeeze : OpFunction<Squeeze> {
  static constexpr const char* name = "SqueezeBackward0";
  static constexpr const char* formula = "y = x without size-1 dims:  dx = dy reshaped back";
  Shape input_shape;
  Tensor forward(const Tensor& x, std::optional<int64_t> only_dim) {
    input_shape = x.shape();
    std::optional<int64_t> d;
    if (only_dim) d = wrap_dim(*only_dim, x.dim(), "squeeze");
    Shape shape, strides;
    for (int64_t i = 0; i < x.dim(); ++i) {
      bool drop = x.shape()[i] == 1 && (!d || *d == i);
      if (!drop) {
        shape.push_back(x.shape()[i]);
        strides.push_back(x.strides()[i]);
      }
    }
    return make_tracked_view(x, std::move(shape), std::move(strides), x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad.reshape(input_shape)}; }
};
struct SqueezeDim : Squeeze {
  static constexpr const char* name = "SqueezeBackward1";
  static constexpr const char* formula = "y = x without a size-1 dim:  dx = dy reshaped back";
};

// y = x repeated along size-1 (or new leading) dims with stride 0:  dx = dy summed back
struct Expand : OpFunction<Expand> {
  static constexpr const char* name = "ExpandBackward0";
  static constexpr const char* formula =
      "y = x repeated along broadcast dims:  dx = dy summed back";
  Shape input_shape;
  Tensor forward(const Tensor& x, const Shape& shape) {
    input_shape = x.shape();
    check(shape.size() >= x.shape().size(), "expand: the number of sizes provided (", shape.size(),
          ") must be greater or equal to the number of dimensions in the tensor (", x.dim(),
          "); shape ", x.shape(), " to ", shape);
    Shape target = shape;
    const std::size_t lead = shape.size() - x.shape().size();
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i >= lead && shape[i] == -1) target[i] = x.shape()[i - lead];
      check(target[i] >= 0, "expand: the expanded size ", shape[i],
            " is invalid: sizes must be non-negative (or -1 to keep a dim); target sizes: ", shape,
            ", tensor sizes: ", x.shape());
      if (i >= lead) {
        int64_t have = x.shape()[i - lead];
        check(have == target[i] || have == 1, "expand: the expanded size of the tensor (",
              target[i], ") must match the existing size (", have, ") at non-singleton dimension ",
              i, ". Target sizes: ", shape, ". Tensor sizes: ", x.shape());
      } else {
        check(target[i] >= 0, "expand: the expanded size ", target[i],
              " is not allowed in a leading, non-existing dimension ", i);
      }
    }
    return make_tracked_view(x, target, broadcast_strides(x.shape(), x.strides(), target),
                             x.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {sum_to(grad, input_shape, name)}; }
};

// The gradient of a view that picks part of x: zeros of x's shape with dy written into the part.
Tensor scatter_into_zeros(const Tensor& grad, const Shape& input_shape,
                          const std::function<Tensor(const Tensor&)>& pick) {
  Tensor dx = zeros(input_shape, grad.dtype());
  pick(dx).copy_(grad);
  return dx;
}

// y = x[..., i, ...] along dim:  dx = zeros with dy at index i
struct Select : OpFunction<Select> {
  static constexpr const char* name = "SelectBackward0";
  static constexpr const char* formula = "y = x[..., i, ...]:  dx = zeros with dy at index i";
  Shape input_shape;
  int64_t dim = 0, index = 0;
  Tensor forward(const Tensor& x, int64_t d, int64_t i) {
    check(x.dim() > 0, "select: cannot be applied to a 0-dim tensor");
    input_shape = x.shape();
    dim = wrap_dim(d, x.dim(), "select");
    const int64_t size = x.shape()[dim];
    check(i >= -size && i < size, "select: index ", i, " is out of range for dimension ", dim,
          " with size ", size, " (shape ", x.shape(), ")");
    index = i < 0 ? i + size : i;
    Shape shape = x.shape(), strides = x.strides();
    int64_t offset = view_offset(x.offset(), index, x.strides()[dim]);
    shape.erase(shape.begin() + dim);
    strides.erase(strides.begin() + dim);
    return make_tracked_view(x, std::move(shape), std::move(strides), offset);
  }
  struct Twice {
    static constexpr const char* name = "SelectBackwardBackward0";
  };
  std::vector<Tensor> backward(const Tensor& grad) {
    auto pick = [d = dim, i = index](const Tensor& t) { return t.select(d, i); };
    return {autograd::linear_in_grad<Twice>(
        grad, [&](const Tensor& g) { return scatter_into_zeros(g, input_shape, pick); }, pick)};
  }
};

// y = x[start:end:step] along dim:  dx = zeros with dy in that slice
struct SliceOp : OpFunction<SliceOp> {
  static constexpr const char* name = "SliceBackward0";
  static constexpr const char* formula = "y = x[start:end:step]:  dx = zeros with dy in that slice";
  Shape input_shape;
  int64_t dim = 0, start = 0, end = 0, step = 1;
  Tensor forward(const Tensor& x, int64_t d, std::optional<int64_t> start_,
                 std::optional<int64_t> end_, int64_t step_) {
    check(x.dim() > 0, "slice: cannot be applied to a 0-dim tensor");
    check(step_ > 0, "slice: step must be greater than zero, got ", step_);
    input_shape = x.shape();
    dim = wrap_dim(d, x.dim(), "slice");
    const int64_t size = x.shape()[dim];
    // Python's clamping: negative bounds count from the end, out-of-range bounds are clipped.
    auto clamp = [size](int64_t v) {
      if (v < 0) v += size;
      return std::clamp<int64_t>(v, 0, size);
    };
    start = start_ ? clamp(*start_) : 0;
    end = end_ ? clamp(*end_) : size;
    if (end < start) end = start;
    step = step_;
    Shape shape = x.shape(), strides = x.strides();
    shape[dim] = (end - start) / step + ((end - start) % step != 0);  // no overflow for any step
    // With two or more elements, step < size and the product fits (for an empty tensor it may
    // wrap); with fewer it is unused.
    if (shape[dim] > 1) strides[dim] = mul_wrap(strides[dim], step);
    const int64_t offset = view_offset(x.offset(), start, x.strides()[dim]);
    return make_tracked_view(x, std::move(shape), std::move(strides), offset);
  }
  struct Twice {
    static constexpr const char* name = "SliceBackwardBackward0";
  };
  std::vector<Tensor> backward(const Tensor& grad) {
    auto pick = [d = dim, a = start, b = end, s = step](const Tensor& t) {
      return t.slice(d, a, b, s);
    };
    return {autograd::linear_in_grad<Twice>(
        grad, [&](const Tensor& g) { return scatter_into_zeros(g, input_shape, pick); }, pick)};
  }
};

}  // namespace

Tensor Tensor::view(const Shape& shape) const { return apply<View>(*this, shape); }

Tensor Tensor::reshape(const Shape& shape) const {
  detail::check_defined(*this, "reshape");
  OpScope scope("reshape");
  Shape target = infer_shape(shape, numel(), "reshape");
  // A contiguous tensor can always be viewed (checked first: view_strides builds a Shape).
  if (is_contiguous() || view_strides(this->shape(), strides(), target)) return view(target);
  // Not expressible as a view: copy, then view the copy (PyTorch: _unsafe_view of a clone).
  return unsafe_view(clone(), target);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  return apply<Transpose>(*this, dim0, dim1);
}
Tensor Tensor::t() const { return apply<T2>(*this); }
Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return apply<Permute>(*this, dims);
}
Tensor Tensor::unsqueeze(int64_t dim) const { return apply<Unsqueeze>(*this, dim); }
Tensor Tensor::squeeze() const { return apply<Squeeze>(*this, std::optional<int64_t>()); }
Tensor Tensor::squeeze(int64_t dim) const {
  return apply<SqueezeDim>(*this, std::optional<int64_t>(dim));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  detail::check_defined(*this, "flatten");
  OpScope scope("flatten");
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  check(s <= e, "flatten: start_dim (", start_dim, ") cannot come after end_dim (", end_dim, ")");
  if (s == e) return *this;
  Shape shape(this->shape().begin(), this->shape().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged = checked_mul(merged, this->shape()[d], "flatten");
  shape.push_back(merged);
  shape.insert(shape.end(), this->shape().begin() + e + 1, this->shape().end());
  return reshape(shape);
}

Tensor Tensor::expand(const Shape& shape) const {
  detail::check_defined(*this, "expand");
  if (shape == this->shape()) return *this;
  return apply<Expand>(*this, shape);
}

Tensor Tensor::expand_as(const Tensor& other) const {
  detail::check_defined(*this, "expand_as");
  detail::check_defined(other, "expand_as");
  return expand(other.shape());
}

Tensor Tensor::select(int64_t dim, int64_t index) const { return apply<Select>(*this, dim, index); }

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  return apply<SliceOp>(*this, dim, start, end, step);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  detail::check_defined(*this, "narrow");
  check(this->dim() > 0, "narrow: narrow() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, this->dim(), "narrow");
  int64_t size = shape()[d];
  check(start >= -size && start <= size, "narrow: start out of range (expected to be in range of [",
        -size, ", ", size, "], but got ", start, ")");
  if (start < 0) start += size;
  check(length >= 0 && length <= size - start, "narrow: start (", start, ") + length (", length,
        ") exceeds dimension size (", size, ") of shape ", shape());
  return slice(d, start, start + length, 1);
}

Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  detail::check_defined(*this, "index");
  check(static_cast<int64_t>(indices.size()) <= dim(),
        "index: too many indices for tensor of dimension ", dim(), " (got ", indices.size(),
        " indices for shape ", shape(), ")");
  Tensor out = *this;
  int64_t d = 0;  // the dim of `out` the next index applies to
  for (const TensorIndex& idx : indices) {
    if (std::holds_alternative<int64_t>(idx)) {
      out = out.select(d, std::get<int64_t>(idx));  // drops the dim
    } else {
      const Slice& s = std::get<Slice>(idx);
      out = out.slice(d, s.start, s.stop, s.step);
      ++d;
    }
  }
  return out;
}

}  // namespace ember
