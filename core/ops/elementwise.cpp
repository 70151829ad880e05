// Elementwise ops. Each op is a struct with its forward and backward side by side; the
// broadcasting of the forward is undone by the engine (autograd::sum_to), so a backward here
// returns gradients of the broadcast (output) shape.
#include "core/ops/elementwise.h"

#include <cmath>
#include <numbers>

#include "core/autograd/function.h"
#include "core/kernels/iterate.h"

namespace ember {

using autograd::apply;
using autograd::Function;

namespace {

// ---------------------------------------------------------------------------------------------
// Kernels: out = f(a, b) and out = f(x) over broadcast, strided operands.
// ---------------------------------------------------------------------------------------------

// PyTorch's type promotion for two operands: a 0-d tensor (like a wrapped Python scalar) does
// not raise the dtype of a higher-dimensional tensor of the same kind (float vs. integer).
DType result_type(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) != (b.dim() == 0)) {
    const Tensor& big = a.dim() == 0 ? b : a;
    const Tensor& small = a.dim() == 0 ? a : b;
    if (is_floating(big.dtype()) || !is_floating(small.dtype())) {
      return big.dtype() == DType::Bool ? promote(big.dtype(), small.dtype()) : big.dtype();
    }
    return kDefaultDType;
  }
  return promote(a.dtype(), b.dtype());
}

// Computes f(a, b) in dtype `compute`, writing dtype `out_dtype`, over the broadcast shape.
template <typename F>
Tensor binary_kernel(const Tensor& a, const Tensor& b, DType compute, DType out_dtype,
                     const char* op, F f) {
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor x = a.to(compute), y = b.to(compute);
  Tensor out = empty(shape, out_dtype);
  Shape xs = broadcast_strides(x.shape(), x.strides(), shape);
  Shape ys = broadcast_strides(y.shape(), y.strides(), shape);
  dispatch(compute, [&](auto ctag) {
    using T = decltype(ctag);
    dispatch(out_dtype, [&](auto otag) {
      using R = decltype(otag);
      kernels::binary_map(out.data_ptr<R>(), x.data_ptr<T>(), xs, y.data_ptr<T>(), ys, shape,
                          [&](T u, T v) { return static_cast<R>(f(u, v)); });
    });
  });
  return out;
}

// f(x) elementwise in x's dtype (after `compute` conversion).
// Bool tensors take no arithmetic here (PyTorch refuses most of it too).
template <typename F>
Tensor unary_kernel(const Tensor& t, DType compute, F f) {
  check(compute != DType::Bool,
        "elementwise op: bool tensors are not supported here; convert "
        "with .to(float32) first (shape ",
        t.shape(), ")");
  Tensor x = t.to(compute);
  Tensor out = empty(x.shape(), compute);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    kernels::unary_map(out.data_ptr<T>(), x.data_ptr<T>(), x.shape(), x.strides(),
                       [&](T v) { return static_cast<T>(f(v)); });
  };
  if (compute == DType::Int64) {
    run(int64_t{});
  } else {
    dispatch_floating(compute, run);
  }
  return out;
}

// Math functions work in floating point; integer inputs become float32, as in PyTorch.
DType floating_type(const Tensor& t) { return is_floating(t.dtype()) ? t.dtype() : kDefaultDType; }

// A Python scalar next to a tensor: a 0-d tensor of the tensor's dtype, or float32 when the
// tensor is integral and the scalar is not.
Tensor wrap_scalar(double value, const Tensor& like, const char* op) {
  detail::check_defined(like, op);
  DType d = like.dtype();
  if (!is_floating(d) && value != std::floor(value)) d = kDefaultDType;
  if (d == DType::Bool) d = DType::Int64;
  return scalar_tensor(value, d);
}

void check_same_device_args(const Tensor& a, const Tensor& b, const char* op) {
  check(a.defined() && b.defined(), op, ": called with an undefined tensor");
}

// ---------------------------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------------------------

