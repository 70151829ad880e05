// The ops behind nn.Linear, nn.Embedding and nn.LayerNorm. addmm, embedding and layer_norm are
// primitives with their own backward; linear is a composition that picks addmm or matmul the
// way PyTorch's at::linear does (aten/src/ATen/native/Linear.cpp, PyTorch 1.13).
#include "core/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/autograd/function.h"
#include "core/kernels/gemm.h"
#include "core/kernels/parallel_for.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"

namespace ember {

using autograd::apply;
using autograd::Function;

namespace {

// Can a tensor of shape `from` be broadcast to `to` (without changing `to`)?
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  }
  return true;
}

// ---- addmm: Y = bias + A B ----
struct Addmm : Function<Addmm> {
  static constexpr const char* name = "AddmmBackward0";
  bool bias_needs_grad = false, a_needs_grad = false, b_needs_grad = false;

  Tensor forward(const Tensor& bias, const Tensor& a, const Tensor& b) {
    check(a.dim() == 2 && b.dim() == 2, "addmm: expected 2-D matrices, got shapes ", a.shape(),
          " and ", b.shape());
    check(a.size(1) == b.size(0), "addmm: shapes ", a.shape(), " and ", b.shape(),
          " cannot be multiplied (", a.size(1), " != ", b.size(0), ")");
    check(is_floating(a.dtype()) && a.dtype() == b.dtype() && a.dtype() == bias.dtype(),
          "addmm: expected bias, a and b of one floating point dtype, got ",
          dtype_name(bias.dtype()), ", ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    const Shape out_shape = {m, n};
    check(broadcasts_to(bias.shape(), out_shape), "addmm: bias of shape ", bias.shape(),
          " cannot be broadcast to the product's shape ", out_shape);
    bias_needs_grad = bias.requires_grad();
    a_needs_grad = a.requires_grad();
    b_needs_grad = b.requires_grad();
    save_for_backward({b_needs_grad ? a : Tensor(), a_needs_grad ? b : Tensor()});

    Tensor out = empty(out_shape, a.dtype());
    out.copy_(bias);  // every row starts as the bias, then the product is added into it
    dispatch_floating(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::gemm<T>(m, n, k, a.data_ptr<T>(), a.stride(0), a.stride(1), b.data_ptr<T>(),
                       b.stride(0), b.stride(1), out.data_ptr<T>(), n, /*accumulate=*/true);
    });
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {bias_needs_grad ? grad : Tensor(),           // dbias = dY (the engine sums the rows)
            a_needs_grad ? mm(grad, b.t()) : Tensor(),   // dA = dY B^T
            b_needs_grad ? mm(a.t(), grad) : Tensor()};  // dB = A^T dY
  }
};

// ---- embedding: Y[i...] = W[indices[i...]] ----
struct Embedding : Function<Embedding> {
  static constexpr const char* name = "EmbeddingBackward0";
  int64_t num_embeddings = 0, embedding_dim = 0;

