// Selections: where, masked_fill, maximum and minimum, clamp, and the comparisons (eq, ne, lt,
// le, gt, ge). Each op is a struct with its forward and backward side by side; the gradient of a
// selection goes to whichever input was selected.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/base/convert.h"
#include "core/graph/function.h"
#include "core/kernels/iterate.h"
#include "core/ops/elementwise.h"
#include "core/ops/elementwise_loops.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;
using detail::binary_kernel;
using detail::binary_loops;
using detail::result_type;
using detail::unary_kernel;
using detail::wrap_scalar;

namespace {

// out = condition ? a : b over the broadcast shape: the loop of where and masked_fill.
Tensor where_kernel(const Tensor& condition, const Tensor& a, const Tensor& b, const char* op) {
  check(condition.dtype() == DType::Bool, op, ": condition must be a bool tensor, got ",
        dtype_name(condition.dtype()));
  DType d = result_type(a, b);
  Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), op), b.shape(), op);
  Tensor c = condition.expand(shape), x = a.to(d).expand(shape), y = b.to(d).expand(shape);
  Tensor out = empty(shape, d);
  dispatch(d, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_ptr<T>();
    const bool* cp = c.data_ptr<bool>();
    const T* xp = x.data_ptr<T>();
    const T* yp = y.data_ptr<T>();
    Shape os = contiguous_strides(shape);
    kernels::for_each_row<4>(shape, {&os, &c.strides(), &x.strides(), &y.strides()},
                             [&](auto off, int64_t n, auto step) {
                               for (int64_t i = 0; i < n; ++i) {
                                 o[off[0] + i * step[0]] = cp[off[1] + i * step[1]]
                                                               ? xp[off[2] + i * step[2]]
                                                               : yp[off[3] + i * step[3]];
                               }
                             });
  });
  return out;
}

// out = c ? a : b:  d/da = c, d/db = !c  (the condition gets no gradient)
struct Where : OpFunction<Where> {
  static constexpr const char* name = "WhereBackward0";
  static constexpr const char* formula = "out = c ? a : b:  d/da = c, d/db = !c";
  Tensor forward(const Tensor& condition, const Tensor& a, const Tensor& b) {
    save_for_backward({condition});
    return where_kernel(condition, a, b, "where");
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor c = saved(0), zero = zeros({}, grad.dtype());
    return {Tensor(), where(c, grad, zero), where(c, zero, grad)};
  }
  // The same selections by the kernel, with no op recorded.
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    const Tensor c = saved(0), zero = zeros({}, grad.dtype());
    return {Tensor(), where_kernel(c, grad, zero, "where"), where_kernel(c, zero, grad, "where")};
  }
};

void check_mask(const Tensor& t, const Tensor& mask, const char* op) {
  check(mask.dtype() == DType::Bool, op, ": only supports boolean masks, but got mask with dtype ",
        dtype_name(mask.dtype()));
  Shape target = broadcast_shapes(t.shape(), mask.shape(), op);
  check(target == t.shape(), op, ": mask of shape ", mask.shape(),
        " cannot be broadcast to the tensor's shape ", t.shape());
}

// y = x where !mask, value where mask:  dy/dx = !mask
struct MaskedFill : OpFunction<MaskedFill> {
  static constexpr const char* name = "MaskedFillBackward0";
  static constexpr const char* formula = "y = mask ? value : x:  dy/dx = !mask";
  Tensor forward(const Tensor& x, const Tensor& mask, Scalar value) {
    check_mask(x, mask, "masked_fill");
    save_for_backward({mask});
    return where_kernel(mask, scalar_tensor(value, x.dtype()), x, "masked_fill");
  }
  // The same fill of the gradient (its derivative is itself).
  std::vector<Tensor> backward(const Tensor& grad) {
    return {masked_fill(grad, saved(0), 0.0), Tensor()};
  }
  // The fill by the kernel, with no op recorded.
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    return {where_kernel(saved(0), zeros({}, grad.dtype()), grad, "masked_fill"), Tensor()};
  }
};

// maximum(a, b): the gradient goes to the larger input, split in half on ties (as PyTorch).
// `take_max` false gives minimum.
struct MaxMin : OpFunction<MaxMin> {
  static constexpr const char* name = "MaximumBackward0";
  static constexpr const char* formula =
      "y = max(a, b):  the gradient goes to the larger input, halved on ties";
  bool take_max = true;
  Tensor forward(const Tensor& a, const Tensor& b, bool max) {
    take_max = max;
    save_for_backward({a, b});
    DType d = result_type(a, b);
    const char* op = max ? "maximum" : "minimum";
    return binary_kernel(a, b, d, op, [max](auto x, auto y) {
      if (x != x || y != y) return x != x ? x : y;  // nan propagates
      return max ? (x > y ? x : y) : (x < y ? x : y);
    });
  }
  // As PyTorch: half each on ties, nothing to the loser; a NaN comparison has no loser, so
  // both inputs get the whole gradient (where(a == b, g / 2, g).masked_fill_(a < b, 0)).
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    Tensor a_loses = take_max ? lt(a, b) : gt(a, b);
    Tensor b_loses = take_max ? gt(a, b) : lt(a, b);
    Tensor half = 0.5 * eq(a, b).to(grad.dtype());
    Tensor share_a = 1.0 - a_loses.to(grad.dtype()) - half;
    Tensor share_b = 1.0 - b_loses.to(grad.dtype()) - half;
    return {grad * share_a, grad * share_b};
  }
};
struct Minimum : MaxMin {
  static constexpr const char* name = "MinimumBackward0";
  static constexpr const char* formula =
      "y = min(a, b):  the gradient goes to the smaller input, halved on ties";
};

