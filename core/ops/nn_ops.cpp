// The ops behind nn.Linear, nn.Embedding and nn.LayerNorm. addmm, embedding and layer_norm are
// primitives with their own backward; linear is a composition that picks addmm or matmul the
// way PyTorch's at::linear does (aten/src/ATen/native/Linear.cpp, PyTorch 1.13).
#include "core/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/grad_mode.h"
#include "core/base/shape.h"
#include "core/base/storage.h"
#include "core/graph/function.h"
#include "core/kernels/gemm.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/parallel_for.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;

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

// A 2-d tensor laid out column by column (the transpose of a contiguous matrix; not a vector).
bool is_column_major(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 &&
         t.stride(1) == t.size(0);
}

// ---- addmm: Y = bias + A B ----
struct Addmm : OpFunction<Addmm> {
  static constexpr const char* name = "AddmmBackward0";
  static constexpr const char* formula =
      "Y = bias + A B:  dbias = dY summed over rows, dA = dY B^T, dB = A^T dY";
  bool bias_needs_grad = false, a_needs_grad = false, b_needs_grad = false;
  bool a_column_major = false, b_column_major = false;  // as in mm (core/ops/linalg.cpp)

  Tensor forward(const Tensor& bias, const Tensor& a, const Tensor& b) {
    check(a.dim() == 2 && b.dim() == 2, "addmm: expected 2-D matrices, got shapes ", a.shape(),
          " and ", b.shape());
    check(a.size(1) == b.size(0), "addmm: shapes ", a.shape(), " and ", b.shape(),
          " cannot be multiplied (", a.size(1), " != ", b.size(0), ")");
    check(a.dtype() == b.dtype() && a.dtype() == bias.dtype(),
          "addmm: expected bias, a and b of one dtype, got ", dtype_name(bias.dtype()), ", ",
          dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
    check(a.dtype() != DType::Bool, "addmm: not implemented for bool tensors (shapes ",
          bias.shape(), ", ", a.shape(), " and ", b.shape(), ")");
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    const Shape out_shape = {m, n};
    check(broadcasts_to(bias.shape(), out_shape), "addmm: bias of shape ", bias.shape(),
          " cannot be broadcast to the product's shape ", out_shape);
    bias_needs_grad = bias.requires_grad();
    a_needs_grad = a.requires_grad();
    b_needs_grad = b.requires_grad();
    a_column_major = is_column_major(a);
    b_column_major = is_column_major(b);
    save_for_backward({b_needs_grad ? a : Tensor(), a_needs_grad ? b : Tensor()});

    // Every row starts as the bias, then the product is added into it. A bias that is one row
    // (nn.Linear's [n], or [1, n], or one value) goes into C tile by tile inside the GEMM
    // (gemm_bias: the same bits, without a pass over C); any other broadcast is copied first
    // (copy_ writes each element: no zeroing pass).
    Tensor out = detail::empty_for_overwrite(out_shape, a.dtype());
    const bool row_bias = bias.dim() <= 1 || bias.size(0) == 1;
    const int64_t bias_stride = bias.dim() == 0 || bias.size(-1) == 1 ? 0 : bias.stride(-1);
    if (!row_bias) out.copy_(bias);
    dispatch(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return;  // refused above
      } else if (row_bias) {
        kernels::gemm_bias<T>(m, n, k, a.data_ptr<T>(), a.stride(0), a.stride(1), b.data_ptr<T>(),
                              b.stride(0), b.stride(1), bias.data_ptr<T>(), bias_stride,
                              out.data_ptr<T>(), n);
      } else {
        kernels::gemm<T>(m, n, k, a.data_ptr<T>(), a.stride(0), a.stride(1), b.data_ptr<T>(),
                         b.stride(0), b.stride(1), out.data_ptr<T>(), n, /*accumulate=*/true);
      }
    });
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    // Each gradient in its operand's layout (a linear layer's weight.t() is column-major: its
    // gradient is computed as (dY^T A)^T, so the weight receives a contiguous one).
    Tensor da, db;
    if (a_needs_grad) da = a_column_major ? mm(b, grad.t()).t() : mm(grad, b.t());  // dY B^T
    if (b_needs_grad) db = b_column_major ? mm(grad.t(), a).t() : mm(a.t(), grad);  // A^T dY
    return {bias_needs_grad ? grad : Tensor(), da, db};  // dbias = dY (the engine sums the rows)
  }
};

