// softmax and log_softmax along one dim. The forward is one fused loop per row
// (kernels::softmax in core/kernels/reduce.h); the backward is composed of tensor ops.
#include "core/ops/softmax.h"

#include "core/autograd/function.h"
#include "core/kernels/masked_softmax.h"
#include "core/kernels/reduce.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace ember {

namespace {

// Runs the kernel on x read as [outer, size of dim, inner] (contiguous; copied if it is not).
Tensor softmax_kernel(const Tensor& x, int64_t dim, bool log) {
  kernels::ReduceShape s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) s.outer = mul_wrap(s.outer, x.shape()[d]);
    if (d == dim) s.reduced = x.shape()[d];
    if (d > dim) s.inner = mul_wrap(s.inner, x.shape()[d]);
  }
  Tensor input = x.contiguous();
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::softmax(input.data_ptr<T>(), out.data_ptr<T>(), s, log);
  });
  return out;
}

// y = softmax(x) along dim: y_j = exp(x_j) / sum_k exp(x_k).
// dy_j/dx_i = y_j (delta_ij - y_i), so dx_i = sum_j g_j y_j (delta_ij - y_i)
//                                           = y_i (g_i - sum_j g_j y_j).
struct Softmax : autograd::Function<Softmax> {
  static constexpr const char* name = "SoftmaxBackward0";
  int64_t dim = 0;
  Tensor forward(const Tensor& x, int64_t wrapped_dim) {
    dim = wrapped_dim;
    Tensor y = softmax_kernel(x, dim, /*log=*/false);
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor y = saved(0);
    return {y * (grad - sum(grad * y, {dim}, /*keepdim=*/true))};
  }
};

// y = log_softmax(x) along dim: y_j = x_j - log sum_k exp(x_k).
// dy_j/dx_i = delta_ij - softmax_i, so dx_i = g_i - exp(y_i) sum_j g_j.
struct LogSoftmax : autograd::Function<LogSoftmax> {
  static constexpr const char* name = "LogSoftmaxBackward0";
  int64_t dim = 0;
  Tensor forward(const Tensor& x, int64_t wrapped_dim) {
    dim = wrapped_dim;
    Tensor y = softmax_kernel(x, dim, /*log=*/true);
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor y = saved(0);
    return {grad - exp(y) * sum(grad, {dim}, /*keepdim=*/true)};
  }
};

// The mask travels as a non-tensor argument: it is not an input of the graph (no gradient).
struct Mask {
  Tensor t;
};

// y = softmax((x masked with -inf) / divisor) along the last dim; the derivation is in
// core/kernels/masked_softmax.h.
struct MaskedScaledSoftmax : autograd::Function<MaskedScaledSoftmax> {
  static constexpr const char* name = "MaskedScaledSoftmaxBackward0";
  Tensor mask;
  double divisor = 1;
  Tensor forward(const Tensor& x_in, const Mask& mask_in, double divisor_in) {
    const Tensor x = x_in.contiguous();
    mask = mask_in.t.contiguous();
    divisor = divisor_in;
    Tensor y = empty(x.shape(), x.dtype());
    const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::masked_scaled_softmax_forward<T>(x.data_ptr<T>(), mask.data_ptr<bool>(),
                                                mask.size(0), static_cast<T>(divisor),
                                                y.data_ptr<T>(), rows, n);
    });
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor y = saved(0), dy = grad.contiguous();
    Tensor dx = empty(y.shape(), y.dtype());
    const int64_t n = y.size(-1), rows = n == 0 ? 0 : y.numel() / n;
    dispatch_floating(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::masked_scaled_softmax_backward<T>(
          dy.data_ptr<T>(), y.data_ptr<T>(), mask.data_ptr<bool>(), mask.size(0),
          static_cast<T>(divisor), dx.data_ptr<T>(), rows, n);
    });
    return {dx};
  }
};

int64_t checked_dim(const Tensor& t, int64_t dim, const char* op) {
  detail::check_defined(t, op);
  const int64_t d = wrap_dim(dim, t.dim(), op);
  check(is_floating(t.dtype()), op, ": expected a floating point tensor, got ",
        dtype_name(t.dtype()), " (input shape ", t.shape(), ")");
  return d;
}

}  // namespace

Tensor softmax(const Tensor& t, int64_t dim) {
  return autograd::apply<Softmax>(t, checked_dim(t, dim, "softmax"));
}

Tensor log_softmax(const Tensor& t, int64_t dim) {
  return autograd::apply<LogSoftmax>(t, checked_dim(t, dim, "log_softmax"));
}

Tensor masked_scaled_softmax(const Tensor& x, const Tensor& mask, double divisor) {
  detail::check_defined(x, "masked_scaled_softmax");
  detail::check_defined(mask, "masked_scaled_softmax");
  check(is_floating(x.dtype()), "masked_scaled_softmax: expected a floating point tensor, got ",
        dtype_name(x.dtype()), " (input shape ", x.shape(), ")");
  check(x.dim() >= 2, "masked_scaled_softmax: expected input of shape [..., n_q, n_k], got ",
        x.shape());
  check(mask.dtype() == DType::Bool && mask.dim() == 2 && mask.size(0) == x.size(-2) &&
            mask.size(1) == x.size(-1),
        "masked_scaled_softmax: expected a bool mask of shape [", x.size(-2), ", ", x.size(-1),
        "], got ", dtype_name(mask.dtype()), " of shape ", mask.shape());
  return autograd::apply<MaskedScaledSoftmax>(x, Mask{mask}, divisor);
}

Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }

}  // namespace ember