// y = min(max(x, lo), hi) (hi wins when lo > hi; NaN stays NaN, as in PyTorch):
// dy/dx = 1 where lo <= x <= hi, else 0 (0 at a NaN too: PyTorch's clamp_backward).
struct Clamp : OpFunction<Clamp> {
  static constexpr const char* name = "ClampBackward1";
  static constexpr const char* formula =
      "y = min(max(x, lo), hi):  dy/dx = 1 where lo <= x <= hi, else 0";
  std::optional<double> lo, hi;
  Tensor forward(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
    check(min.has_value() || max.has_value(),
          "clamp: at least one of 'min' or 'max' must not be None (input shape ", x.shape(), ")");
    if (min) lo = min->to_double();
    if (max) hi = max->to_double();
    save_for_backward({x});
    auto whole = [](const std::optional<Scalar>& v) { return !v || v->is_integral(); };
    // Bool bounds of a bool tensor leave a bool result, which clamp does not compute
    // (torch.tensor([True]).clamp(False, True): "clamp_scalar_cpu" not implemented for 'Bool').
    auto boolean = [](const std::optional<Scalar>& v) { return !v || v->is_bool(); };
    check(x.dtype() != DType::Bool || !(boolean(min) && boolean(max)),
          "clamp: not implemented for bool (a bool tensor with bool bounds; shape ", x.shape(),
          ")");
    // PyTorch's result type: a float bound makes an integer or bool tensor's result the default
    // dtype; integer bounds keep an int64 tensor and make a bool one int64 (torch.tensor([True,
    // False]).clamp(0, 1) -> tensor([1, 0]), int64; .clamp(max=0.5) -> float32).
    DType d =
        is_floating(x.dtype()) || (whole(min) && whole(max)) ? x.dtype() : get_default_dtype();
    if (d == DType::Bool) d = DType::Int64;
    if (d == DType::Int64) {  // integer bounds, compared exactly
      const bool has_l = min.has_value(), has_h = max.has_value();
      const int64_t l = min ? min->to_int64() : 0, h = max ? max->to_int64() : 0;
      return unary_kernel(x, d, [=](auto v) {
        if (has_l && v < l) v = l;
        if (has_h && v > h) v = h;
        return v;
      });
    }
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      // A finite bound beyond float32's range is an Error, as PyTorch's Scalar conversion.
      const T l = lo ? detail::checked_cast<T>(*lo, "clamp", /*fill=*/true) : T(0);
      const T h = hi ? detail::checked_cast<T>(*hi, "clamp", /*fill=*/true) : T(0);
      const bool has_l = min.has_value(), has_h = max.has_value();
      // Both bounds given and one of them NaN: every element is NaN (PyTorch's clamp fills the
      // result with NaN); a single NaN bound leaves the elements as they are, as PyTorch's.
      const bool nan_bound = has_l && has_h && (std::isnan(*lo) || std::isnan(*hi));
      return unary_kernel(x, d, [=](T v) {
        if (nan_bound) return std::numeric_limits<T>::quiet_NaN();
        if (std::isnan(v)) return v;
        if (has_l) v = std::max(v, l);
        if (has_h) v = std::min(v, h);
        return v;
      });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0);
    Tensor inside = ones_like(grad);
    if (lo) inside = inside * ge(x, *lo).to(grad.dtype());
    if (hi) inside = inside * le(x, *hi).to(grad.dtype());
    return {grad * inside};
  }
};

// The six comparisons, elementwise, in the operands' promoted dtype: a bool tensor, with no
// gradient (a comparison is constant almost everywhere).
enum class Comparison { kEq, kNe, kLt, kLe, kGt, kGe };

Tensor compare(const Tensor& a, const Tensor& b, const char* op, Comparison which) {
  OpScope scope(op);
  DType d = result_type(a, b);
  NoGradGuard no_grad;
  return dispatch(d, [&](auto tag) {
    using T = decltype(tag);
    return binary_loops<T, bool>(a, b, op, [which](T x, T y) {
      switch (which) {
        case Comparison::kEq:
          return x == y;
        case Comparison::kNe:
          return x != y;
        case Comparison::kLt:
          return x < y;
        case Comparison::kLe:
          return x <= y;
        case Comparison::kGt:
          return x > y;
        case Comparison::kGe:
          break;
      }
      return x >= y;
    });
  });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return apply<MaxMin>(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return apply<Minimum>(a, b, false); }
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  return apply<Where>(condition, a, b);
}
Tensor masked_fill(const Tensor& t, const Tensor& mask, Scalar value) {
  return apply<MaskedFill>(t, mask, value);
}

Tensor clamp(const Tensor& t, std::optional<Scalar> min, std::optional<Scalar> max) {
  return apply<Clamp>(t, min, max);
}
Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", Comparison::kEq); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", Comparison::kNe); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", Comparison::kLt); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", Comparison::kLe); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", Comparison::kGt); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", Comparison::kGe); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, wrap_scalar(b, a, "eq")); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, wrap_scalar(b, a, "ne")); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, wrap_scalar(b, a, "lt")); }
Tensor le(const Tensor& a, Scalar b) { return le(a, wrap_scalar(b, a, "le")); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, wrap_scalar(b, a, "gt")); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, wrap_scalar(b, a, "ge")); }

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  return ember::masked_fill(*this, mask, value);
}
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ember::clamp(*this, min, max);
}

}  // namespace ember
