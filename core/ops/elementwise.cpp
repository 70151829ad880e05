// Elementwise ops. Each op is a struct with its forward and backward side by side; the
// broadcasting of the forward is undone by the engine (with sum_to, core/ops/reduce.cpp), so a
// backward here returns gradients of the broadcast (output) shape.
#include "core/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "core/graph/function.h"
#include "core/kernels/gelu.h"
#include "core/kernels/iterate.h"
#include "core/kernels/tanh.h"
#include "core/tensor/overlap.h"

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
    // A 0-d operand of a higher category (float vs. integer) gives its own dtype: a wrapped
    // Python float is a float32 0-d tensor here (wrap_scalar), a float64 0-d tensor stays float64.
    return small.dtype();
  }
  return promote(a.dtype(), b.dtype());
}

// int64 arithmetic wraps around on overflow as PyTorch's does (two's complement), computed in
// uint64 where wrapping is defined instead of signed overflow (undefined behaviour).
template <typename T>
T wrapping_add(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  } else {
    return x + y;
  }
}
template <typename T>
T wrapping_sub(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  } else {
    return x - y;
  }
}
template <typename T>
T wrapping_mul(T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  } else if constexpr (std::is_same_v<T, bool>) {
    return x && y;
  } else {
    return x * y;
  }
}
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

// The loops of out = f(a, b) over the broadcast shape, computing in T (a and b converted to T's
// dtype first) and writing R (T, or bool for comparisons).
template <typename T, typename R, typename F>
Tensor binary_loops(const Tensor& a, const Tensor& b, const char* op, F f) {
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor x = a.to(dtype_of<T>()), y = b.to(dtype_of<T>());
  // binary_map writes every element of `out` (or throws, and `out` is never seen).
  Tensor out = detail::empty_for_overwrite(shape, dtype_of<R>());
  Shape xs = broadcast_strides(x.shape(), x.strides(), shape);
  Shape ys = broadcast_strides(y.shape(), y.strides(), shape);
  kernels::binary_map(out.data_ptr<R>(), x.data_ptr<T>(), xs, y.data_ptr<T>(), ys, shape,
                      [&](T u, T v) { return static_cast<R>(f(u, v)); });
  return out;
}