  Tensor forward(const Tensor& weight, const Tensor& indices) {
    check(weight.dim() == 2, "embedding: expected a 2-D weight [num_embeddings, embedding_dim], ",
          "got shape ", weight.shape());
    check(indices.dtype() == DType::Int64, "embedding: expected indices of dtype int64, got ",
          dtype_name(indices.dtype()));
    num_embeddings = weight.size(0);
    embedding_dim = weight.size(1);
    const std::vector<int64_t> rows = indices.to_vector<int64_t>();
    for (int64_t row : rows) {
      check(row >= 0 && row < num_embeddings, "embedding: index ", row,
            " is out of range for num_embeddings=", num_embeddings, " (expected 0 <= index < ",
            num_embeddings, ")");
    }
    save_for_backward({indices});

    Shape out_shape = indices.shape();
    out_shape.push_back(embedding_dim);
    Tensor out = empty(out_shape, weight.dtype());
    const Tensor table = weight.contiguous();
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* from = table.data_ptr<T>();
      T* to = out.data_ptr<T>();
      const auto n = static_cast<int64_t>(rows.size());
      kernels::parallel_ranges(n, n * embedding_dim, [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) {
          std::copy_n(from + rows[i] * embedding_dim, embedding_dim, to + i * embedding_dim);
        }
      });
    });
    return out;
  }
  struct Twice {
    static constexpr const char* name = "EmbeddingDenseBackwardBackward0";
  };
  std::vector<Tensor> backward(const Tensor& grad) {
    const Tensor indices = saved(0);
    // Its own derivative (create_graph): the rows of gg the indices pick, as forward.
    auto adjoint = [indices](const Tensor& gg) { return apply<Embedding>(gg, indices); };
    return {autograd::linear_in_grad<Twice>(
                grad, [&](const Tensor& g) { return dense_backward(g, indices); }, adjoint),
            Tensor()};  // no gradient for the indices
  }
  // dW[r] = the sum of dY[i...] over every position i... where indices[i...] == r
  Tensor dense_backward(const Tensor& grad, const Tensor& indices) const {
    const std::vector<int64_t> rows = indices.to_vector<int64_t>();
    const Tensor grad_rows = grad.contiguous();
    Tensor grad_weight = zeros({num_embeddings, embedding_dim}, grad.dtype());
    dispatch_floating(grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* from = grad_rows.data_ptr<T>();
      T* to = grad_weight.data_ptr<T>();
      // Threads take ranges of columns j and walk every position i in order, so a row that
      // several positions share sums them in the same order at any thread count.
      const auto n = static_cast<int64_t>(rows.size());
      kernels::parallel_ranges(embedding_dim, n * embedding_dim, [&](int64_t j0, int64_t j1) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = j0; j < j1; ++j) {
            to[rows[i] * embedding_dim + j] += from[i * embedding_dim + j];
          }
        }
      });
    });
    return grad_weight;
  }
};

// ---- layer_norm over the last N elements of each of M rows ----
//
//   mean = sum_j x_j / N       var = sum_j (x_j - mean)^2 / N       rstd = 1 / sqrt(var + eps)
//   xhat_j = (x_j - mean) * rstd                                    y_j = xhat_j * w_j + b_j
//
// Sums are taken in double; mean and rstd are kept (in x's dtype) for backward.
struct LayerNorm : Function<LayerNorm> {
  static constexpr const char* name = "NativeLayerNormBackward0";
  static constexpr bool allows_undefined_inputs = true;  // weight and bias are optional
  int64_t rows = 0, row_size = 0;
  bool x_needs_grad = false, weight_needs_grad = false, bias_needs_grad = false;
  double epsilon = 0;

