// Shape ops that build new tensors from pieces: cat, stack, index_select, gather; unsafe_view
// (matmul's result reshaped without being a view for autograd); split and chunk as narrow()
// views. The view ops themselves (view, reshape, narrow, ...) live in view.cpp.
#include "core/ops/shape.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/allocator.h"
#include "core/graph/function.h"
#include "core/graph/pass.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;

namespace {

// PyTorch's legacy rule: a 1-d tensor of shape [0] may be concatenated with anything, and is
// skipped.
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

DType common_dtype(const std::vector<Tensor>& tensors) {
  DType dtype = tensors.front().dtype();
  for (const Tensor& t : tensors) dtype = promote(dtype, t.dtype());
  return dtype;
}

// A window into `out` with `shape`, starting `start` steps along `dim`, with out's strides.
Tensor window(const Tensor& out, const Shape& shape, int64_t dim, int64_t start) {
  // For a non-empty out the offset fits; callers return early for an empty one.
  return detail::make_view(out, shape, out.strides(), out.offset() + start * out.stride(dim));
}

// ---- cat: y = [x_0, x_1, ...] joined along dim ----
struct Cat : OpFunction<Cat> {
  static constexpr const char* name = "CatBackward0";
  static constexpr const char* formula =
      "y = [x_0, x_1, ...] along dim:  dx_k = the slice of dy where x_k went";
  int64_t dim = 0;
  std::vector<int64_t> starts, lengths;  // where each input lies in y along dim (-1: skipped)

  Tensor forward(const std::vector<Tensor>& tensors, int64_t dim_arg) {
    check(!tensors.empty(), "cat: expected a non-empty list of tensors");
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      check(tensors[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i,
            ") cannot be concatenated");
    }
    // The first tensor that is not skipped fixes the rank and the other sizes.
    std::size_t ref = 0;
    while (ref + 1 < tensors.size() && skipped_by_cat(tensors[ref])) ++ref;
    const Shape& ref_shape = tensors[ref].shape();
    dim = wrap_dim(dim_arg, tensors[ref].dim(), "cat");

    Shape out_shape = ref_shape;
    out_shape[dim] = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      if (i != ref && skipped_by_cat(t)) {
        starts.push_back(-1);
        lengths.push_back(-1);
        continue;
      }
      check(t.dim() == tensors[ref].dim(), "cat: tensors must have the same number of ",
            "dimensions, got shapes ", ref_shape, " and ", t.shape(), " (tensor ", i, ")");
      for (int64_t d = 0; d < t.dim(); ++d) {
        check(d == dim || t.size(d) == ref_shape[d], "cat: shapes ", ref_shape, " and ", t.shape(),
              " must match except in dimension ", dim, " (tensor ", i, " differs in dimension ", d,
              ")");
      }
      starts.push_back(out_shape[dim]);
      lengths.push_back(t.size(dim));
      check(!__builtin_add_overflow(out_shape[dim], t.size(dim), &out_shape[dim]),
            "cat: the concatenated size in dimension ", dim, " overflows int64 (tensor ", i,
            " has shape ", t.shape(), ")");
    }

    Tensor out = empty(out_shape, common_dtype(tensors));
    // Nothing to copy (and an empty output's strides may be wrapped products of huge sizes).
    if (out.numel() == 0) return out;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (lengths[i] >= 0) window(out, tensors[i].shape(), dim, starts[i]).copy_(tensors[i]);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < starts.size(); ++i) {
      // dx_i = the slice of dy that x_i filled (a skipped [0] tensor gets an empty gradient)
      grads.push_back(lengths[i] < 0 ? zeros({0}, grad.dtype())
                                     : grad.narrow(dim, starts[i], lengths[i]));
    }
    return grads;
  }
};

// ---- stack: y.select(dim, i) = x_i ----
struct Stack : OpFunction<Stack> {
  static constexpr const char* name = "StackBackward0";
  static constexpr const char* formula = "y.select(dim, i) = x_i:  dx_i = dy.select(dim, i)";
  int64_t dim = 0;
  std::size_t count = 0;

