// softmax and log_softmax along one dim. The forward is one fused loop per row
// (kernels::softmax in core/kernels/reduce_kernels.h); the backward is the formula in tensor ops,
// and beside it the kernel a first-order backward runs (core/graph/function.h).
#include "core/ops/softmax.h"

#include "core/graph/function.h"
#include "core/kernels/reduce_kernels.h"
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
  Tensor out = detail::empty_for_overwrite(x.shape(), x.dtype());  // every row written
  dispatch_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::softmax(input.data_ptr<T>(), out.data_ptr<T>(), s, log);
  });
  return out;
}

// The backward of (log_)softmax over the last dim of y (at least 1-d), as PyTorch's CPU kernel
// rounds it (kernels::softmax_backward_rows).
Tensor rows_backward(const Tensor& grad, const Tensor& y, bool log) {
  const Tensor g = grad.contiguous();
  Tensor dx = detail::empty_for_overwrite(y.shape(), y.dtype());  // every row written
  const int64_t n = y.size(-1);
  const int64_t rows = n == 0 ? 0 : y.numel() / n;
  dispatch_floating(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::softmax_backward_rows(g.data_ptr<T>(), y.data_ptr<T>(), dx.data_ptr<T>(), rows, n,
                                   log);
  });
  return dx;
}

// y = softmax(x) along dim: y_j = exp(x_j) / sum_k exp(x_k).
// dy_j/dx_i = y_j (delta_ij - y_i), so dx_i = sum_j g_j y_j (delta_ij - y_i)
//                                           = y_i (g_i - sum_j g_j y_j).
struct Softmax : autograd::OpFunction<Softmax> {
  static constexpr const char* name = "SoftmaxBackward0";
  static constexpr const char* formula =
      "y_j = e^x_j / sum_k e^x_k:  dx_i = y_i (g_i - sum_j g_j y_j)";
  int64_t dim = 0;
  Tensor forward(const Tensor& x, int64_t wrapped_dim) {
    dim = wrapped_dim;
    Tensor y = softmax_kernel(x, dim, /*log=*/false);
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor y = saved(0);
    return {y * (grad - sum(grad * y, {dim}, /*keepdim=*/true))};
  }
  // Rows of the last dim: one pass per row in PyTorch's rounding (softmax_backward_rows); rows
  // along another dim (strided) run the formula above.
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    const Tensor y = saved(0);
    if (dim != y.dim() - 1) return backward(grad);
    return {rows_backward(grad, y, /*log=*/false)};
  }
};

// y = log_softmax(x) along dim: y_j = x_j - log sum_k exp(x_k).
// dy_j/dx_i = delta_ij - softmax_i, so dx_i = g_i - exp(y_i) sum_j g_j.
struct LogSoftmax : autograd::OpFunction<LogSoftmax> {
  static constexpr const char* name = "LogSoftmaxBackward0";
  static constexpr const char* formula =
      "y_j = x_j - log sum_k e^x_k:  dx_i = g_i - e^y_i sum_j g_j";
  int64_t dim = 0;
  Tensor forward(const Tensor& x, int64_t wrapped_dim) {
    dim = wrapped_dim;
    Tensor y = softmax_kernel(x, dim, /*log=*/true);
    save_for_backward({y});
    return y;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor y = saved(0);
    return {grad - exp(y) * sum(grad, {dim}, /*keepdim=*/true)};
  }
  // Rows of the last dim: one pass per row in PyTorch's rounding (softmax_backward_rows); rows
  // along another dim (strided) run the formula above.
  std::vector<Tensor> fused_backward(const Tensor& grad) {
    const Tensor y = saved(0);
    if (dim != y.dim() - 1) return backward(grad);
    return {rows_backward(grad, y, /*log=*/true)};
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

Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }

}  // namespace ember
