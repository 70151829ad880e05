// Activations: tanh, sigmoid, relu, and GELU (nn.GELU's exact and tanh forms, and the book's
// GPTGELU as one fused op). Each op is a struct with its forward and backward side by side; a
// fused op's kernel backward sits beside its formula (core/graph/function.h).
#include <cmath>
#include <numbers>
#include <string>

#include "core/graph/function.h"
#include "core/kernels/gelu.h"
#include "core/kernels/libm.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/tanh.h"
#include "core/ops/elementwise.h"
#include "core/ops/elementwise_loops.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;
using detail::floating_type;
using detail::unary_kernel;

namespace {

// finish(v, tanh(inner(v))) elementwise, in floating point. A contiguous float32 input takes
// its tanh a row at a time from kernels::tanh_row (glibc's tanhf on vectors: the same bits,
// ~6x faster); other inputs take kernels::libm::tanh, the same algorithm element by element (the
// same bits on every CPU, kernels/libm.h); each element's arithmetic is the same float
// operations either way.
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
  return unary_kernel(t, floating_type(t),
                      [&](auto v) { return finish(v, kernels::libm::tanh(inner(v))); });
}

// y = tanh x:  dy/dx = 1 - y^2
struct Tanh : OpFunction<Tanh> {
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
struct Sigmoid : OpFunction<Sigmoid> {
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
struct Relu : OpFunction<Relu> {
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

// ---------------------------------------------------------------------------------------------
// GELU
// ---------------------------------------------------------------------------------------------
//
// Exact:  y = x Phi(x),  dy/dx = Phi(x) + x phi(x)       (Phi, phi: the standard normal cdf, pdf)
// Tanh:   y = x/2 (1 + tanh u),  u = k (x + c x^3),  c = 0.044715,  k = sqrt(2/pi)
//         dy/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) k (1 + 3 c x^2)
// (core/kernels/gelu.h derives the tanh form's slope, and holds c and both roundings of k.)
// Each op's backward is dx = dy * dy/dx with the slope written in ops, so it can be
// differentiated again; its fused_backward computes the same slope element by element, in one
// pass (the tanh form: kernels::gelu_tanh_backward, from the tanh(u) the forward kept).

// Phi(v) = (1 + erf(v / sqrt 2)) / 2 and phi(v) = e^(-v^2 / 2) / sqrt(2 pi), in T.
template <typename T>
T normal_cdf(T v) {
  return T(0.5) * (T(1) + kernels::libm::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
}
template <typename T>
T normal_pdf(T v) {
  return std::exp(T(-0.5) * v * v) * static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
}

// phi(x) with ops.
Tensor normal_pdf(const Tensor& x) {
  return exp(-0.5 * x * x) * (std::numbers::inv_sqrtpi / std::numbers::sqrt2);
}

// Phi(x) as an op whose derivative phi(x) is written with ops: the exact GELU's slope in its
// backward, differentiable again.
struct NormalCdf : OpFunction<NormalCdf> {
  static constexpr const char* name = "NormalCdfBackward";
  static constexpr const char* formula =
      "y = Phi(x) = (1 + erf(x / sqrt 2)) / 2:  dy/dx = phi(x) = e^(-x^2 / 2) / sqrt(2 pi)";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return unary_kernel(x, x.dtype(), [](auto v) { return normal_cdf(v); });
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad * normal_pdf(saved(0))}; }
};

// The tanh form's slope dy/dx written with ops, for k as the op rounds it.
Tensor gelu_tanh_slope(const Tensor& x, double k) {
  const double c = kernels::kGeluTanhCubic;
  const Tensor t = tanh(k * (x + c * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * c * x * x);
}

// The tanh form through its kernels, for both GELU ops. Forward: y, and in `tanh` (if not null)
// tanh(u) for the fused backward. Fused backward: dL/dx for dL/dy = grad, from the forward's
// `tanh` (with the book composite's roundings when `book_chain`).
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

// nn.GELU: the exact form, or the tanh form with PyTorch's k.
struct Gelu : OpFunction<Gelu> {
  static constexpr const char* name = "GeluBackward0";
  static constexpr const char* formula =
      "y = x Phi(x):  dy/dx = Phi(x) + x phi(x)  (tanh form: y = x/2 (1 + tanh u), u = sqrt(2/pi) "
      "(x + 0.044715 x^3))";
  bool tanh_approximation = false;

  Tensor forward(const Tensor& x, bool use_tanh) {
    tanh_approximation = use_tanh;
    if (use_tanh) {  // keeps tanh(u) for the fused backward (saved(1)) when recorded
      Tensor t;
      Tensor y = gelu_tanh_forward(x, kernels::sqrt_2_over_pi(), recording_ ? &t : nullptr);
      save_for_backward({x, t});
      return y;
    }
    save_for_backward({x});
    return unary_kernel(x, floating_type(x), [](auto v) {
      using T = decltype(v);
      return v * T(0.5) * (T(1) + kernels::libm::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
    });
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor x = saved(0);
    if (tanh_approximation) return {grad * gelu_tanh_slope(x, kernels::sqrt_2_over_pi())};
    return {grad * (apply<NormalCdf>(x) + x * normal_pdf(x))};
  }
  // The slope element by element: the tanh form's kernel (kSlope: the formula as written above),
  // or Phi(x) + x phi(x) in one pass.
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    const Tensor x = saved(0);
    if (tanh_approximation) {
      return {gelu_tanh_backward(x, saved(1), kernels::sqrt_2_over_pi(), grad,
                                 /*book_chain=*/false)};
    }
    const Tensor slope =
        unary_kernel(x, x.dtype(), [](auto v) { return normal_cdf(v) + v * normal_pdf(v); });
    return {grad * slope};
  }
};

// The book's GELU (nn::GPTGELU) as one op:
//   0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))))
// with k = kernels::book_sqrt_2_over_pi(), sqrt(2 / pi) as the book computes it: read at the
// forward (it depends on the default dtype then) and kept for the backward. The forward has
// the composite's bits; so has the fused backward (kernels::GeluBackward::kBookChain replays the
// composite's backward nodes).
struct GptGelu : OpFunction<GptGelu> {
  static constexpr const char* name = "GptGeluBackward0";
  static constexpr const char* formula =
      "y = x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3):  dy/dx = (1 + tanh u)/2 + x/2 (1 "
      "- tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)";
  // Recorded for a backward, the forward keeps tanh(u) (saved(1)), as the composite's
  // TanhBackward0 keeps its output: the fused backward computes no tanh (computing it again
  // was about a twentieth of the small GPT config's training step).
  double k = 0;
  Tensor forward(const Tensor& x) {
    k = kernels::book_sqrt_2_over_pi();
    Tensor t;
    Tensor y = gelu_tanh_forward(x, k, recording_ ? &t : nullptr);
    save_for_backward({x, t});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad * gelu_tanh_slope(saved(0), k)}; }
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    return {gelu_tanh_backward(saved(0), saved(1), k, grad, /*book_chain=*/true)};
  }
};

}  // namespace

