// Arithmetic and unary math: add, sub, mul, div (and their operators), neg, exp, log, sqrt, pow,
// abs, addcmul, addcdiv, lerp. Each op is a struct with its forward and backward side by side;
// the broadcasting of the forward is undone by the engine (with sum_to, core/ops/reduce.cpp), so
// a backward here returns gradients of the broadcast (output) shape. The loops they share are in
// core/ops/elementwise_loops.h; the in-place forms (add_, mul_, ...) in core/ops/inplace.cpp.
#include <cmath>
#include <optional>

#include "core/base/convert.h"
#include "core/graph/function.h"
#include "core/ops/elementwise.h"
#include "core/ops/elementwise_loops.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;
using detail::binary_kernel;
using detail::binary_loops;
using detail::floating_type;
using detail::result_type;
using detail::unary_kernel;
using detail::wrap_scalar;
using detail::wrapping_add;
using detail::wrapping_mul;
using detail::wrapping_sub;

namespace {

// x^p for a whole p >= 0 by squaring, wrapping like repeated multiplication (PyTorch's
// integer pow).
int64_t wrapping_pow(int64_t x, uint64_t p) {
  uint64_t result = 1, base = static_cast<uint64_t>(x);
  while (p) {
    if (p & 1) result *= base;
    base *= base;
    p >>= 1;
  }
  return static_cast<int64_t>(result);
}

// ---------------------------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------------------------

// torch.add(a, b, alpha=...) for integer results takes an integer alpha only, and a bool alpha
// only for a bool result.
void check_alpha(DType t, Scalar alpha, const char* op) {
  check(!alpha.is_bool() || t == DType::Bool, op,
        ": Boolean alpha only supported for Boolean results (result dtype ", dtype_name(t), ")");
  check(is_floating(t) || alpha.is_integral(), op,
        ": for integral input tensors, argument alpha must not be a floating point number (got ",
        alpha.to_double(), ")");
}

// a + alpha * b in T, as PyTorch's add kernel: one fused multiply-add for floats (its
// vectorised ufunc::add is vec::fmadd(b, alpha, a); with alpha = 1 that is exactly a + b),
// wrapping for int64.
template <typename T>
T add_scaled(T a, T b, T alpha) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fma(b, alpha, a);
  } else if constexpr (std::is_same_v<T, bool>) {
    return a || (alpha && b);
  } else {
    return wrapping_add(a, wrapping_mul(alpha, b));
  }
}