// ---- embedding: Y[i...] = W[indices[i...]] ----
struct Embedding : OpFunction<Embedding> {
  static constexpr const char* name = "EmbeddingBackward0";
  static constexpr const char* formula =
      "Y[i] = W[idx[i]]:  dW[r] = sum of dY[i] over the i with idx[i] = r";
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
    Tensor out = detail::empty_for_overwrite(out_shape, weight.dtype());  // every row copied
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
// Sums are taken in double; mean and rstd are kept (in x's dtype) for the fused backward. The
// loops are kernels::layer_norm_forward and layer_norm_backward (core/kernels/layer_norm.h, with
// the derivation of the backward).
struct LayerNorm : OpFunction<LayerNorm> {
  static constexpr const char* name = "NativeLayerNormBackward0";
  static constexpr const char* formula =
      "y = (x - mean) rstd w + b:  dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w; dw = "
      "sum dy xhat, db = sum dy";
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
    // y: every row written by the kernel (no clearing pass first).
    Tensor y = detail::empty_for_overwrite(x.shape(), x.dtype());
    Tensor mean = empty({rows}, x.dtype()), rstd = empty({rows}, x.dtype());
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::layer_norm_forward<T>(input.data_ptr<T>(), w.defined() ? w.data_ptr<T>() : nullptr,
                                     b.defined() ? b.data_ptr<T>() : nullptr, y.data_ptr<T>(),
                                     mean.data_ptr<T>(), rstd.data_ptr<T>(), rows, row_size, eps);
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
  // written with ops, mean and rstd recomputed from x.
  std::vector<Tensor> backward(const Tensor& grad) const {
    const Tensor x = saved(0), w = saved(1);
    const Tensor x2 = x.reshape({rows, row_size});
    const Tensor centered = x2 - x2.mean({1}, /*keepdim=*/true);
    const Tensor rstd = 1.0 / sqrt((centered * centered).mean({1}, true) + epsilon);
    const Tensor xhat = centered * rstd;
    const Tensor dy = grad.reshape({rows, row_size});
    const Tensor g = w.defined() ? dy * w.reshape({row_size}) : dy;
    Tensor dx, dw, db;
    if (x_needs_grad) {
      dx = (rstd * (g - g.mean({1}, true) - xhat * (g * xhat).mean({1}, true))).reshape(x.shape());
    }
    if (weight_needs_grad) dw = (dy * xhat).sum({0}).reshape(w.shape());
    if (bias_needs_grad) db = dy.sum({0}).reshape(w.defined() ? w.shape() : Shape{row_size});
    return {dx, dw, db};
  }

  // The same formulas, one pass per row from the saved mean and rstd (layer_norm_backward).
  std::vector<Tensor> fused_backward(const Tensor& grad) const {
    const Tensor input = saved(0).contiguous(), mean = saved(2), rstd = saved(3);
    const Tensor w = saved(1).defined() ? saved(1).contiguous() : Tensor();
    const Tensor dy = grad.contiguous();
    // dx: every row written by the kernel (and nothing to write when rows == 0).
    Tensor dx = x_needs_grad ? detail::empty_for_overwrite(input.shape(), input.dtype()) : Tensor();
    Tensor dw = weight_needs_grad ? zeros(w.shape(), input.dtype()) : Tensor();
    Tensor db = bias_needs_grad ? zeros(w.defined() ? w.shape() : Shape{row_size}, input.dtype())
                                : Tensor();
    if (rows == 0) return {dx, dw, db};  // nothing flowed back (row_size may be huge)
    dispatch_floating(input.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto data = [](const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
      kernels::layer_norm_backward<T>(data(input), data(w), data(dy), data(mean), data(rstd),
                                      /*saved_denominator=*/false, data(dx), data(dw), data(db),
                                      rows, row_size);
    });
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

// ---- the book's LayerNorm (nn::GPTLayerNorm) as one op ----
//
// The composite, over the last dim:
//   mean = x.mean(-1, keepdim=True);  var = x.var(-1, keepdim=True, unbiased=False)
//   norm_x = (x - mean) / torch.sqrt(var + eps);  y = scale * norm_x + shift
// kernels::layer_norm_book_forward computes each row with the composite's float operations
// (its mean and variance summed as x.mean and x.var sum them), so y has the composite's bits.
// The fused backward is layer_norm's kernel (layer_norm.h derives it), in double from the saved
// mean and sqrt(var + eps): it differs from the composite's dozen backward nodes (each rounding
// to float) in the last bits of the gradients only.
struct GptLayerNorm : OpFunction<GptLayerNorm> {
  static constexpr const char* name = "GptLayerNormBackward0";
  static constexpr const char* formula =
      "y = scale (x - mean) / sqrt(var + eps) + shift:  dx = rstd (g - mean(g) - xhat mean(g "
      "xhat)) with g = dy scale; dscale = sum dy xhat, dshift = sum dy";
  int64_t rows = 0, row_size = 0;
  bool x_needs_grad = false, scale_needs_grad = false, shift_needs_grad = false;
  double epsilon = 0;

  Tensor forward(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps) {
    check(is_floating(x.dtype()), "gpt_layer_norm: expected a floating point input, got ",
          dtype_name(x.dtype()));
    check(scale.dim() == 1 && shift.shape() == scale.shape(),
          "gpt_layer_norm: expected 1-D scale and shift of one shape, got ", scale.shape(), " and ",
          shift.shape());
    check(x.dim() >= 1 && x.size(-1) == scale.size(0),
          "gpt_layer_norm: expected input with last dim ", scale.size(0), ", got shape ",
          x.shape());
    check(scale.dtype() == x.dtype() && shift.dtype() == x.dtype(),
          "gpt_layer_norm: expected scale and shift of the input's dtype ", dtype_name(x.dtype()),
          ", got ", dtype_name(scale.dtype()), " and ", dtype_name(shift.dtype()));
    row_size = scale.size(0);
    rows = row_size == 0 ? 0 : x.numel() / row_size;
    x_needs_grad = x.requires_grad();
    scale_needs_grad = scale.requires_grad();
    shift_needs_grad = shift.requires_grad();
    const Tensor input = x.contiguous(), w = scale.contiguous(), b = shift.contiguous();
    Tensor y = detail::empty_for_overwrite(x.shape(), x.dtype());  // every row written
    Tensor mean = empty({rows}, x.dtype()), denom = empty({rows}, x.dtype());
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::layer_norm_book_forward<T>(input.data_ptr<T>(), w.data_ptr<T>(), b.data_ptr<T>(),
                                          y.data_ptr<T>(), mean.data_ptr<T>(), denom.data_ptr<T>(),
                                          rows, row_size, eps);
    });
    // x and scale themselves too (the same tensors unless copied above): the create_graph
    // backward differentiates through them.
    save_for_backward({input, w, mean, denom, x, scale});
    epsilon = eps;
    return y;
  }