// c = a + b:  dc/da = 1, dc/db = 1
struct Add : Function<Add> {
  static constexpr const char* name = "AddBackward0";
  Tensor forward(const Tensor& a, const Tensor& b) {
    check_same_device_args(a, b, "add");
    DType t = result_type(a, b);
    return binary_kernel(a, b, t, t, "add", [](auto x, auto y) { return x + y; });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad, grad}; }
};

// c = a - b:  dc/da = 1, dc/db = -1
struct Sub : Function<Sub> {
  static constexpr const char* name = "SubBackward0";
  Tensor forward(const Tensor& a, const Tensor& b) {
    check_same_device_args(a, b, "sub");
    DType t = result_type(a, b);
    check(t != DType::Bool, "sub: subtraction with two bool tensors is not supported");
    return binary_kernel(a, b, t, t, "sub", [](auto x, auto y) { return x - y; });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad, neg(grad)}; }
};

// c = a * b:  dc/da = b, dc/db = a
struct Mul : Function<Mul> {
  static constexpr const char* name = "MulBackward0";
  Tensor forward(const Tensor& a, const Tensor& b) {
    check_same_device_args(a, b, "mul");
    // Each operand is kept only if the other one needs a gradient (as PyTorch does): x.mul_(2.0)
    // overwrites x, which must not invalidate a saved x that no gradient needs.
    save_for_backward({b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()});
    DType t = result_type(a, b);
    if (t == DType::Bool)
      return binary_kernel(a, b, t, t, "mul", [](bool x, bool y) { return x && y; });
    return binary_kernel(a, b, t, t, "mul", [](auto x, auto y) { return x * y; });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {b.defined() ? grad * b : Tensor(), a.defined() ? grad * a : Tensor()};
  }
};

// c = a / b:  dc/da = 1 / b, dc/db = -a / b^2
struct Div : Function<Div> {
  static constexpr const char* name = "DivBackward0";
  Tensor forward(const Tensor& a, const Tensor& b) {
    check_same_device_args(a, b, "div");
    save_for_backward({a, b});
    DType t = result_type(a, b);
    if (!is_floating(t)) t = kDefaultDType;  // true division, as torch.div
    return binary_kernel(a, b, t, t, "div", [](auto x, auto y) { return x / y; });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {grad / b, neg(grad) * a / (b * b)};
  }
};

// c = s - t for a scalar s (torch.rsub):  dc/dt = -1
struct RSub : Function<RSub> {
  static constexpr const char* name = "RsubBackward1";
  Tensor forward(const Tensor& t, const Tensor& scalar) {
    DType d = result_type(t, scalar);
    return binary_kernel(scalar, t, d, d, "rsub", [](auto x, auto y) { return x - y; });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {neg(grad), Tensor()}; }
};

// ---------------------------------------------------------------------------------------------
// Unary math
// ---------------------------------------------------------------------------------------------

// y = -x:  dy/dx = -1
struct Neg : Function<Neg> {
  static constexpr const char* name = "NegBackward0";
  Tensor forward(const Tensor& x) {
    check(x.dtype() != DType::Bool, "neg: negation of a bool tensor is not supported; use ~");
    return unary_kernel(x, x.dtype(), [](auto v) { return -v; });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {neg(grad)}; }
};

// y = e^x:  dy/dx = e^x = y
struct Exp : Function<Exp> {
  static constexpr const char* name = "ExpBackward0";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return std::exp(v); });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad * saved(0)}; }
};

// y = ln x:  dy/dx = 1 / x
struct Log : Function<Log> {
  static constexpr const char* name = "LogBackward0";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return unary_kernel(x, floating_type(x), [](auto v) { return std::log(v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad / saved(0)}; }
};

// y = sqrt(x):  dy/dx = 1 / (2 y)
struct Sqrt : Function<Sqrt> {
  static constexpr const char* name = "SqrtBackward0";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return std::sqrt(v); });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad / (2.0 * saved(0))}; }
};