// c = a + alpha b:  dc/da = 1, dc/db = alpha
struct Add : OpFunction<Add> {
  static constexpr const char* name = "AddBackward0";
  static constexpr const char* formula = "c = a + alpha b:  dc/da = 1, dc/db = alpha";
  double alpha = 1;
  Tensor forward(const Tensor& a, const Tensor& b, Scalar alpha_) {
    alpha = alpha_.to_double();
    DType t = result_type(a, b);
    check_alpha(t, alpha_, "add");
    if (alpha == 1)
      return binary_kernel(a, b, t, "add", [](auto x, auto y) { return wrapping_add(x, y); });
    return dispatch(t, [&](auto tag) {
      using T = decltype(tag);
      const T al = std::is_same_v<T, int64_t>
                       ? static_cast<T>(alpha_.to_int64())
                       : detail::checked_cast<T>(alpha, "add", /*fill=*/true);
      return binary_loops<T, T>(a, b, "add",
                                [al](auto x, auto y) { return add_scaled<T>(x, y, al); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad, alpha == 1 ? grad : grad * alpha};
  }
};

// PyTorch refuses a subtraction with a bool operand on either side (sub_check), whatever the
// other operand's type: torch.tensor([1, 2]) - torch.tensor([True, False]) is an Error, as is
// 1 - mask, not an int64 difference.
void check_no_bool_operand(const Tensor& a, const Tensor& b, const char* op) {
  check(a.dtype() != DType::Bool && b.dtype() != DType::Bool, op,
        ": subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
        "to invert a mask, use the `~` or `logical_not()` operator instead (got ",
        dtype_name(a.dtype()), " ", a.shape(), " - ", dtype_name(b.dtype()), " ", b.shape(), ")");
}

// c = a - alpha b:  dc/da = 1, dc/db = -alpha  (PyTorch: a + (-alpha) b)
struct Sub : OpFunction<Sub> {
  static constexpr const char* name = "SubBackward0";
  static constexpr const char* formula = "c = a - alpha b:  dc/da = 1, dc/db = -alpha";
  double alpha = 1;
  Tensor forward(const Tensor& a, const Tensor& b, Scalar alpha_) {
    alpha = alpha_.to_double();
    DType t = result_type(a, b);
    check_no_bool_operand(a, b, "sub");
    check_alpha(t, alpha_, "sub");
    if (alpha == 1)
      return binary_kernel(a, b, t, "sub", [](auto x, auto y) { return wrapping_sub(x, y); });
    return dispatch(t, [&](auto tag) {
      using T = decltype(tag);
      const T al = std::is_same_v<T, int64_t>
                       ? static_cast<T>(wrapping_sub(int64_t{0}, alpha_.to_int64()))
                       : detail::checked_cast<T>(-alpha, "sub", /*fill=*/true);
      return binary_loops<T, T>(a, b, "sub",
                                [al](auto x, auto y) { return add_scaled<T>(x, y, al); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad, alpha == 1 ? neg(grad) : grad * -alpha};
  }
};

// c = a * b:  dc/da = b, dc/db = a
struct Mul : OpFunction<Mul> {
  static constexpr const char* name = "MulBackward0";
  static constexpr const char* formula = "c = a * b:  dc/da = b, dc/db = a";
  Tensor forward(const Tensor& a, const Tensor& b) {
    // Each operand is kept only if the other one needs a gradient (as PyTorch does): x.mul_(2.0)
    // overwrites x, which must not invalidate a saved x that no gradient needs.
    save_for_backward({b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()});
    DType t = result_type(a, b);
    if (t == DType::Bool)
      return binary_loops<bool, bool>(a, b, "mul", [](bool x, bool y) { return x && y; });
    return binary_kernel(a, b, t, "mul", [](auto x, auto y) { return wrapping_mul(x, y); });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {b.defined() ? grad * b : Tensor(), a.defined() ? grad * a : Tensor()};
  }
};

// c = a / b:  dc/da = 1 / b, dc/db = -a / b^2
struct Div : OpFunction<Div> {
  static constexpr const char* name = "DivBackward0";
  static constexpr const char* formula = "c = a / b:  dc/da = 1 / b, dc/db = -a / b^2";
  Tensor forward(const Tensor& a, const Tensor& b) {
    save_for_backward({a, b});
    DType t = result_type(a, b);
    if (!is_floating(t)) t = get_default_dtype();  // true division, as torch.div
    return binary_kernel(a, b, t, "div", [](auto x, auto y) { return x / y; });
  }
  // db as PyTorch 1.13 rounds it (div_tensor_other_backward: -grad * ((a / b) / b)): the
  // quotient divided twice, not -grad * a over b squared, which differs in the last bits and
  // overflows or underflows at half the exponent range (b * b).
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {grad / b, neg(grad) * ((a / b) / b)};
  }
};

// c = s - t for a scalar s (torch.rsub):  dc/dt = -1
struct RSub : OpFunction<RSub> {
  static constexpr const char* name = "RsubBackward1";
  static constexpr const char* formula = "c = s - t:  dc/dt = -1";
  Tensor forward(const Tensor& t, const Tensor& scalar) {
    check_no_bool_operand(scalar, t, "rsub");
    DType d = result_type(t, scalar);
    return binary_kernel(scalar, t, d, "rsub", [](auto x, auto y) { return wrapping_sub(x, y); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {neg(grad), Tensor()}; }
};

// ---------------------------------------------------------------------------------------------
// Unary math
// ---------------------------------------------------------------------------------------------

// y = -x:  dy/dx = -1
struct Neg : OpFunction<Neg> {
  static constexpr const char* name = "NegBackward0";
  static constexpr const char* formula = "y = -x:  dy/dx = -1";
  Tensor forward(const Tensor& x) {
    check(x.dtype() != DType::Bool, "neg: negation of a bool tensor is not supported; use ~");
    return unary_kernel(x, x.dtype(), [](auto v) { return wrapping_sub(decltype(v)(0), v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {neg(grad)}; }
};

// y = e^x:  dy/dx = e^x = y
struct Exp : OpFunction<Exp> {
  static constexpr const char* name = "ExpBackward0";
  static constexpr const char* formula = "y = e^x:  dy/dx = e^x = y";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return std::exp(v); });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad * saved(0)}; }
};

// y = ln x:  dy/dx = 1 / x
struct Log : OpFunction<Log> {
  static constexpr const char* name = "LogBackward0";
  static constexpr const char* formula = "y = ln x:  dy/dx = 1 / x";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return unary_kernel(x, floating_type(x), [](auto v) { return std::log(v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad / saved(0)}; }
};

// y = sqrt(x):  dy/dx = 1 / (2 y)
struct Sqrt : OpFunction<Sqrt> {
  static constexpr const char* name = "SqrtBackward0";
  static constexpr const char* formula = "y = sqrt(x):  dy/dx = 1 / (2 y)";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return std::sqrt(v); });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad / (2.0 * saved(0))}; }
};

// y = 1 / x:  dy/dx = -y^2 (PyTorch's reciprocal_backward, -(y y), from the saved result).
// A number divided by a tensor is this times the number, as PyTorch's Tensor.__rdiv__
// (x.reciprocal() * s): two roundings, so 0.1 / x differs from a correctly rounded quotient in
// about a quarter of float32 inputs, and 1e-10 / 1e-39 is inf * 1e-10 = inf, 0 / 1e-39 is nan.
struct Reciprocal : OpFunction<Reciprocal> {
  static constexpr const char* name = "ReciprocalBackward0";
  static constexpr const char* formula = "y = 1 / x:  dy/dx = -y^2";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, floating_type(x), [](auto v) { return decltype(v)(1) / v; });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor y = saved(0);
    return {grad * -(y * y)};
  }
};

// y = x^p:  dy/dx = p x^(p-1)
struct Pow : OpFunction<Pow> {
  static constexpr const char* name = "PowBackward0";
  static constexpr bool has_constant_gradients = true;  // x^0: zero gradient
  static constexpr const char* formula = "y = x^p:  dy/dx = p x^(p-1)";
  double exponent = 1;
  Tensor forward(const Tensor& x, Scalar exponent_) {
    const double p = exponent_.to_double();
    exponent = p;
    save_for_backward({x});
    // An integer tensor stays integer for an integer exponent (torch.arange(3) ** 2 is int64,
    // ** 2.0 is float32), a bool one becomes int64; a negative integer power of integers or
    // bools is refused, as in PyTorch.
    check(is_floating(x.dtype()) || !exponent_.is_integral() || p >= 0,
          "pow: Integers to negative integer powers are not allowed (exponent ", p, ", dtype ",
          dtype_name(x.dtype()), ")");
    // A bool exponent of a bool tensor leaves a bool result, which pow does not compute
    // (torch.tensor([True]).pow(True): "pow" not implemented for 'Bool').
    check(x.dtype() != DType::Bool || !exponent_.is_bool(),
          "pow: not implemented for bool (a bool tensor to a bool exponent; shape ", x.shape(),
          ")");
    DType d = is_floating(x.dtype()) || !exponent_.is_integral() ? floating_type(x) : x.dtype();
    if (d == DType::Bool) d = DType::Int64;  // torch.tensor([True, False]).pow(2): int64 [1, 0]
    if (d == DType::Int64) {
      // A whole exponent >= 0 (else d is floating): exact and wrapping, never through double
      // (2^53 + 1 and 2^63 - 1 are odd; as doubles they are even).
      const auto e = static_cast<uint64_t>(exponent_.to_int64());
      return unary_kernel(x, d, [e](auto v) { return wrapping_pow(static_cast<int64_t>(v), e); });
    }
    // PyTorch's special cases (pow_tensor_scalar_kernel and its optimized kernel): x^2 and x^3
    // are products in the element type (the book's GELU cubes x), x^-2 is 1 / (x x), x^0.5 is
    // sqrt, x^-0.5 is rsqrt (1 / sqrt(x)) and x^-1 the reciprocal, each rounded in the element
    // type, not std::pow in double, which rounds a float32 x^-0.5 or x^-2 differently in about
    // a quarter of the inputs and differs at the edges: rsqrt(-0.0) = 1 / -0.0 = -inf and
    // rsqrt(-inf) = nan (std::pow gives +inf and +0), a float32 x^-2 of 1e20 is 1 / inf = 0.
    // The backward's x^(p-1) goes through the same cases (x^0.5's derivative at -0.0: -inf).
    if (p == 2.0) return unary_kernel(x, d, [](auto v) { return v * v; });
    if (p == 3.0) return unary_kernel(x, d, [](auto v) { return v * v * v; });
    if (p == 0.5) return unary_kernel(x, d, [](auto v) { return std::sqrt(v); });
    if (p == -0.5) {
      return unary_kernel(x, d, [](auto v) { return decltype(v)(1) / std::sqrt(v); });
    }
    if (p == -1.0) return unary_kernel(x, d, [](auto v) { return decltype(v)(1) / v; });
    if (p == -2.0) return unary_kernel(x, d, [](auto v) { return decltype(v)(1) / (v * v); });
    // Any other exponent: std::pow in double, rounded once to the element type, which is what
    // PyTorch 1.13's scalar loop computes (std::pow(base, exp) with exp a double): every
    // element of a float32 tensor of fewer than 16 elements, and the last numel % 16 of a
    // contiguous one. Its vector loop (the other elements of a contiguous float32 tensor of 16
    // or more) takes Sleef's powf u10 of base and float(exp) instead: for an exponent that is
    // not a float (0.3, 1/3, 1.1, 2.2) the rounded exponent moves the result by up to 16 ulps
    // (0.3) to 33 ulps (2.2) on inputs up to 1e35; for one that is (1.5, 2.5, -0.25, 7) Sleef
    // is within 1 ulp of this. Ember keeps the scalar loop's result for every element: which
    // elements PyTorch vectorises depends on the layout and on its thread count's chunks.
    return unary_kernel(x, d, [p](auto v) { return std::pow(v, p); });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    if (exponent == 0.0) return {zeros_like(grad)};
    return {grad * (exponent * pow(saved(0), exponent - 1.0))};
  }
};

// y = |x|:  dy/dx = sign(x) (0 at 0, as PyTorch)
struct Abs : OpFunction<Abs> {
  static constexpr const char* name = "AbsBackward0";
  static constexpr const char* formula = "y = |x|:  dy/dx = sign(x)";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    // std::abs, not v < 0 ? -v : v, which keeps the sign of -0.0 (PyTorch gives +0.0); an
    // int64 wraps (|INT64_MIN| is INT64_MIN, as in PyTorch).
    return unary_kernel(x, x.dtype(), [](auto v) {
      using T = decltype(v);
      if constexpr (std::is_same_v<T, int64_t>) {
        return v < 0 ? wrapping_sub(T(0), v) : v;
      } else {
        return std::abs(v);
      }
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor sign = unary_kernel(saved(0), grad.dtype(),
                               [](auto v) { return static_cast<decltype(v)>((v > 0) - (v < 0)); });
    return {grad * sign};
  }
};

// ---------------------------------------------------------------------------------------------
// Three operands: addcmul and lerp (the optimizers' updates)
// ---------------------------------------------------------------------------------------------

// out = f(a, b, c) over the broadcast shape, in element type T (dtype d: floating, or int64 for
// addcmul).
template <typename T, typename F>
Tensor ternary_kernel(const Tensor& a, const Tensor& b, const Tensor& c, DType d, const char* op,
                      F f) {
  Shape shape = broadcast_shapes(broadcast_shapes(a.shape(), b.shape(), op), c.shape(), op);
  Tensor x = a.to(d).expand(shape), y = b.to(d).expand(shape), z = c.to(d).expand(shape);
  Tensor out = empty(shape, d);
  T* o = out.data_ptr<T>();
  const T* xp = x.data_ptr<T>();
  const T* yp = y.data_ptr<T>();
  const T* zp = z.data_ptr<T>();
  Shape os = contiguous_strides(shape);
  kernels::for_each_row<4>(
      shape, {&os, &x.strides(), &y.strides(), &z.strides()}, [&](auto off, int64_t n, auto step) {
        for (int64_t i = 0; i < n; ++i)
          o[off[0] + i * step[0]] =
              f(xp[off[1] + i * step[1]], yp[off[2] + i * step[2]], zp[off[3] + i * step[3]]);
      });
  return out;
}

DType floating_result(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  DType d = result_type({&a, &b, &c});
  check(is_floating(d), op, ": expected floating point tensors, got ", dtype_name(a.dtype()), ", ",
        dtype_name(b.dtype()), " and ", dtype_name(c.dtype()));
  return d;
}

// out = self + value t1 t2, rounded as PyTorch's kernel: fma(value t1, t2, self).
// d/dself = 1, d/dt1 = value t2, d/dt2 = value t1.
struct Addcmul : OpFunction<Addcmul> {
  static constexpr const char* name = "AddcmulBackward0";
  static constexpr const char* formula =
      "y = self + v t1 t2:  d/dself = 1, d/dt1 = v t2, d/dt2 = v t1";
  double value = 1;
  Tensor forward(const Tensor& self, const Tensor& t1, const Tensor& t2, double value_) {
    value = value_;
    save_for_backward({self.requires_grad() || t2.requires_grad() ? t1 : Tensor(),
                       self.requires_grad() || t1.requires_grad() ? t2 : Tensor()});
    // int64 operands give an int64 result, as PyTorch's (its kernel takes the value as an
    // integer, truncated toward zero: torch.tensor([1]).addcmul(t, t, value=0.5) adds nothing),
    // wrapping on overflow; bool ones have no kernel ("addcmul_cpu_out" not implemented for
    // 'Bool').
    const DType d = result_type({&self, &t1, &t2});
    if (d == DType::Int64) {
      const auto v = detail::checked_cast<int64_t>(value, "addcmul");
      return ternary_kernel<int64_t>(self, t1, t2, d, "addcmul",
                                     [v](int64_t s, int64_t a, int64_t b) {
                                       return wrapping_add(s, wrapping_mul(wrapping_mul(v, a), b));
                                     });
    }
    check(d != DType::Bool, "addcmul: not implemented for bool (\"addcmul_cpu_out\"; shapes ",
          self.shape(), ", ", t1.shape(), " and ", t2.shape(), ")");
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      const T v = detail::checked_cast<T>(value, "addcmul", /*fill=*/true);
      return ternary_kernel<T>(self, t1, t2, d, "addcmul",
                               [v](T s, T a, T b) { return std::fma(v * a, b, s); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor t1 = saved(0), t2 = saved(1);
    return {grad, t2.defined() ? grad * (t2 * value) : Tensor(),
            t1.defined() ? grad * (t1 * value) : Tensor()};
  }
};

// lerp(self, end, w) = |w| < 0.5 ? self + w (end - self) : end - (end - self) (1 - w), each
// contracted to one fma as PyTorch's kernel is. d/dself = 1 - w, d/dend = w,
// d/dw = end - self (a tensor weight).
template <typename T>
T lerp_value(T self, T end, T w) {
  const T diff = end - self;
  return std::abs(w) < T(0.5) ? std::fma(w, diff, self) : std::fma(-diff, T(1) - w, end);
}

struct Lerp : OpFunction<Lerp> {
  static constexpr const char* name = "LerpBackward1";
  static constexpr const char* formula =
      "y = a + w (b - a):  dy/da = 1 - w, dy/db = w, dy/dw = b - a";
  Tensor forward(const Tensor& self, const Tensor& end, const Tensor& weight) {
    save_for_backward({self, end, weight});
    const DType d = floating_result(self, end, weight, "lerp");
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      return ternary_kernel<T>(self, end, weight, d, "lerp",
                               [](T s, T e, T w) { return lerp_value(s, e, w); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor self = saved(0), end = saved(1), weight = saved(2);
    return {grad * (1.0 - weight), grad * weight, grad * (end - self)};
  }
};

struct LerpScalar : OpFunction<LerpScalar> {
  static constexpr const char* name = "LerpBackward0";
  static constexpr const char* formula = "y = a + w (b - a):  dy/da = 1 - w, dy/db = w";
  double weight = 0;
  Tensor forward(const Tensor& self, const Tensor& end, double weight_) {
    weight = weight_;
    const DType d = promote(self.dtype(), end.dtype());
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      const T w = detail::checked_cast<T>(weight, "lerp", /*fill=*/true);
      return ternary_kernel<T>(self, end, scalar_tensor(0, d), d, "lerp",
                               [w](T s, T e, T) { return lerp_value(s, e, w); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad * (1.0 - weight), grad * weight};
  }
};

void check_lerp(const Tensor& start, const Tensor& end, const char* op) {
  check(start.defined() && end.defined(), op, ": expected defined tensors, got an undefined one");
  check(is_floating(start.dtype()), op, ": expected a floating point tensor, got dtype ",
        dtype_name(start.dtype()));
  check(start.dtype() == end.dtype(), op, ": expected dtype ", dtype_name(start.dtype()),
        " for `end` but got dtype ", dtype_name(end.dtype()));
}

}  // namespace

// ---- public functions ----
Tensor add(const Tensor& a, const Tensor& b) { return apply<Add>(a, b, Scalar(1)); }
Tensor sub(const Tensor& a, const Tensor& b) { return apply<Sub>(a, b, Scalar(1)); }
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return apply<Add>(a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return apply<Sub>(a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return apply<Mul>(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return apply<Div>(a, b); }
Tensor add(const Tensor& a, Scalar b) { return apply<Add>(a, wrap_scalar(b, a, "add"), Scalar(1)); }
Tensor sub(const Tensor& a, Scalar b) { return apply<Sub>(a, wrap_scalar(b, a, "sub"), Scalar(1)); }
Tensor mul(const Tensor& a, Scalar b) { return apply<Mul>(a, wrap_scalar(b, a, "mul")); }
Tensor div(const Tensor& a, Scalar b) { return apply<Div>(a, wrap_scalar(b, a, "div")); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return apply<RSub>(b, wrap_scalar(a, b, "rsub")); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return mul(apply<Reciprocal>(b), a); }
Tensor operator-(const Tensor& a) { return neg(a); }

Tensor neg(const Tensor& t) { return apply<Neg>(t); }
Tensor exp(const Tensor& t) { return apply<Exp>(t); }
Tensor log(const Tensor& t) { return apply<Log>(t); }
Tensor sqrt(const Tensor& t) { return apply<Sqrt>(t); }
Tensor pow(const Tensor& t, Scalar exponent) { return apply<Pow>(t, exponent); }
Tensor abs(const Tensor& t) { return apply<Abs>(t); }

Tensor addcmul(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double value) {
  check(self.defined() && tensor1.defined() && tensor2.defined(),
        "addcmul: expected defined tensors, got an undefined one");
  return apply<Addcmul>(self, tensor1, tensor2, value);
}

// self + value * t1 / t2, rounded as PyTorch's kernel: ((value t1) / t2) + self.
Tensor addcdiv(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, double value) {
  check(is_floating(tensor1.dtype()) || is_floating(tensor2.dtype()),
        "addcdiv: integer division with addcdiv is no longer supported, and in a future release "
        "addcdiv will perform a true division of tensor1 and tensor2 (got ",
        dtype_name(tensor1.dtype()), " and ", dtype_name(tensor2.dtype()), ")");
  if (self.defined() && result_type({&self, &tensor1, &tensor2}) == DType::Float32) {
    (void)detail::checked_cast<float>(value, "addcdiv", /*fill=*/true);  // PyTorch's Scalar check
  }
  Tensor scaled = value == 1 ? tensor1 : mul(tensor1, value);
  return add(self, div(scaled, tensor2));
}

Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  check_lerp(start, end, "lerp");
  return apply<LerpScalar>(start, end, weight);
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  check_lerp(start, end, "lerp");
  check(weight.defined() && weight.dtype() == start.dtype(), "lerp: expected dtype ",
        dtype_name(start.dtype()), " for `weight` but got ",
        weight.defined() ? "dtype " + dtype_name(weight.dtype()) : "an undefined tensor");
  return apply<Lerp>(start, end, weight);
}

// ---- Tensor methods ----
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::pow(Scalar exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::neg() const { return ember::neg(*this); }

}  // namespace ember