  //   dx = (g - mean(g) - xhat mean(g xhat)) / denom,  g = dy * scale,  xhat = (x - mean) / denom
  //   dscale = sum over rows of dy * xhat                dshift = sum over rows of dy
  // written with ops, mean and denom recomputed from x as the composite does.
  std::vector<Tensor> backward(const Tensor& dy) const {
    const Tensor x = saved(4), scale = saved(5);
    const Tensor centered = x - x.mean({-1}, /*keepdim=*/true);
    const Tensor denom = sqrt((centered * centered).mean({-1}, true) + epsilon);
    const Tensor xhat = centered / denom;
    const Tensor g = dy * scale;
    Tensor dx, dw, db;
    if (x_needs_grad) dx = (g - g.mean({-1}, true) - xhat * (g * xhat).mean({-1}, true)) / denom;
    if (scale_needs_grad) dw = (dy * xhat).reshape({rows, row_size}).sum({0});
    if (shift_needs_grad) db = dy.reshape({rows, row_size}).sum({0});
    return {dx, dw, db};
  }

  // layer_norm's kernel, from the saved mean and denom = sqrt(var + eps).
  std::vector<Tensor> fused_backward(const Tensor& grad) const {
    const Tensor input = saved(0), w = saved(1), mean = saved(2), denom = saved(3);
    const Tensor dy = grad.contiguous();
    // dx: every row written by the kernel (and nothing to write when rows == 0).
    Tensor dx = x_needs_grad ? detail::empty_for_overwrite(input.shape(), input.dtype()) : Tensor();
    Tensor dw = scale_needs_grad ? zeros(w.shape(), input.dtype()) : Tensor();
    Tensor db = shift_needs_grad ? zeros(w.shape(), input.dtype()) : Tensor();
    if (rows == 0) return {dx, dw, db};
    dispatch_floating(input.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto data = [](const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
      kernels::layer_norm_backward<T>(data(input), data(w), data(dy), data(mean), data(denom),
                                      /*saved_denominator=*/true, data(dx), data(dw), data(db),
                                      rows, row_size);
    });
    return {dx, dw, db};
  }
};

}  // namespace

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b) {
  return apply<Addmm>(bias, a, b);
}

// ---- generation's packed weights (RowPanelScope) ----