// y = x^p:  dy/dx = p x^(p-1)
struct Pow : Function<Pow> {
  static constexpr const char* name = "PowBackward0";
  double exponent = 1;
  Tensor forward(const Tensor& x, double p) {
    exponent = p;
    save_for_backward({x});
    DType d = is_floating(x.dtype()) || p != std::floor(p) || p < 0 ? floating_type(x) : x.dtype();
    if (p == 2.0) return unary_kernel(x, d, [](auto v) { return v * v; });
    if (p == 0.5) return unary_kernel(x, d, [](auto v) { return std::sqrt(v); });
    return unary_kernel(x, d, [p](auto v) { return std::pow(v, p); });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    if (exponent == 0.0) return {zeros_like(grad)};
    return {grad * (exponent * pow(saved(0), exponent - 1.0))};
  }
};

// y = |x|:  dy/dx = sign(x) (0 at 0, as PyTorch)
struct Abs : Function<Abs> {
  static constexpr const char* name = "AbsBackward0";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    // std::abs, not v < 0 ? -v : v, which keeps the sign of -0.0 (PyTorch gives +0.0).
    return unary_kernel(x, x.dtype(), [](auto v) { return std::abs(v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor sign = unary_kernel(saved(0), grad.dtype(),
                               [](auto v) { return static_cast<decltype(v)>((v > 0) - (v < 0)); });
    return {grad * sign};
  }
};

// y = tanh x:  dy/dx = 1 - y^2
struct Tanh : Function<Tanh> {
  static constexpr const char* name = "TanhBackward0";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return std::tanh(v); });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor y = saved(0);
    return {grad * (1.0 - y * y)};
  }
};

// y = 1 / (1 + e^-x):  dy/dx = y (1 - y)
struct Sigmoid : Function<Sigmoid> {
  static constexpr const char* name = "SigmoidBackward0";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) {
      using T = decltype(v);
      return T(1) / (T(1) + std::exp(-v));
    });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor y = saved(0);
    return {grad * y * (1.0 - y)};
  }
};

// y = max(x, 0):  dy/dx = 1 where y > 0, else 0
struct Relu : Function<Relu> {
  static constexpr const char* name = "ReluBackward0";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, x.dtype(), [](auto v) { return v > 0 ? v : decltype(v)(0); });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad * gt(saved(0), 0.0).to(grad.dtype())};
  }
};

// Exact:  y = x Phi(x),  dy/dx = Phi(x) + x phi(x)   (Phi, phi: the standard normal cdf, pdf)
// Tanh:   y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
//         dy/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
struct Gelu : Function<Gelu> {
  static constexpr const char* name = "GeluBackward0";
  static constexpr double kAlpha = 0.044715;
  bool tanh_approximation = false;