// out = f(a, b) in dtype `compute`, with a result of the same dtype. (One instantiation of the
// loops per dtype: the C++ type of the result is the compute type, never a second dispatch.)
template <typename F>
Tensor binary_kernel(const Tensor& a, const Tensor& b, DType compute, const char* op, F f) {
  return dispatch(compute, [&](auto tag) {
    using T = decltype(tag);
    return binary_loops<T, T>(a, b, op, f);
  });
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
  Tensor out = detail::empty_for_overwrite(x.shape(), compute);  // unary_map writes it all
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
// A float32 scalar is rounded like PyTorch's (1e300 becomes inf, no error: only fill checks).
Tensor wrap_scalar(Scalar scalar, const Tensor& like, const char* op = "scalar op") {
  detail::check_defined(like, op);
  DType d = like.dtype();
  if (!scalar.is_integral() && !is_floating(d)) d = kDefaultDType;
  if (d == DType::Bool) d = DType::Int64;
  if (d == DType::Int64) {  // exact, also beyond 2^53
    Tensor t = empty({}, d);
    *t.data_ptr<int64_t>() = scalar.to_int64();
    return t;
  }
  const double value = scalar.to_double();
  if (d == DType::Float32) {
    Tensor t = empty({}, d);
    *t.data_ptr<float>() = static_cast<float>(value);
    return t;
  }
  return scalar_tensor(value, d);
}

// ---------------------------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------------------------

// torch.add(a, b, alpha=...) for integer results takes an integer alpha only.
void check_alpha(DType t, Scalar alpha, const char* op) {
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
struct Add : Function<Add> {
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
      const T al =
          std::is_same_v<T, int64_t> ? static_cast<T>(alpha_.to_int64()) : static_cast<T>(alpha);
      return binary_loops<T, T>(a, b, "add",
                                [al](auto x, auto y) { return add_scaled<T>(x, y, al); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad, alpha == 1 ? grad : grad * alpha};
  }
};

// c = a - alpha b:  dc/da = 1, dc/db = -alpha  (PyTorch: a + (-alpha) b)
struct Sub : Function<Sub> {
  static constexpr const char* name = "SubBackward0";
  static constexpr const char* formula = "c = a - alpha b:  dc/da = 1, dc/db = -alpha";
  double alpha = 1;
  Tensor forward(const Tensor& a, const Tensor& b, Scalar alpha_) {
    alpha = alpha_.to_double();
    DType t = result_type(a, b);
    check(t != DType::Bool,
          "sub: subtraction, the `-` operator, with a bool tensor is not supported. If you are "
          "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    check_alpha(t, alpha_, "sub");
    if (alpha == 1)
      return binary_kernel(a, b, t, "sub", [](auto x, auto y) { return wrapping_sub(x, y); });
    return dispatch(t, [&](auto tag) {
      using T = decltype(tag);
      const T al = std::is_same_v<T, int64_t>
                       ? static_cast<T>(wrapping_sub(int64_t{0}, alpha_.to_int64()))
                       : static_cast<T>(-alpha);
      return binary_loops<T, T>(a, b, "sub",
                                [al](auto x, auto y) { return add_scaled<T>(x, y, al); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad, alpha == 1 ? neg(grad) : grad * -alpha};
  }
};

// c = a * b:  dc/da = b, dc/db = a
struct Mul : Function<Mul> {
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
struct Div : Function<Div> {
  static constexpr const char* name = "DivBackward0";
  static constexpr const char* formula = "c = a / b:  dc/da = 1 / b, dc/db = -a / b^2";
  Tensor forward(const Tensor& a, const Tensor& b) {
    save_for_backward({a, b});
    DType t = result_type(a, b);
    if (!is_floating(t)) t = kDefaultDType;  // true division, as torch.div
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
struct RSub : Function<RSub> {
  static constexpr const char* name = "RsubBackward1";
  static constexpr const char* formula = "c = s - t:  dc/dt = -1";
  Tensor forward(const Tensor& t, const Tensor& scalar) {
    DType d = result_type(t, scalar);
    return binary_kernel(scalar, t, d, "rsub", [](auto x, auto y) { return wrapping_sub(x, y); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {neg(grad), Tensor()}; }
};

// ---------------------------------------------------------------------------------------------
// Unary math
// ---------------------------------------------------------------------------------------------

// y = -x:  dy/dx = -1
struct Neg : Function<Neg> {
  static constexpr const char* name = "NegBackward0";
  static constexpr const char* formula = "y = -x:  dy/dx = -1";
  Tensor forward(const Tensor& x) {
    check(x.dtype() != DType::Bool, "neg: negation of a bool tensor is not supported; use ~");
    return unary_kernel(x, x.dtype(), [](auto v) { return wrapping_sub(decltype(v)(0), v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {neg(grad)}; }
};

// y = e^x:  dy/dx = e^x = y
struct Exp : Function<Exp> {
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
struct Log : Function<Log> {
  static constexpr const char* name = "LogBackward0";
  static constexpr const char* formula = "y = ln x:  dy/dx = 1 / x";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return unary_kernel(x, floating_type(x), [](auto v) { return std::log(v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad / saved(0)}; }
};

// y = sqrt(x):  dy/dx = 1 / (2 y)
struct Sqrt : Function<Sqrt> {
  static constexpr const char* name = "SqrtBackward0";
  static constexpr const char* formula = "y = sqrt(x):  dy/dx = 1 / (2 y)";
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
  static constexpr bool has_constant_gradients = true;  // x^0: zero gradient
  static constexpr const char* formula = "y = x^p:  dy/dx = p x^(p-1)";
  double exponent = 1;
  Tensor forward(const Tensor& x, Scalar exponent_) {
    const double p = exponent_.to_double();
    exponent = p;
    save_for_backward({x});
    // An integer tensor stays integer for an integer exponent (torch.arange(3) ** 2 is int64,
    // ** 2.0 is float32); a negative integer power of integers is refused, as in PyTorch.
    check(is_floating(x.dtype()) || !exponent_.is_integral() || p >= 0,
          "pow: Integers to negative integer powers are not allowed (exponent ", p, ", dtype ",
          dtype_name(x.dtype()), ")");
    DType d = is_floating(x.dtype()) || !exponent_.is_integral() ? floating_type(x) : x.dtype();
    if (d == DType::Int64) {
      // A whole exponent >= 0 (else d is floating): exact and wrapping, never through double.
      const auto e = static_cast<uint64_t>(p);
      check(p < 18446744073709551616.0, "pow: exponent ", p, " is too large for an int64 base");
      return unary_kernel(x, d, [e](auto v) { return wrapping_pow(static_cast<int64_t>(v), e); });
    }
    // PyTorch's special cases (pow_tensor_scalar_optimized_kernel): x^2 and x^3 are products in
    // the element type (the book's GELU cubes x), not std::pow in double, which could round
    // x^3 differently (and is much slower).
    if (p == 2.0) return unary_kernel(x, d, [](auto v) { return v * v; });
    if (p == 3.0) return unary_kernel(x, d, [](auto v) { return v * v * v; });
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

// finish(v, tanh(inner(v))) elementwise, in floating point. A contiguous float32 input takes
// its tanh a row at a time from kernels::tanh_row (glibc's tanhf on vector registers: the same
// bits, ~6x faster); each element's arithmetic is the same float operations either way.
template <typename Inner, typename Finish>
Tensor map_with_tanh(const Tensor& t, Inner inner, Finish finish) {
  if (t.defined() && t.dtype() == DType::Float32 && t.is_contiguous()) {
    Tensor out = empty(t.shape(), DType::Float32);
    const float* x = t.data_ptr<float>();
    float* y = out.data_ptr<float>();
    const int64_t n = out.numel();
    kernels::parallel_ranges(n, n, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) y[i] = inner(x[i]);
      kernels::tanh_row(y + first, y + first, last - first);
      for (int64_t i = first; i < last; ++i) y[i] = finish(x[i], y[i]);
    });
    return out;
  }
  return unary_kernel(t, floating_type(t), [&](auto v) { return finish(v, std::tanh(inner(v))); });
}

// y = tanh x:  dy/dx = 1 - y^2
struct Tanh : Function<Tanh> {
  static constexpr const char* name = "TanhBackward0";
  static constexpr const char* formula = "y = tanh x:  dy/dx = 1 - y^2";
  Tensor forward(const Tensor& x) {
    Tensor y = map_with_tanh(
        x, [](auto v) { return v; }, [](auto, auto t) { return t; });
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
  static constexpr const char* formula = "y = 1 / (1 + e^-x):  dy/dx = y (1 - y)";
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

// y = max(x, 0) as PyTorch's clamp_min (std::max(x, 0): -0.0 and NaN stay as they are):
// dy/dx = 0 where y <= 0, else 1, so a NaN passes its gradient (PyTorch's threshold_backward).
struct Relu : Function<Relu> {
  static constexpr const char* name = "ReluBackward0";
  static constexpr const char* formula = "y = max(x, 0):  dy/dx = 1 where y > 0, else 0";
  Tensor forward(const Tensor& x) {
    Tensor y = unary_kernel(x, x.dtype(), [](auto v) { return v < 0 ? decltype(v)(0) : v; });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad * (1.0 - le(saved(0), 0.0).to(grad.dtype()))};
  }
};

// The tanh GELU through its kernels, for both GELU ops. Forward: y, and in `tanh` (if not null)
// tanh(u) for the backward. Backward: dL/dx for dL/dy = grad, from the forward's `tanh` (with the
// book composite's roundings when `book_chain`). k is sqrt(2/pi) as the caller rounds it.
Tensor gelu_tanh_forward(const Tensor& x, double k, Tensor* tanh) {
  // Integer inputs compute in float32, as every math function here.
  const Tensor input = x.to(floating_type(x)).contiguous();
  Tensor out = detail::empty_for_overwrite(input.shape(), input.dtype());
  if (tanh != nullptr) *tanh = detail::empty_for_overwrite(input.shape(), input.dtype());
  dispatch_floating(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::gelu_tanh_forward<T>(input.data_ptr<T>(), out.data_ptr<T>(), input.numel(),
                                  static_cast<T>(k),
                                  tanh != nullptr ? tanh->data_ptr<T>() : nullptr);
  });
  return out;
}

Tensor gelu_tanh_backward(const Tensor& x, const Tensor& tanh, double k, const Tensor& grad,
                          bool book_chain) {
  const Tensor input = x.to(floating_type(x)).contiguous();
  Tensor out = detail::empty_for_overwrite(input.shape(), input.dtype());
  const Tensor dy = grad.to(input.dtype()).expand(input.shape()).contiguous();
  dispatch_floating(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::gelu_tanh_backward<T>(
        input.data_ptr<T>(), tanh.data_ptr<T>(), dy.data_ptr<T>(), out.data_ptr<T>(), input.numel(),
        static_cast<T>(k),
        book_chain ? kernels::GeluBackward::kBookChain : kernels::GeluBackward::kSlope);
  });
  return out;
}

// The book's GELU (nn::GPTGELU) as one op:
//   0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))))
// with sqrt(2 / pi) as the book computes it, torch.sqrt(torch.tensor(2.0 / torch.pi)): 2/pi
// rounded to float32 first, then its square root rounded again (0.7978845, one ulp below
// gelu(approximate='tanh')'s 0.7978846). The forward has the composite's bits; so has the
// backward (kernels::GeluBackward::kBookChain replays the composite's backward nodes).
struct GptGelu : Function<GptGelu> {
  static constexpr const char* name = "GptGeluBackward0";
  static constexpr const char* formula =
      "y = x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3):  dy/dx = (1 + tanh u)/2 + x/2 (1 "
      "- tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)";
  static double book_sqrt_2_over_pi() {
    return std::sqrt(static_cast<float>(2.0 / std::numbers::pi));
  }
  // Recorded for a backward, the forward keeps tanh(u) (saved(1)), as the composite's
  // TanhBackward0 keeps its output: the backward computes no tanh (computing it again was about
  // a twentieth of the small GPT config's training step).
  Tensor forward(const Tensor& x) {
    Tensor t;
    Tensor y = gelu_tanh_forward(x, book_sqrt_2_over_pi(), recording_ ? &t : nullptr);
    save_for_backward({x, t});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    if (GradMode::is_enabled()) {  // create_graph: the slope written with ops, recorded
      const Tensor x = saved(0);
      const double k = book_sqrt_2_over_pi(), a = 0.044715;
      const Tensor t = tanh(k * (x + a * x * x * x));
      return {grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * a * x * x))};
    }
    return {gelu_tanh_backward(saved(0), saved(1), book_sqrt_2_over_pi(), grad,
                               /*book_chain=*/true)};
  }
};

// Exact:  y = x Phi(x),  dy/dx = Phi(x) + x phi(x)   (Phi, phi: the standard normal cdf, pdf)
// Tanh:   y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
//         dy/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// The tanh form runs kernels::gelu_tanh_forward / gelu_tanh_backward (core/kernels/gelu.h): one
// pass each, dx = dy * dy/dx computed element by element.
struct Gelu : Function<Gelu> {
  static constexpr const char* name = "GeluBackward0";
  static constexpr const char* formula =
      "y = x Phi(x):  dy/dx = Phi(x) + x phi(x)  (tanh form: y = x/2 (1 + tanh u), u = sqrt(2/pi) "
      "(x + 0.044715 x^3))";
  bool tanh_approximation = false;

  Tensor forward(const Tensor& x, bool use_tanh) {
    tanh_approximation = use_tanh;
    if (use_tanh) {  // keeps tanh(u) for the backward (saved(1)) when recorded, as GptGelu
      Tensor t;
      Tensor y = gelu_tanh_forward(x, sqrt_2_over_pi(), recording_ ? &t : nullptr);
      save_for_backward({x, t});
      return y;
    }
    save_for_backward({x});
    return unary_kernel(x, floating_type(x), [](auto v) {
      using T = decltype(v);
      return v * T(0.5) * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0);
    if (GradMode::is_enabled()) return {grad * slope_from_ops(x)};  // create_graph
    if (tanh_approximation) {
      return {gelu_tanh_backward(x, saved(1), sqrt_2_over_pi(), grad, /*book_chain=*/false)};
    }
    Tensor slope = unary_kernel(x, x.dtype(), [](auto v) {
      using T = decltype(v);
      T cdf = T(0.5) * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
      T pdf = std::exp(T(-0.5) * v * v) *
              static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
      return cdf + v * pdf;
    });
    return {grad * slope};
  }
  // sqrt(2/pi), rounded once to the element type: PyTorch's kBeta.
  static double sqrt_2_over_pi() { return std::sqrt(2.0 / std::numbers::pi); }
  static constexpr double kAlpha = 0.044715;
  // The same slope written with ops (under create_graph, so it can be differentiated again):
  // Phi(x) is NormalCdf below, whose own derivative phi(x) is written with ops.
  Tensor slope_from_ops(const Tensor& x) const {
    if (tanh_approximation) {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      Tensor t = tanh(k * (x + kAlpha * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * kAlpha * x * x);
    }
    return apply<NormalCdf>(x) + x * normal_pdf(x);
  }
  // phi(x) = e^(-x^2 / 2) / sqrt(2 pi)
  static Tensor normal_pdf(const Tensor& x) {
    return exp(-0.5 * x * x) * (std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  }
  // Phi(x) = (1 + erf(x / sqrt 2)) / 2, dPhi/dx = phi(x): used only by create_graph backwards.
  struct NormalCdf : Function<NormalCdf> {
    static constexpr const char* name = "NormalCdfBackward";
    static constexpr const char* formula =
        "y = Phi(x) = (1 + erf(x / sqrt 2)) / 2:  dy/dx = phi(x) = e^(-x^2 / 2) / sqrt(2 pi)";
    Tensor forward(const Tensor& x) {
      save_for_backward({x});
      return unary_kernel(x, x.dtype(), [](auto v) {
        using T = decltype(v);
        return T(0.5) * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
      });
    }
    std::vector<Tensor> backward(const Tensor& grad) { return {grad * normal_pdf(saved(0))}; }
  };
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
  static constexpr const char* formula = "out = c ? a : b:  d/da = c, d/db = !c";
  Tensor forward(const Tensor& condition, const Tensor& a, const Tensor& b) {
    save_for_backward({condition});
    return where_kernel(condition, a, b, "where");
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor c = saved(0);
    Tensor zero = zeros({}, grad.dtype());
    if (GradMode::is_enabled()) {  // create_graph: the same selections, recorded
      return {Tensor(), apply<Where>(c, grad, zero), apply<Where>(c, zero, grad)};
    }
    return {Tensor(), where_kernel(c, grad, zero, "where"), where_kernel(c, zero, grad, "where")};
  }
};

// maximum(a, b): the gradient goes to the larger input, split in half on ties (as PyTorch).
// `take_max` false gives minimum.
struct MaxMin : Function<MaxMin> {
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
struct Clamp : Function<Clamp> {
  static constexpr const char* name = "ClampBackward1";
  static constexpr const char* formula =
      "y = min(max(x, lo), hi):  dy/dx = 1 where lo <= x <= hi, else 0";
  std::optional<double> lo, hi;
  Tensor forward(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
    check(min.has_value() || max.has_value(),
          "clamp: at least one of 'min' or 'max' must not be None (input shape ", x.shape(), ")");
    check(x.dtype() != DType::Bool, "clamp: not implemented for bool tensors (input shape ",
          x.shape(), ")");
    if (min) lo = min->to_double();
    if (max) hi = max->to_double();
    save_for_backward({x});
    auto whole = [](const std::optional<Scalar>& v) { return !v || v->is_integral(); };
    DType d = is_floating(x.dtype()) || (whole(min) && whole(max)) ? x.dtype() : kDefaultDType;
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
      const T l = lo ? static_cast<T>(*lo) : T(0), h = hi ? static_cast<T>(*hi) : T(0);
      const bool has_l = min.has_value(), has_h = max.has_value();
      return unary_kernel(x, d, [=](T v) {
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

// out = f(a, b, c) over the broadcast shape, in floating dtype d.
template <typename F>
Tensor ternary_kernel(const Tensor& a, const Tensor& b, const Tensor& c, DType d, const char* op,
                      F f) {
  Shape shape = broadcast_shapes(broadcast_shapes(a.shape(), b.shape(), op), c.shape(), op);
  Tensor x = a.to(d).expand(shape), y = b.to(d).expand(shape), z = c.to(d).expand(shape);
  Tensor out = empty(shape, d);
  dispatch_floating(d, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    const T* yp = y.data_ptr<T>();
    const T* zp = z.data_ptr<T>();
    Shape os = contiguous_strides(shape);
    kernels::for_each_row<4>(shape, {&os, &x.strides(), &y.strides(), &z.strides()},
                             [&](auto off, int64_t n, auto step) {
                               for (int64_t i = 0; i < n; ++i)
                                 o[off[0] + i * step[0]] =
                                     f(xp[off[1] + i * step[1]], yp[off[2] + i * step[2]],
                                       zp[off[3] + i * step[3]]);
                             });
  });
  return out;
}

DType floating_result(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  DType d = promote(promote(a.dtype(), b.dtype()), c.dtype());
  check(is_floating(d), op, ": expected floating point tensors, got ", dtype_name(a.dtype()), ", ",
        dtype_name(b.dtype()), " and ", dtype_name(c.dtype()));
  return d;
}

// out = self + value t1 t2, rounded as PyTorch's kernel: fma(value t1, t2, self).
// d/dself = 1, d/dt1 = value t2, d/dt2 = value t1.
struct Addcmul : Function<Addcmul> {
  static constexpr const char* name = "AddcmulBackward0";
  static constexpr const char* formula =
      "y = self + v t1 t2:  d/dself = 1, d/dt1 = v t2, d/dt2 = v t1";
  double value = 1;
  Tensor forward(const Tensor& self, const Tensor& t1, const Tensor& t2, double value_) {
    value = value_;
    save_for_backward({self.requires_grad() || t2.requires_grad() ? t1 : Tensor(),
                       self.requires_grad() || t1.requires_grad() ? t2 : Tensor()});
    const DType d = floating_result(self, t1, t2, "addcmul");
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      const T v = static_cast<T>(value);
      return ternary_kernel(self, t1, t2, d, "addcmul",
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

struct Lerp : Function<Lerp> {
  static constexpr const char* name = "LerpBackward1";
  static constexpr const char* formula =
      "y = a + w (b - a):  dy/da = 1 - w, dy/db = w, dy/dw = b - a";
  Tensor forward(const Tensor& self, const Tensor& end, const Tensor& weight) {
    save_for_backward({self, end, weight});
    const DType d = floating_result(self, end, weight, "lerp");
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      return ternary_kernel(self, end, weight, d, "lerp",
                            [](T s, T e, T w) { return lerp_value(s, e, w); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor self = saved(0), end = saved(1), weight = saved(2);
    return {grad * (1.0 - weight), grad * weight, grad * (end - self)};
  }
};

struct LerpScalar : Function<LerpScalar> {
  static constexpr const char* name = "LerpBackward0";
  static constexpr const char* formula = "y = a + w (b - a):  dy/da = 1 - w, dy/db = w";
  double weight = 0;
  Tensor forward(const Tensor& self, const Tensor& end, double weight_) {
    weight = weight_;
    const DType d = promote(self.dtype(), end.dtype());
    return dispatch_floating(d, [&](auto tag) {
      using T = decltype(tag);
      const T w = static_cast<T>(weight);
      return ternary_kernel(self, end, scalar_tensor(0, d), d, "lerp",
                            [w](T s, T e, T) { return lerp_value(s, e, w); });
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad * (1.0 - weight), grad * weight};
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
struct MaskedFill : Function<MaskedFill> {
  static constexpr const char* name = "MaskedFillBackward0";
  static constexpr const char* formula = "y = mask ? value : x:  dy/dx = !mask";
  Tensor forward(const Tensor& x, const Tensor& mask, double value) {
    check_mask(x, mask, "masked_fill");
    save_for_backward({mask});
    return where_kernel(mask, scalar_tensor(value, x.dtype()), x, "masked_fill");
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    // (Under create_graph the same fill of the gradient, recorded: its derivative is itself.)
    if (GradMode::is_enabled()) return {apply<MaskedFill>(grad, saved(0), 0.0), Tensor()};
    return {where_kernel(saved(0), zeros({}, grad.dtype()), grad, "masked_fill"), Tensor()};
  }
};

Tensor compare(const Tensor& a, const Tensor& b, const char* op, int which) {
  DType d = result_type(a, b);
  NoGradGuard no_grad;
  return dispatch(d, [&](auto tag) {
    using T = decltype(tag);
    return binary_loops<T, bool>(a, b, op, [which](T x, T y) {
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

// PyTorch's canCast: no float to an integer, nothing but bool to bool.
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

// PyTorch's scalar type names, as its error messages print them.
const char* torch_type_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "Bool";
    case DType::Int64:
      return "Long";
    case DType::Float32:
      return "Float";
    case DType::Float64:
      return "Double";
  }
  return "?";
}

// The common path of every in-place op: the checks PyTorch makes, then the out-of-place result
// written into self.
template <typename Compute>
Tensor& in_place(Tensor& self, const std::vector<Tensor>& inputs, const char* op,
                 Compute&& compute) {
  detail::check_defined(self, op);
  for (const Tensor& in : inputs) detail::check_defined(in, op);
  detail::check_inplace(self, op);
  for (const Tensor& in : inputs) assert_no_partial_overlap(self, in, op);
  // In a graph, the op reads a copy of self's old values: its backward may have saved them
  // (clamp_, lerp_, mul_ by a tensor that requires grad), and self is about to be overwritten.
  Tensor result = compute(GradMode::is_enabled() && self.requires_grad() ? self.clone() : self);
  check(can_cast(result.dtype(), self.dtype()), op, ": result type ",
        torch_type_name(result.dtype()), " can't be cast to the desired output type ",
        torch_type_name(self.dtype()));
  return write_in_place(self, result.to(self.dtype()), op);
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
Tensor operator/(Scalar a, const Tensor& b) { return div(wrap_scalar(a, b, "div"), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

Tensor neg(const Tensor& t) { return apply<Neg>(t); }
Tensor exp(const Tensor& t) { return apply<Exp>(t); }
Tensor log(const Tensor& t) { return apply<Log>(t); }
Tensor sqrt(const Tensor& t) { return apply<Sqrt>(t); }
Tensor pow(const Tensor& t, Scalar exponent) { return apply<Pow>(t, exponent); }
Tensor abs(const Tensor& t) { return apply<Abs>(t); }
Tensor tanh(const Tensor& t) { return apply<Tanh>(t); }
Tensor sigmoid(const Tensor& t) { return apply<Sigmoid>(t); }
Tensor relu(const Tensor& t) { return apply<Relu>(t); }
Tensor gelu(const Tensor& t, const std::string& approximate) {
  check(approximate == "none" || approximate == "tanh",
        "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return apply<Gelu>(t, approximate == "tanh");
}

Tensor gpt_gelu(const Tensor& x) {
  detail::check_defined(x, "gpt_gelu");
  return apply<GptGelu>(x);
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
  check(t.defined() && mask.defined(),
        "masked_fill_: expected defined tensors, got an undefined one");
  detail::check_inplace(t, "masked_fill_");
  assert_no_partial_overlap(t, mask, "masked_fill_");
  return write_in_place(t, masked_fill(t, mask, value), "masked_fill_");
}

Tensor clamp(const Tensor& t, std::optional<Scalar> min, std::optional<Scalar> max) {
  return apply<Clamp>(t, min, max);
}

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
  Tensor scaled = value == 1 ? tensor1 : mul(tensor1, value);
  return add(self, div(scaled, tensor2));
}

namespace {
void check_lerp(const Tensor& start, const Tensor& end, const char* op) {
  check(start.defined() && end.defined(), op, ": expected defined tensors, got an undefined one");
  check(is_floating(start.dtype()), op, ": expected a floating point tensor, got dtype ",
        dtype_name(start.dtype()));
  check(start.dtype() == end.dtype(), op, ": expected dtype ", dtype_name(start.dtype()),
        " for `end` but got dtype ", dtype_name(end.dtype()));
}
}  // namespace

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

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", 0); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", 1); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", 2); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", 3); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", 4); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", 5); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, wrap_scalar(b, a, "eq")); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, wrap_scalar(b, a, "ne")); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, wrap_scalar(b, a, "lt")); }
Tensor le(const Tensor& a, Scalar b) { return le(a, wrap_scalar(b, a, "le")); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, wrap_scalar(b, a, "gt")); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, wrap_scalar(b, a, "ge")); }

// ---- Tensor methods ----
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::pow(Scalar exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return ember::masked_fill(*this, mask, value);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return ember::masked_fill_(*this, mask, value);
}

// ---- in-place arithmetic (libtorch's signatures) ----
// Each computes its result out of place (recorded by autograd), checks that the result type can
// be cast to self's dtype and that no input partially overlaps self (PyTorch's rules), then
// writes it into self, whose history is rebased onto the op.
Tensor& Tensor::add_(const Tensor& other, Scalar alpha) {
  return in_place(*this, {other}, "add_",
                  [&](const Tensor& s) { return ember::add(s, other, alpha); });
}
Tensor& Tensor::add_(Scalar other, Scalar alpha) {
  return in_place(*this, {}, "add_",
                  [&](const Tensor& s) { return ember::add(s, wrap_scalar(other, s), alpha); });
}
Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) {
  return in_place(*this, {other}, "sub_",
                  [&](const Tensor& s) { return ember::sub(s, other, alpha); });
}
Tensor& Tensor::sub_(Scalar other, Scalar alpha) {
  return in_place(*this, {}, "sub_",
                  [&](const Tensor& s) { return ember::sub(s, wrap_scalar(other, s), alpha); });
}
Tensor& Tensor::mul_(const Tensor& other) {
  return in_place(*this, {other}, "mul_", [&](const Tensor& s) { return ember::mul(s, other); });
}
Tensor& Tensor::mul_(Scalar factor) {
  return in_place(*this, {}, "mul_", [&](const Tensor& s) { return ember::mul(s, factor); });
}
Tensor& Tensor::div_(const Tensor& other) {
  return in_place(*this, {other}, "div_", [&](const Tensor& s) { return ember::div(s, other); });
}
Tensor& Tensor::div_(Scalar divisor) {
  return in_place(*this, {}, "div_", [&](const Tensor& s) { return ember::div(s, divisor); });
}
Tensor& Tensor::addcmul_(const Tensor& tensor1, const Tensor& tensor2, double value) {
  return in_place(*this, {tensor1, tensor2}, "addcmul_",
                  [&](const Tensor& s) { return ember::addcmul(s, tensor1, tensor2, value); });
}
Tensor& Tensor::addcdiv_(const Tensor& tensor1, const Tensor& tensor2, double value) {
  return in_place(*this, {tensor1, tensor2}, "addcdiv_",
                  [&](const Tensor& s) { return ember::addcdiv(s, tensor1, tensor2, value); });
}
Tensor& Tensor::lerp_(const Tensor& end, double weight) {
  return in_place(*this, {end}, "lerp_",
                  [&](const Tensor& s) { return ember::lerp(s, end, weight); });
}
Tensor& Tensor::lerp_(const Tensor& end, const Tensor& weight) {
  return in_place(*this, {end, weight}, "lerp_",
                  [&](const Tensor& s) { return ember::lerp(s, end, weight); });
}
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  return in_place(*this, {}, "clamp_", [&](const Tensor& s) { return ember::clamp(s, min, max); });
}
Tensor& Tensor::sqrt_() {
  return in_place(*this, {}, "sqrt_", [&](const Tensor& s) { return ember::sqrt(s); });
}
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ember::clamp(*this, min, max);
}

}  // namespace ember