namespace {

// A weight packed in row panels, and what it was packed from: the storage (weak: a weight freed
// within the scope is not kept alive, and its address, reused, does not match), where in it, and
// its version then.
struct RowPanels {
  std::weak_ptr<Storage> storage;
  int64_t offset = 0, N = 0, K = 0, stride_row = 0, stride_col = 0;
  uint64_t version = 0;
  Tensor panels;  // N * K floats, from Ember's allocator (memory_stats counts them)
};

thread_local std::vector<RowPanels>* t_row_panels = nullptr;  // the outermost scope's

// The panels of weight [N, K] (float32), packed now if they are not yet, or are stale.
const float* row_panels_of(const Tensor& weight) {
  std::vector<RowPanels>& packed = *t_row_panels;
  const int64_t N = weight.size(0), K = weight.size(1);
  RowPanels* entry = nullptr;
  for (RowPanels& e : packed) {
    if (e.storage.lock() == weight.storage() && e.offset == weight.offset() && e.N == N &&
        e.K == K && e.stride_row == weight.stride(0) && e.stride_col == weight.stride(1)) {
      if (e.version == weight.storage()->version()) return e.panels.data_ptr<float>();
      entry = &e;  // the weight changed since: pack it again
      break;
    }
  }
  if (entry == nullptr) {
    std::erase_if(packed, [](const RowPanels& e) { return e.storage.expired(); });
    entry = &packed.emplace_back();
    entry->panels = detail::empty_for_overwrite({checked_mul(N, K, "linear")}, DType::Float32);
  }
  entry->storage = weight.storage();
  entry->offset = weight.offset();
  entry->N = N;
  entry->K = K;
  entry->stride_row = weight.stride(0);
  entry->stride_col = weight.stride(1);
  entry->version = weight.storage()->version();
  kernels::pack_row_panels(N, K, weight.data_ptr<float>(), weight.stride(0), weight.stride(1),
                           entry->panels.data_ptr<float>());
  return entry->panels.data_ptr<float>();
}

// linear of one row from the packed weight, or an undefined tensor when this call is not one.
Tensor linear_one_row(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t N = weight.size(0), K = weight.size(1);
  if (t_row_panels == nullptr || x.numel() != K || N == 0 || K == 0 ||
      x.dtype() != DType::Float32 || weight.dtype() != DType::Float32 ||
      (bias.defined() && bias.dtype() != DType::Float32)) {
    return Tensor();
  }
  if (GradMode::is_enabled() &&
      (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()))) {
    return Tensor();
  }
  const float* panels = row_panels_of(weight);
  Shape shape = x.shape();
  shape.back() = N;
  // Where linear() runs addmm (below), each chain starts from the bias, as gemm_bias's do;
  // elsewhere the product starts from 0 and the bias is added after, as matmul(x, w^T) + bias.
  const bool bias_in_chain =
      bias.defined() && (x.dim() == 2 || (x.dim() == 3 && x.is_contiguous()));
  Tensor y = bias_in_chain ? bias.contiguous().clone().view(shape) : empty(shape);
  const Tensor row = x.contiguous();
  kernels::gemm_row_panels(N, K, row.data_ptr<float>(), panels, y.data_ptr<float>(),
                           /*accumulate=*/bias_in_chain);
  return bias.defined() && !bias_in_chain ? y + bias : y;
}

}  // namespace

RowPanelScope::RowPanelScope() : outermost_(t_row_panels == nullptr) {
  if (outermost_) t_row_panels = new std::vector<RowPanels>();
}

RowPanelScope::~RowPanelScope() {
  if (outermost_) {
    delete t_row_panels;
    t_row_panels = nullptr;
  }
}

int64_t RowPanelScope::packed_bytes() {
  int64_t bytes = 0;
  if (t_row_panels != nullptr) {
    for (const RowPanels& e : *t_row_panels) bytes += e.N * e.K * int64_t{sizeof(float)};
  }
  return bytes;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(x, "linear");
  detail::check_defined(weight, "linear");
  OpScope scope("linear");
  check(weight.dim() == 2, "linear: expected a 2-D weight [out_features, in_features], got shape ",
        weight.shape());
  const int64_t in_features = weight.size(1);
  check(x.dim() >= 1 && x.size(-1) == in_features, "linear: input of shape ", x.shape(),
        " does not end in in_features=", in_features, " (weight of shape ", weight.shape(), ")");
  if (bias.defined()) {
    check(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: expected a bias of shape ",
          Shape{weight.size(0)}, " (out_features), got ", bias.shape());
    // Checked here, not by the op each path runs: the addmm of a 2-d input refuses a bias of
    // another dtype, the `out + bias` of a 1-d or 4-d input would promote the result to it.
    check(bias.dtype() == weight.dtype(), "linear: expected a bias of the weight's dtype ",
          dtype_name(weight.dtype()), ", got ", dtype_name(bias.dtype()), " (input of shape ",
          x.shape(), ", weight of shape ", weight.shape(), ")");
  }

  if (Tensor y = linear_one_row(x, weight, bias); y.defined()) return y;
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
  OpScope scope("layer_norm");
  return apply<LayerNorm>(x, normalized_shape, weight, bias, eps);
}

Tensor gpt_layer_norm(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps) {
  detail::check_defined(x, "gpt_layer_norm");
  detail::check_defined(scale, "gpt_layer_norm");
  detail::check_defined(shift, "gpt_layer_norm");
  OpScope scope("gpt_layer_norm");
  return apply<GptLayerNorm>(x, scale, shift, eps);
}

}  // namespace ember