  Tensor forward(const Tensor& x, bool use_tanh) {
    tanh_approximation = use_tanh;
    save_for_backward({x});
    if (use_tanh) {
      return unary_kernel(x, floating_type(x), [](auto v) {
        using T = decltype(v);
        const T k = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
        T inner = k * (v + static_cast<T>(kAlpha) * v * v * v);
        return T(0.5) * v * (T(1) + std::tanh(inner));
      });
    }
    return unary_kernel(x, floating_type(x), [](auto v) {
      using T = decltype(v);
      return v * T(0.5) * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0);
    Tensor slope;
    if (tanh_approximation) {
      slope = unary_kernel(x, x.dtype(), [](auto v) {
        using T = decltype(v);
        const T k = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
        T t = std::tanh(k * (v + static_cast<T>(kAlpha) * v * v * v));
        return T(0.5) * (T(1) + t) +
               T(0.5) * v * (T(1) - t * t) * k * (T(1) + T(3 * kAlpha) * v * v);
      });
    } else {
      slope = unary_kernel(x, x.dtype(), [](auto v) {
        using T = decltype(v);
        T cdf = T(0.5) * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
        T pdf = std::exp(T(-0.5) * v * v) *
                static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
        return cdf + v * pdf;
      });
    }
    return {grad * slope};
  }
};

// ---------------------------------------------------------------------------------------------
// Selections
// ---------------------------------------------------------------------------------------------

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
struct Where : Function<Where> {
  static constexpr const char* name = "WhereBackward0";
  Tensor forward(const Tensor& condition, const Tensor& a, const Tensor& b) {
    save_for_backward({condition});
    return where_kernel(condition, a, b, "where");
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor c = saved(0);
    Tensor zero = zeros({}, grad.dtype());
    return {Tensor(), where_kernel(c, grad, zero, "where"), where_kernel(c, zero, grad, "where")};
  }
};

// maximum(a, b): the gradient goes to the larger input, split in half on ties (as PyTorch).
// `take_max` false gives minimum.
struct MaxMin : Function<MaxMin> {
  static constexpr const char* name = "MaximumBackward0";
  bool take_max = true;
  Tensor forward(const Tensor& a, const Tensor& b, bool max) {
    take_max = max;
    save_for_backward({a, b});
    DType d = result_type(a, b);
    const char* op = max ? "maximum" : "minimum";
    return binary_kernel(a, b, d, d, op, [max](auto x, auto y) {
      if (x != x || y != y) return x != x ? x : y;  // nan propagates
      return max ? (x > y ? x : y) : (x < y ? x : y);
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    Tensor a_wins = take_max ? gt(a, b) : lt(a, b);
    Tensor tie = eq(a, b);
    Tensor share_a = a_wins.to(grad.dtype()) + 0.5 * tie.to(grad.dtype());
    Tensor share_b = 1.0 - share_a;
    return {grad * share_a, grad * share_b};
  }
};
struct Minimum : MaxMin {
  static constexpr const char* name = "MinimumBackward0";
};

void check_mask(const Tensor& t, const Tensor& mask, const char* op) {
  check(mask.dtype() == DType::Bool, op, ": only supports boolean masks, but got mask with dtype ",
        dtype_name(mask.dtype()));
  Shape target = broadcast_shapes(t.shape(), mask.shape(), op);
  check(target == t.shape(), op, ": mask of shape ", mask.shape(),
        " cannot be broadcast to the tensor's shape ", t.shape());
}

// y = x where !mask, value where mask:  dy/dx = !mask
struct MaskedFill : Function<MaskedFill> {
  static constexpr const char* name = "MaskedFillBackward0";
  Tensor forward(const Tensor& x, const Tensor& mask, double value) {
    check_mask(x, mask, "masked_fill");
    save_for_backward({mask});
    return where_kernel(mask, scalar_tensor(value, x.dtype()), x, "masked_fill");
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {where_kernel(saved(0), zeros({}, grad.dtype()), grad, "masked_fill"), Tensor()};
  }
};

Tensor compare(const Tensor& a, const Tensor& b, const char* op, int which) {
  DType d = result_type(a, b);
  NoGradGuard no_grad;
  return binary_kernel(a, b, d, DType::Bool, op, [which](auto x, auto y) {
    switch (which) {
      case 0:
        return x == y;
      case 1:
        return x != y;
      case 2:
        return x < y;
      case 3:
        return x <= y;
      case 4:
        return x > y;
      default:
        return x >= y;
    }
  });
}

// In-place ops: compute the result out of place (recording the op), write it into `self`'s
// storage, and make the new node self's grad_fn: self's history is rebased onto the op.
Tensor& write_in_place(Tensor& self, const Tensor& result, const char* op) {
  check(result.shape() == self.shape(), op, ": result of shape ", result.shape(),
        " does not fit the in-place destination of shape ", self.shape());
  // Rebasing a view's history would leave its base out of the graph while its values change:
  // the base's gradients would then be silently wrong (copy_ refuses the same case).
  check(!(result.grad_fn() && self.impl()->is_view), op,
        ": writing a result that requires grad into a view of shape ", self.shape(),
        " is not supported (the view's base would not see it); apply the op out of place");
  {
    NoGradGuard no_grad;
    self.copy_(result);
  }
  if (result.grad_fn()) {
    TensorImpl* impl = self.impl();
    // The old node no longer produces self: retain_grad moves to the new one (as in PyTorch,
    // where y.retain_grad() before y.masked_fill_() keeps the final y's grad); hooks registered
    // before stay on the old node and see the gradient of the old version.
    if (impl->grad_fn) impl->grad_fn->output.reset();
    impl->grad_fn = result.grad_fn();
    impl->requires_grad = true;
    impl->grad_fn->output = self.impl_ptr();
  }
  return self;
}

}  // namespace

// ---- public functions ----
Tensor add(const Tensor& a, const Tensor& b) { return apply<Add>(a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return apply<Sub>(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return apply<Mul>(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return apply<Div>(a, b); }
Tensor add(const Tensor& a, double b) { return apply<Add>(a, wrap_scalar(b, a, "add")); }
Tensor sub(const Tensor& a, double b) { return apply<Sub>(a, wrap_scalar(b, a, "sub")); }
Tensor mul(const Tensor& a, double b) { return apply<Mul>(a, wrap_scalar(b, a, "mul")); }
Tensor div(const Tensor& a, double b) { return apply<Div>(a, wrap_scalar(b, a, "div")); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return apply<RSub>(b, wrap_scalar(a, b, "rsub")); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return div(wrap_scalar(a, b, "div"), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

Tensor neg(const Tensor& t) { return apply<Neg>(t); }
Tensor exp(const Tensor& t) { return apply<Exp>(t); }
Tensor log(const Tensor& t) { return apply<Log>(t); }
Tensor sqrt(const Tensor& t) { return apply<Sqrt>(t); }
Tensor pow(const Tensor& t, double exponent) { return apply<Pow>(t, exponent); }
Tensor abs(const Tensor& t) { return apply<Abs>(t); }
Tensor tanh(const Tensor& t) { return apply<Tanh>(t); }
Tensor sigmoid(const Tensor& t) { return apply<Sigmoid>(t); }
Tensor relu(const Tensor& t) { return apply<Relu>(t); }
Tensor gelu(const Tensor& t, const std::string& approximate) {
  check(approximate == "none" || approximate == "tanh",
        "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return apply<Gelu>(t, approximate == "tanh");
}

Tensor maximum(const Tensor& a, const Tensor& b) { return apply<MaxMin>(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return apply<Minimum>(a, b, false); }
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  return apply<Where>(condition, a, b);
}
Tensor masked_fill(const Tensor& t, const Tensor& mask, double value) {
  return apply<MaskedFill>(t, mask, value);
}
Tensor& masked_fill_(Tensor& t, const Tensor& mask, double value) {
  detail::check_inplace(t, "masked_fill_");
  return write_in_place(t, masked_fill(t, mask, value), "masked_fill_");
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", 0); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", 1); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", 2); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", 3); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", 4); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", 5); }
Tensor eq(const Tensor& a, double b) { return eq(a, wrap_scalar(b, a, "eq")); }
Tensor ne(const Tensor& a, double b) { return ne(a, wrap_scalar(b, a, "ne")); }
Tensor lt(const Tensor& a, double b) { return lt(a, wrap_scalar(b, a, "lt")); }
Tensor le(const Tensor& a, double b) { return le(a, wrap_scalar(b, a, "le")); }
Tensor gt(const Tensor& a, double b) { return gt(a, wrap_scalar(b, a, "gt")); }
Tensor ge(const Tensor& a, double b) { return ge(a, wrap_scalar(b, a, "ge")); }

// ---- Tensor methods ----
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::pow(double exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return ember::masked_fill(*this, mask, value);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return ember::masked_fill_(*this, mask, value);
}
Tensor& Tensor::add_(const Tensor& other) {
  detail::check_inplace(*this, "add_");
  return write_in_place(*this, add(*this, other).to(dtype()), "add_");
}
Tensor& Tensor::mul_(double factor) {
  detail::check_inplace(*this, "mul_");
  return write_in_place(*this, mul(*this, factor).to(dtype()), "mul_");
}

}  // namespace ember