  Tensor forward(const std::vector<Tensor>& tensors, int64_t dim_arg) {
    check(!tensors.empty(), "stack: expected a non-empty list of tensors");
    const Shape& shape = tensors.front().shape();
    for (std::size_t i = 1; i < tensors.size(); ++i) {
      check(tensors[i].shape() == shape, "stack: expects each tensor to be equal size, got ", shape,
            " at entry 0 and ", tensors[i].shape(), " at entry ", i);
    }
    dim = wrap_dim(dim_arg, static_cast<int64_t>(shape.size()) + 1, "stack");
    count = tensors.size();

    Shape out_shape = shape;
    out_shape.insert(out_shape.begin() + dim, static_cast<int64_t>(count));
    Tensor out = empty(out_shape, common_dtype(tensors));
    if (out.numel() == 0) return out;  // as in cat
    // Entry i is out.select(dim, i): out's strides without the stacking dim.
    Shape entry_strides = out.strides();
    entry_strides.erase(entry_strides.begin() + dim);
    for (std::size_t i = 0; i < count; ++i) {
      const int64_t offset = out.offset() + static_cast<int64_t>(i) * out.stride(dim);
      detail::make_view(out, shape, entry_strides, offset).copy_(tensors[i]);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < count; ++i) {
      grads.push_back(grad.select(dim, static_cast<int64_t>(i)));  // dx_i = dy.select(dim, i)
    }
    return grads;
  }
};

// ---- index_select ----

// A contiguous tensor seen as [outer, size, inner] around `dim`.
struct AroundDim {
  int64_t outer = 1, size = 1, inner = 1;
  AroundDim(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (d < dim) outer = mul_wrap(outer, shape[d]);  // empty tensors may have
      if (d > dim) inner = mul_wrap(inner, shape[d]);  // huge other dims
    }
    size = shape[dim];
  }
};

// The values of an int64 index tensor, each checked to lie in [0, size).
std::vector<int64_t> checked_indices(const char* op, const Tensor& index, int64_t dim,
                                     int64_t size) {
  check(index.dtype() == DType::Int64, op, ": expected an int64 index tensor, got ",
        dtype_name(index.dtype()));
  std::vector<int64_t> values = index.to_vector<int64_t>();
  for (int64_t v : values) {
    check(v >= 0 && v < size, op, ": index ", v, " is out of bounds for dimension ", dim,
          " with size ", size);
  }
  return values;
}

// y = x.index_select(dim, idx), i.e. y[.., i, ..] = x[.., idx[i], ..]
struct IndexSelect : OpFunction<IndexSelect> {
  static constexpr const char* name = "IndexSelectBackward0";
  static constexpr const char* formula =
      "y[.., i, ..] = x[.., idx[i], ..]:  dx[.., idx[i], ..] += dy[.., i, ..]";
  int64_t dim = 0;
  Shape input_shape;

  Tensor forward(const Tensor& x, int64_t dim_arg, const Tensor& index) {
    check(index.dim() <= 1, "index_select: index must be a 1-D tensor, got shape ", index.shape());
    input_shape = x.shape();
    if (x.dim() == 0) {
      // A 0-d tensor, as PyTorch's: dim 0 or -1 and an index of one element, 0; the result is
      // 0-d (torch.tensor(5.).index_select(0, torch.tensor([0])) is tensor(5.), its grad_fn
      // IndexSelectBackward0). PyTorch reads past the element for an empty index or repeats it
      // for [0, 0]: here both are Errors.
      (void)wrap_dim(dim_arg, 0, "index_select");
      check(index.numel() == 1, "index_select: a 0-d tensor takes an index of one element, got ",
            index.numel(), " (index shape ", index.shape(), ")");
      dim = 0;
      (void)checked_indices("index_select", index, 0, 1);
      save_for_backward({index});
      Tensor out = empty({}, x.dtype());
      dispatch(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        *out.data_ptr<T>() = *x.data_ptr<T>();
      });
      return out;
    }
    dim = wrap_dim(dim_arg, x.dim(), "index_select");
    const std::vector<int64_t> rows = checked_indices("index_select", index, dim, x.size(dim));
    save_for_backward({index});