Tensor tanh(const Tensor& t) { return apply<Tanh>(t); }
Tensor sigmoid(const Tensor& t) { return apply<Sigmoid>(t); }
Tensor relu(const Tensor& t) {
  // torch.relu(torch.tensor([True])): Boolean inputs not supported for relu (int64 is fine).
  detail::check_defined(t, "relu");
  check(t.dtype() != DType::Bool, "relu: Boolean inputs not supported for relu (shape ", t.shape(),
        ")");
  return apply<Relu>(t);
}
Tensor gelu(const Tensor& t, const std::string& approximate) {
  check(approximate == "none" || approximate == "tanh",
        "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  // PyTorch's GELU kernel takes floating point tensors only ("GeluKernelImpl" not implemented
  // for 'Long' or 'Bool'); the book's composite GELU (gpt_gelu) computes an integer one in
  // float32 as its ops do.
  detail::check_defined(t, "gelu");
  check(is_floating(t.dtype()), "gelu: not implemented for ", dtype_name(t.dtype()),
        " (\"GeluKernelImpl\" takes floating point tensors; shape ", t.shape(), ")");
  return apply<Gelu>(t, approximate == "tanh");
}

Tensor gpt_gelu(const Tensor& x) {
  detail::check_defined(x, "gpt_gelu");
  return apply<GptGelu>(x);
}

}  // namespace ember