  Tensor forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                 const Tensor& bias, double eps) {
    check_shapes(x, normalized_shape, weight, bias);
    row_size = numel_of(normalized_shape);
    rows = row_size == 0 ? 0 : x.numel() / row_size;
    x_needs_grad = x.requires_grad();
    weight_needs_grad = weight.defined() && weight.requires_grad();
    bias_needs_grad = bias.defined() && bias.requires_grad();

    const Tensor input = x.contiguous();
    const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
    Tensor y = empty(x.shape(), x.dtype());
    Tensor mean = empty({rows}, x.dtype()), rstd = empty({rows}, x.dtype());
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* x0 = input.data_ptr<T>();
      const T* wp = w.defined() ? w.data_ptr<T>() : nullptr;
      const T* bp = b.defined() ? b.data_ptr<T>() : nullptr;
      T* y0 = y.data_ptr<T>();
      T* mean_p = mean.data_ptr<T>();
      T* rstd_p = rstd.data_ptr<T>();
      kernels::parallel_ranges(rows, rows * row_size, [&](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) {
          const T* xr = x0 + r * row_size;
          T* yr = y0 + r * row_size;
          double sum = 0;
          for (int64_t j = 0; j < row_size; ++j) sum += xr[j];
          const double row_mean = sum / static_cast<double>(row_size);
          double squares = 0;
          for (int64_t j = 0; j < row_size; ++j) squares += (xr[j] - row_mean) * (xr[j] - row_mean);
          const double row_var = squares / static_cast<double>(row_size);  // biased
          const T m = static_cast<T>(row_mean);
          const T s = static_cast<T>(1.0 / std::sqrt(row_var + eps));
          mean_p[r] = m;
          rstd_p[r] = s;
          // As PyTorch's CPU kernel: xhat = x * rstd + (-rstd * mean), then * w + b.
          const T shift = -s * m;
          for (int64_t j = 0; j < row_size; ++j) {
            T value = xr[j] * s + shift;
            if (wp) value *= wp[j];
            if (bp) value += bp[j];
            yr[j] = value;
          }
        }
      });
    });
    // x and weight themselves (not their contiguous copies): a create_graph backward
    // differentiates through them. eps, for that backward too.
    save_for_backward({x, weight, mean, rstd});
    epsilon = eps;
    return y;
  }

  // With g_j = dy_j * w_j (the gradient reaching xhat):
  //   dx_j = rstd * (g_j - mean_k(g_k) - xhat_j * mean_k(g_k * xhat_k))
  //   dw_j = sum over rows of dy_j * xhat_j        db_j = sum over rows of dy_j
  std::vector<Tensor> backward(const Tensor& grad) {
    if (GradMode::is_enabled()) return backward_with_ops(grad, saved(0), saved(1));
    const Tensor input = saved(0).contiguous(), mean = saved(2), rstd = saved(3);
    const Tensor w = saved(1).defined() ? saved(1).contiguous() : Tensor();
    const Tensor dy = grad.contiguous();
    Tensor dx = x_needs_grad ? empty(input.shape(), input.dtype()) : Tensor();
    Tensor dw = weight_needs_grad ? zeros(w.shape(), input.dtype()) : Tensor();
    Tensor db = bias_needs_grad ? zeros(w.defined() ? w.shape() : Shape{row_size}, input.dtype())
                                : Tensor();
    if (rows == 0) return {dx, dw, db};  // nothing flowed back (row_size may be huge)
    dispatch_floating(input.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* x0 = input.data_ptr<T>();
      const T* dy0 = dy.data_ptr<T>();
      const T* wp = w.defined() ? w.data_ptr<T>() : nullptr;
      const T* mean_p = mean.data_ptr<T>();
      const T* rstd_p = rstd.data_ptr<T>();
      const int64_t elements = rows * row_size;
      // dx: rows are independent, shared out among threads.
      if (x_needs_grad) {
        T* dx0 = dx.data_ptr<T>();
        kernels::parallel_ranges(rows, elements, [&](int64_t first, int64_t last) {
          std::vector<double> xhat(row_size), g(row_size);
          for (int64_t r = first; r < last; ++r) {
            const T* xr = x0 + r * row_size;
            const T* dyr = dy0 + r * row_size;
            const double m = mean_p[r], s = rstd_p[r];
            double g_sum = 0, g_xhat_sum = 0;
            for (int64_t j = 0; j < row_size; ++j) {
              xhat[j] = (xr[j] - m) * s;
              g[j] = wp ? dyr[j] * static_cast<double>(wp[j]) : dyr[j];
              g_sum += g[j];
              g_xhat_sum += g[j] * xhat[j];
            }
            const double g_mean = g_sum / static_cast<double>(row_size);
            const double g_xhat_mean = g_xhat_sum / static_cast<double>(row_size);
            T* dxr = dx0 + r * row_size;
            for (int64_t j = 0; j < row_size; ++j) {
              dxr[j] = static_cast<T>(s * (g[j] - g_mean - xhat[j] * g_xhat_mean));
            }
          }
        });
      }
      // dw, db: sums over rows, in row order, for each column; threads take ranges of columns.
      if (weight_needs_grad || bias_needs_grad) {
        T* dw0 = weight_needs_grad ? dw.data_ptr<T>() : nullptr;
        T* db0 = bias_needs_grad ? db.data_ptr<T>() : nullptr;
        kernels::parallel_ranges(row_size, elements, [&](int64_t j0, int64_t j1) {
          std::vector<double> dw_sum(dw0 ? j1 - j0 : 0, 0.0), db_sum(db0 ? j1 - j0 : 0, 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            const T* xr = x0 + r * row_size;
            const T* dyr = dy0 + r * row_size;
            const double m = mean_p[r], s = rstd_p[r];
            for (int64_t j = j0; j < j1; ++j) {
              if (dw0) dw_sum[j - j0] += dyr[j] * ((xr[j] - m) * s);
              if (db0) db_sum[j - j0] += dyr[j];
            }
          }
          for (int64_t j = j0; j < j1; ++j) {
            if (dw0) dw0[j] = static_cast<T>(dw_sum[j - j0]);
            if (db0) db0[j] = static_cast<T>(db_sum[j - j0]);
          }
        });
      }
    });
    return {dx, dw, db};
  }

  // The same formulas written with ops, mean and rstd recomputed from x (under create_graph,
  // so the gradients can be differentiated again; the kernel above computes the same values).
  std::vector<Tensor> backward_with_ops(const Tensor& grad, const Tensor& x,
                                        const Tensor& w) const {
    const Shape shape = x.shape();
    const Tensor x2 = x.reshape({rows, row_size});
    const Tensor centered = x2 - x2.mean({1}, /*keepdim=*/true);
    const Tensor rstd = 1.0 / sqrt((centered * centered).mean({1}, true) + epsilon);
    const Tensor xhat = centered * rstd;
    const Tensor dy = grad.reshape({rows, row_size});
    const Tensor g = w.defined() ? dy * w.reshape({row_size}) : dy;
    Tensor dx, dw, db;
    if (x_needs_grad) {
      dx = (rstd * (g - g.mean({1}, true) - xhat * (g * xhat).mean({1}, true))).reshape(shape);
    }
    if (weight_needs_grad) dw = (dy * xhat).sum({0}).reshape(w.shape());
    if (bias_needs_grad) db = dy.sum({0}).reshape(w.defined() ? w.shape() : Shape{row_size});
    return {dx, dw, db};
  }

  static void check_shapes(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                           const Tensor& bias) {
    const auto n = static_cast<int64_t>(normalized_shape.size());
    check(n > 0,
          "layer_norm: expected normalized_shape to be at least 1-dimensional, i.e., "
          "containing at least one element, but got normalized_shape = ",
          normalized_shape);
    check(is_floating(x.dtype()), "layer_norm: expected a floating point input, got ",
          dtype_name(x.dtype()));
    const bool trailing_match =
        x.dim() >= n &&
        std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - n);
    if (!trailing_match) {
      std::string trailing_dims;  // "3, 4" for normalized_shape [3, 4]
      for (int64_t d : normalized_shape) {
        trailing_dims += (trailing_dims.empty() ? "" : ", ") + std::to_string(d);
      }
      fail("layer_norm: given normalized_shape=", normalized_shape,
           ", expected input with shape [*, ", trailing_dims, "], but got input of size ",
           x.shape());
    }
    for (const Tensor* param : {&weight, &bias}) {
      if (!param->defined()) continue;
      const char* which = param == &weight ? "weight" : "bias";
      check(param->shape() == normalized_shape, "layer_norm: expected ", which, " of shape ",
            normalized_shape, " (normalized_shape), got ", param->shape());
      check(param->dtype() == x.dtype(), "layer_norm: expected ", which, " of dtype ",
            dtype_name(x.dtype()), ", got ", dtype_name(param->dtype()));
    }
  }
};

}  // namespace

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b) {
  return apply<Addmm>(bias, a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(x, "linear");
  detail::check_defined(weight, "linear");
  check(weight.dim() == 2, "linear: expected a 2-D weight [out_features, in_features], got shape ",
        weight.shape());
  const int64_t in_features = weight.size(1);
  check(x.dim() >= 1 && x.size(-1) == in_features, "linear: input of shape ", x.shape(),
        " does not end in in_features=", in_features, " (weight of shape ", weight.shape(), ")");
  if (bias.defined()) {
    check(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: expected a bias of shape ",
          Shape{weight.size(0)}, " (out_features), got ", bias.shape());
  }

  if (x.dim() == 2 && bias.defined()) return addmm(bias, x, weight.t());
  if (x.dim() == 3 && bias.defined() && x.is_contiguous()) {
    // PyTorch's _flatten_3d_linear: one addmm over all batch * tokens rows.
    const int64_t batch = x.size(0), tokens = x.size(1);
    const Tensor rows = addmm(bias, x.view({batch * tokens, in_features}), weight.t());
    return rows.view({batch, tokens, rows.size(1)});
  }
  const Tensor out = matmul(x, weight.t());
  return bias.defined() ? out + bias : out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  return apply<Embedding>(weight, indices);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  detail::check_defined(x, "layer_norm");
  return apply<LayerNorm>(x, normalized_shape, weight, bias, eps);
}

}  // namespace ember