    const Tensor source = x.contiguous();
    Shape out_shape = x.shape();
    out_shape[dim] = static_cast<int64_t>(rows.size());
    Tensor out = empty(out_shape, x.dtype());
    if (out.numel() == 0) return out;  // in.outer may be a huge dim of an empty x: no loop
    const AroundDim in(x.shape(), dim), picked(out_shape, dim);
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* from = source.data_ptr<T>();
      T* to = out.data_ptr<T>();
      for (int64_t o = 0; o < in.outer; ++o)
        for (int64_t i = 0; i < picked.size; ++i)
          std::copy_n(from + (o * in.size + rows[i]) * in.inner, in.inner,
                      to + (o * picked.size + i) * in.inner);
    });
    return out;
  }
  struct Twice {
    static constexpr const char* name = "IndexAddBackward0";
  };
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor index = saved(0);
    // Its own derivative (create_graph): the same selection of gg.
    auto adjoint = [d = dim, index](const Tensor& gg) { return index_select(gg, d, index); };
    return {autograd::linear_in_grad<Twice>(
                grad, [&](const Tensor& g) { return index_add_into_zeros(g, index); }, adjoint),
            Tensor()};
  }
  Tensor index_add_into_zeros(const Tensor& grad, const Tensor& index) const {
    // dx = zeros, then dx[.., idx[i], ..] += dy[.., i, ..]  (a repeated index adds up)
    const std::vector<int64_t> rows = index.to_vector<int64_t>();
    const Tensor dy = grad.contiguous();
    Tensor dx = zeros(input_shape, grad.dtype());
    if (dy.numel() == 0) return dx;
    if (input_shape.empty()) {  // a 0-d x: its one element picked once
      dispatch_floating(grad.dtype(), [&](auto tag) {
        using T = decltype(tag);
        *dx.data_ptr<T>() = *dy.data_ptr<T>();
      });
      return dx;
    }
    const AroundDim in(input_shape, dim), picked(dy.shape(), dim);
    dispatch_floating(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* from = dy.data_ptr<T>();
      T* to = dx.data_ptr<T>();
      for (int64_t o = 0; o < in.outer; ++o)
        for (int64_t i = 0; i < picked.size; ++i) {
          const T* g = from + (o * picked.size + i) * in.inner;
          T* d = to + (o * in.size + rows[i]) * in.inner;
          for (int64_t j = 0; j < in.inner; ++j) d[j] += g[j];
        }
    });
    return dx;
  }
};

// ---- gather ----

// For every element of `index` (row-major order n), calls fn(n, offset) where offset is the
// position, in a tensor with `strides`, of the element it picks: its own position with the
// coordinate along `dim` replaced by the index value.
template <typename Fn>
void for_each_gathered(const Shape& index_shape, const std::vector<int64_t>& values,
                       const Shape& strides, int64_t dim, Fn&& fn) {
  const int64_t ndim = static_cast<int64_t>(index_shape.size());
  std::vector<int64_t> position(ndim, 0);
  for (std::size_t n = 0; n < values.size(); ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < ndim; ++d) offset += (d == dim ? values[n] : position[d]) * strides[d];
    fn(n, offset);
    for (int64_t d = ndim - 1; d >= 0; --d) {  // next position, odometer style
      if (++position[d] < index_shape[d]) break;
      position[d] = 0;
    }
  }
}

// y = x.gather(dim, idx), e.g. for dim 1: y[i][j] = x[i][idx[i][j]]
struct Gather : OpFunction<Gather> {
  static constexpr const char* name = "GatherBackward0";
  static constexpr const char* formula = "y[i][j] = x[i][idx[i][j]]:  dx[i][idx[i][j]] += dy[i][j]";
  int64_t dim = 0;
  Shape input_shape;

  Tensor forward(const Tensor& x, int64_t dim_arg, const Tensor& index) {
    check(index.dim() == x.dim(), "gather: index ", index.shape(),
          " must have the same number of dimensions as input ", x.shape());
    dim = wrap_dim(dim_arg, x.dim(), "gather");
    for (int64_t d = 0; d < x.dim(); ++d) {
      check(d == dim || index.size(d) <= x.size(d), "gather: index ", index.shape(),
            " must not be larger than input ", x.shape(), " apart from dimension ", dim);
    }
    input_shape = x.shape();
    const int64_t size = x.dim() == 0 ? 1 : x.size(dim);
    const std::vector<int64_t> values = checked_indices("gather", index, dim, size);
    save_for_backward({index});

    Tensor out = empty(index.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* from = x.data_ptr<T>();
      T* to = out.data_ptr<T>();
      for_each_gathered(index.shape(), values, x.strides(), dim,
                        [&](std::size_t n, int64_t offset) { to[n] = from[offset]; });
    });
    return out;
  }
  struct Twice {
    static constexpr const char* name = "ScatterAddBackward0";
  };
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor index = saved(0);
    // Its own derivative (create_graph): the same gather of gg.
    auto adjoint = [d = dim, index](const Tensor& gg) { return gather(gg, d, index); };
    return {autograd::linear_in_grad<Twice>(
                grad, [&](const Tensor& g) { return scatter_add_into_zeros(g, index); }, adjoint),
            Tensor()};
  }
  Tensor scatter_add_into_zeros(const Tensor& grad, const Tensor& index) const {
    // dx = zeros, then dx[i][idx[i][j]] += dy[i][j]  (scatter_add; a repeated index adds up)
    const std::vector<int64_t> values = index.to_vector<int64_t>();
    const Tensor dy = grad.contiguous();
    Tensor dx = zeros(input_shape, grad.dtype());
    dispatch_floating(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* from = dy.data_ptr<T>();
      T* to = dx.data_ptr<T>();
      for_each_gathered(index.shape(), values, dx.strides(), dim,
                        [&](std::size_t n, int64_t offset) { to[offset] += from[n]; });
    });
    return dx;
  }
};

// ---- unsafe_view: y = x seen with another shape, a fresh tensor for autograd ----
//
// PyTorch's _unsafe_view: same storage as x when x is contiguous, but not flagged as a view,
// so in-place ops on y (e.g. on matmul's result) are allowed.
struct UnsafeView : OpFunction<UnsafeView> {
  static constexpr const char* name = "UnsafeViewBackward0";
  static constexpr const char* formula = "y = x seen with another shape:  dx = dy reshaped back";
  Shape input_shape;

  Tensor forward(const Tensor& x, const Shape& shape) {
    input_shape = x.shape();
    Shape target = infer_size(shape, x.numel());
    const Tensor source = x.contiguous();  // a copy only when x is not contiguous
    Shape strides = contiguous_strides(target);
    return detail::make_view(source, std::move(target), std::move(strides), source.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad.reshape(input_shape)};  // dx = dy reshaped back
  }

  // `shape` with one -1 replaced by what makes it hold `numel` elements.
  static Shape infer_size(const Shape& shape, int64_t numel) {
    Shape out = shape;
    int64_t known = 1;
    auto inferred = out.end();
    for (auto it = out.begin(); it != out.end(); ++it) {
      if (*it == -1 && inferred == out.end()) {
        inferred = it;
      } else {
        check(*it >= 0, "unsafe_view: invalid shape ", shape);
        known = mul_wrap(known, *it);
      }
    }
    if (inferred != out.end() && known != 0) *inferred = numel / known;
    check(inferred == out.end() || known != 0, "unsafe_view: shape ", shape,
          " is ambiguous for input of size ", numel);
    check(numel_of(out) == numel, "unsafe_view: shape ", shape, " is invalid for input of size ",
          numel);
    return out;
  }
};

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { return apply<Cat>(tensors, dim); }

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) { return apply<Stack>(tensors, dim); }

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  detail::check_defined(t, "index_select");
  detail::check_defined(index, "index_select");
  return apply<IndexSelect>(t, dim, index);
}

Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  return apply<Gather>(t, dim, index);
}

Tensor unsafe_view(const Tensor& t, const Shape& shape) { return apply<UnsafeView>(t, shape); }

// ---- split and chunk: narrow() views ----

namespace {

constexpr const char* kSplitFormula =
    "y_k = x[k*s : (k+1)*s] along dim:  dx = cat(dy_k) (zeros for a piece without a gradient)";

// split's backward for all the pieces at once, as PyTorch's SplitBackward0: dx is the pieces'
// gradients side by side, one cat, linear in the size of x. (A SliceBackward0 per piece would
// make a gradient of x's full size for each piece, and the engine would add them all up:
// quadratic in the number of pieces.)
// The engine gives a node one gradient, so each piece has a node of its own (an OutputNode,
// core/graph/pass.h) that hands its gradient over here; the engine runs this node once, after
// every piece the pass reached has delivered (as a custom Function of several outputs).
class SplitNode : public autograd::Node {
 public:
  SplitNode(int64_t dim, std::vector<Shape> piece_shapes, const Tensor& x)
      : dim_(dim),
        piece_shapes_(std::move(piece_shapes)),
        input_shape_(x.shape()),
        dtype_(x.dtype()),
        delivered_(piece_shapes_.size()) {}
  std::string name() const override { return "SplitBackward0"; }
  const char* formula() const override { return kSplitFormula; }

  // Each piece's gradient in this pass, delivered by the piece's node.
  autograd::PassDeliveries* deliveries() { return &delivered_; }

  std::vector<Tensor> apply(const Tensor& /*tokens*/) override {
    std::vector<Tensor> grads = delivered_.take();
    // (An empty x: its pieces may be 1-d [0] tensors, which cat skips.)
    if (numel_of(input_shape_) == 0) return {zeros(input_shape_, dtype_)};
    for (std::size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) grads[k] = zeros(piece_shapes_[k], dtype_);
    }
    return {cat(grads, dim_)};
  }

 private:
  int64_t dim_;
  std::vector<Shape> piece_shapes_;
  Shape input_shape_;
  DType dtype_;
  autograd::PassDeliveries delivered_;
};

// Makes `pieces` (views of x taken without recording) the outputs of one SplitNode. A 0-d
// `anchor` carries the node while the pieces' nodes are wired to it.
void record_split(const Tensor& x, int64_t dim, std::vector<Tensor>& pieces) {
  std::vector<Shape> shapes;
  shapes.reserve(pieces.size());
  for (const Tensor& piece : pieces) shapes.push_back(piece.shape());
  auto split = std::make_shared<SplitNode>(dim, std::move(shapes), x);
  Tensor anchor = zeros({}, x.dtype());
  autograd::detail::connect(split, {x}, anchor);
  const bool anomaly = autograd::is_recording(autograd::Recorder::Anomaly);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    // As a view made with grad mode on (the views were taken under NoGradGuard).
    pieces[k].impl()->no_grad_view_of_grad = x.impl()->no_grad_view_of_grad;
    auto node =
        std::make_shared<autograd::OutputNode>(split.get(), split->deliveries(), k, kSplitFormula);
    autograd::detail::connect(node, {anchor}, pieces[k]);
    if (autograd::KeepValuesGuard::is_enabled()) node->kept_value = pieces[k].detach();
    if (anomaly) node->forward_context = autograd::capture_forward_context();
  }
  if (anomaly) split->forward_context = autograd::capture_forward_context();
}

// Room for `pieces` views, or an Error: an empty tensor may have a dim of 2^62, and splitting it
// (or chunking an empty dim into `chunks` pieces) asks for more pieces than memory can list
// (PyTorch fails the same way, with bad_alloc). Each view costs a handle and a TensorImpl; a count
// whose views would not fit in the machine's physical memory is refused before anything is
// allocated (relying on bad_alloc alone does not work: with overcommit a large reserve succeeds
// and making the views then exhausts memory, and AddressSanitizer's operator new aborts).
std::vector<Tensor> room_for(int64_t pieces, const char* op, const Shape& shape) {
  const double physical = detail::physical_memory_bytes();
  const double per_view = static_cast<double>(sizeof(Tensor) + sizeof(TensorImpl));
  check(static_cast<double>(pieces) * per_view <= physical, op, ": cannot hold ", pieces,
        " pieces of a tensor of shape ", shape, " (their views would take more than the ",
        static_cast<int64_t>(physical / (1 << 20)), " MiB of memory this machine has)");
  std::vector<Tensor> out;
  try {
    out.reserve(static_cast<std::size_t>(pieces));
  } catch (const std::exception&) {  // std::length_error or std::bad_alloc
    fail(op, ": cannot hold ", pieces, " pieces of a tensor of shape ", shape,
         " (not enough memory)");
  }
  return out;
}
}  // namespace

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  detail::check_defined(*this, "split");
  check(this->dim() > 0, "split: expected a tensor with at least 1 dimension, got shape ", shape());
  const int64_t d = wrap_dim(dim, this->dim(), "split");
  const int64_t size = shape()[d];
  check(split_size >= 0, "split: split_size must be non-negative, got ", split_size);
  check(split_size > 0 || size == 0,
        "split: split_size can only be 0 if dimension size is 0, but got dimension size of ", size);
  // Pieces of split_size, the last one smaller; one (empty) piece for an empty dimension.
  const int64_t pieces =
      split_size == 0 ? 1 : std::max<int64_t>(size / split_size + (size % split_size != 0), 1);
  std::vector<Tensor> out = room_for(pieces, "split", shape());
  // Recorded as one SplitBackward0 for all the pieces, not a SliceBackward0 for each.
  const bool record = GradMode::is_enabled() && requires_grad();
  if (record && detail::view_is_stale(*this)) detail::fail_stale_view(*this, "split");
  {
    std::optional<NoGradGuard> no_grad;
    if (record) no_grad.emplace();
    for (int64_t i = 0; i < pieces; ++i) {
      const int64_t start = i * split_size;
      out.push_back(narrow(d, start, std::min(split_size, size - start)));
    }
  }
  if (record) record_split(*this, d, out);
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  detail::check_defined(*this, "chunk");
  check(this->dim() > 0, "chunk: expected a tensor with at least 1 dimension, got shape ", shape());
  check(chunks > 0, "chunk: number of chunks must be greater than 0, got ", chunks);
  const int64_t d = wrap_dim(dim, this->dim(), "chunk");
  const int64_t size = shape()[d];
  if (size == 0) {  // as PyTorch: `chunks` empty pieces
    std::vector<Tensor> out = room_for(chunks, "chunk", shape());
    for (int64_t i = 0; i < chunks; ++i) out.push_back(narrow(d, 0, 0));
    return out;
  }
  return split(size / chunks + (size % chunks != 0), d);
}

}  // namespace ember
