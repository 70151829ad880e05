// Loss functions: the differentiable ops (one struct each, forward beside backward) and their
// functional and module forms.
#include "nn/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd/function.h"
#include "core/kernels/exp.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/reduce_kernels.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/parallel.h"

namespace ember::nn {

using autograd::apply;
using autograd::Function;

namespace {

// ---- the layout shared by cross_entropy and nll_loss ----
// input [N, C, d1, ...] is read as [N, C, S] (S = d1 * ...), [C] as [1, C, 1]; the per-position
// loss (reduction none) has shape [N, d1, ...] ([] for [C]).
struct ClassLayout {
  int64_t n = 1, c = 1, s = 1;
  Shape loss_shape;
};

ClassLayout class_layout(const char* op, const Tensor& input) {
  check(input.dim() >= 1, op, ": expected input of shape [C], [N, C] or [N, C, d1, ...], got ",
        input.shape());
  check(is_floating(input.dtype()), op, ": expected a floating point input, got ",
        dtype_name(input.dtype()), " (shape ", input.shape(), ")");
  ClassLayout l;
  if (input.dim() == 1) {
    l.c = input.size(0);
    return l;
  }
  l.n = input.size(0);
  l.c = input.size(1);
  l.loss_shape.push_back(l.n);
  for (int64_t d = 2; d < input.dim(); ++d) {
    l.s *= input.size(d);
    l.loss_shape.push_back(input.size(d));
  }
  return l;
}

// Class indices as a vector, each checked to be a class or ignore_index.
std::vector<int64_t> class_indices(const char* op, const Tensor& input, const Tensor& target,
                                   const ClassLayout& l, int64_t ignore_index) {
  check(target.dtype() == DType::Int64, op, ": expected int64 class indices as target, got ",
        dtype_name(target.dtype()), " of shape ", target.shape(), " (input ", input.shape(), ")");
  check(target.shape() == l.loss_shape, op, ": expected target of shape ", l.loss_shape,
        " for input of shape ", input.shape(), ", got ", target.shape());
  std::vector<int64_t> t = target.to_vector<int64_t>();
  for (int64_t v : t) {
    check(v == ignore_index || (v >= 0 && v < l.c), op, ": target ", v, " is out of bounds for ",
          l.c, " classes (input ", input.shape(), ", ignore_index ", ignore_index, ")");
  }
  return t;
}

std::vector<double> class_weights(const char* op, const Tensor& weight, const Tensor& input,
                                  const ClassLayout& l) {
  if (!weight.defined()) return std::vector<double>(static_cast<std::size_t>(l.c), 1.0);
  check(weight.dim() == 1 && weight.size(0) == l.c && weight.dtype() == input.dtype(), op,
        ": expected weight of shape [", l.c, "] and dtype ", dtype_name(input.dtype()),
        " (one per class of input ", input.shape(), "), got ", weight.shape(), " ",
        dtype_name(weight.dtype()));
  return weight.to_vector<double>();
}

// The per-position losses reduced: a tensor of loss_shape (none), their sum, or sum / denom.
Tensor reduce_losses(const std::vector<double>& losses, double denom, Reduction reduction,
                     const Shape& loss_shape, DType dtype) {
  if (reduction == Reduction::None) return from_vector(losses, loss_shape, dtype);
  double total = 0;
  for (double v : losses) total += v;
  return scalar_tensor(reduction == Reduction::Sum ? total : total / denom, dtype);
}

// The upstream gradient of position i: g[i] (none), g (sum) or g / denom (mean).
std::vector<double> position_grads(const Tensor& grad, double denom, Reduction reduction,
                                   std::size_t count) {
  if (reduction == Reduction::None) return grad.contiguous().to_vector<double>();
  double g = grad.item();
  if (reduction == Reduction::Mean) g /= denom;
  return std::vector<double>(count, g);
}

// ---- cross_entropy, fused ----
//
// For one position (a row x_1..x_C of logits) with lse = log sum_c exp(x_c) (computed as
// max + log sum exp(x_c - max), so logits of 1e4 do not overflow), log p_c = x_c - lse and
//     loss = sum_c q_c (lse - x_c)
// where q holds the target and the weights:
//   class index t:      q_c = (1 - eps) w_t [c == t] + (eps / C) w_c    (0 if t is ignored)
//   probabilities y:    q_c = w_c ((1 - eps) y_c + eps / C)
// (eps = label_smoothing). Mean divides the sum by sum_i w_{t_i} over the positions not ignored
// (indices) or by the number of positions (probabilities), as PyTorch does.
//
// Backward: d loss / d x_c = sum_k q_k softmax_c - q_c = Q p_c - q_c with Q = sum_k q_k, and
// for probability targets d loss / d y_c = (1 - eps) w_c (lse - x_c).
//
// A language model's case, float32 class indices without label smoothing over contiguous rows
// (the logits [N, C] of a GPT, C = 50257), takes a shorter road: q is w_t at the target alone,
//     loss = w_t (lse - x_t),   d loss / d x_c = w_t (p_c - [c == t]),
// with e_c = exp(x_c - m) from the vectorised exp (core/kernels/exp.h, the bits of std::exp on
// floats, as PyTorch's float kernels exponentiate in float), s = sum_c e_c in double, lse = m +
// log s and p_c = e_c / s; the forward keeps m and s of every row for the backward. (The general
// road fills a row of q and calls the scalar double exp per class: 4% of a GPT-124M training
// step before 2026-11-26.)
struct CrossEntropy : Function<CrossEntropy> {
  static constexpr bool allows_undefined_inputs = true;  // optional weight (input, target: checked)
  static constexpr const char* name = "CrossEntropyLossBackward0";
  static constexpr const char* formula =
      "l = -sum_c q_c log softmax(x)_c:  dl/dx_c = Q softmax(x)_c - q_c";
  ClassLayout l;
  bool probabilities = false;
  Reduction reduction = Reduction::Mean;
  double eps = 0;
  int64_t ignore_index = -100;
  std::vector<int64_t> indices;
  std::vector<double> weights;
  double denom = 0;
  bool target_requires_grad = false;
  bool fast = false;                     // float32 class indices, no smoothing, stride 1
  std::vector<double> row_max, row_sum;  // m and s of every row (fast road)

  // The float32 row x[0, C): e = exp(x - m) into `e` (C floats), returns s = sum e in double.
  static double exp_sum(const float* x, int64_t c, float m, float* e) {
    kernels::exp_row(x, m, e, c);
    constexpr int kLanes = 8;
    double acc[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= c; k += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(e[k + j]);
    for (; k < c; ++k) acc[0] += static_cast<double>(e[k]);
    double sum = 0;
    for (double a : acc) sum += a;
    return sum;
  }

  // The fast road's forward: each position's loss, and m and s of its row.
  void fast_forward(const float* xs, std::vector<double>& losses) {
    row_max.assign(static_cast<std::size_t>(l.n), 0.0);
    row_sum.assign(static_cast<std::size_t>(l.n), 0.0);
    const int threads = l.n * l.c > (1 << 16) ? get_num_threads() : 1;
    std::vector<std::vector<float>> scratch(static_cast<std::size_t>(threads),
                                            std::vector<float>(static_cast<std::size_t>(l.c)));
    kernels::parallel_for(l.n, threads, [&](int64_t i, int thread) {
      const int64_t t = indices[static_cast<std::size_t>(i)];
      if (t == ignore_index) return;
      const float* x = xs + i * l.c;
      const float m = kernels::max_row(x, l.c);
      row_max[i] = m;
      if (std::isinf(m)) {  // as log_sum_exp: all -inf gives -inf, a +inf logit nan
        const double lse =
            m < 0 ? static_cast<double>(m) : std::numeric_limits<double>::quiet_NaN();
        losses[i] = weights[t] * (lse - static_cast<double>(x[t]));
        return;
      }
      row_sum[i] = exp_sum(x, l.c, m, scratch[static_cast<std::size_t>(thread)].data());
      const double lse = static_cast<double>(m) + std::log(row_sum[i]);
      losses[i] = weights[t] * (lse - static_cast<double>(x[t]));
    });
  }

  // The fast road's backward: gx[i, c] = g_i w_t (e_c / s - [c == t]).
  void fast_backward(const float* xs, const std::vector<double>& g, float* gxs) const {
    const int threads = l.n * l.c > (1 << 16) ? get_num_threads() : 1;
    kernels::parallel_for(l.n, threads, [&](int64_t i, int) {
      float* y = gxs + i * l.c;
      const int64_t t = indices[static_cast<std::size_t>(i)];
      if (t == ignore_index) {
        std::fill(y, y + l.c, 0.0f);
        return;
      }
      const float* x = xs + i * l.c;
      const double a = g[i] * weights[t];
      const float m = static_cast<float>(row_max[i]);
      if (std::isinf(m)) {  // p as exp(x - lse) on the general road: nan everywhere for +inf
        if (m > 0) {
          std::fill(y, y + l.c, std::numeric_limits<float>::quiet_NaN());
          return;
        }
        for (int64_t k = 0; k < l.c; ++k) {
          const double p = std::exp(static_cast<double>(x[k]) - static_cast<double>(m));
          y[k] = static_cast<float>(a * (p - (k == t ? 1.0 : 0.0)));
        }
        return;
      }
      kernels::exp_row(x, m, y, l.c);
      const double scale = a / row_sum[i];
      const double e_t = static_cast<double>(y[t]);
      for (int64_t k = 0; k < l.c; ++k)
        y[k] = static_cast<float>(scale * static_cast<double>(y[k]));
      y[t] = static_cast<float>(scale * e_t - a);
    });
  }

  // Calls fn(position, offset of its class-0 logit, q) for every position, in parallel over
  // positions when there is enough work (each writes only its own row and loss; q is the
  // thread's scratch row), on ember::get_num_threads() threads.
  template <typename Fn>
  void for_each_position(Fn&& fn) const {
    const int64_t positions = l.n * l.s;
    const int threads = positions * l.c > (1 << 16) ? get_num_threads() : 1;
    std::vector<std::vector<double>> scratch(static_cast<std::size_t>(threads),
                                             std::vector<double>(static_cast<std::size_t>(l.c)));
    kernels::parallel_for(positions, threads, [&](int64_t i, int thread) {
      const int64_t n = i / l.s, s = i % l.s;
      fn(i, n * l.c * l.s + s, scratch[static_cast<std::size_t>(thread)]);
    });
  }

  template <typename T>
  static double log_sum_exp(const T* x, int64_t c, int64_t stride) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < c; ++k) m = std::max(m, static_cast<double>(x[k * stride]));
    // All -inf: -inf (every lse - x_k is then nan, as PyTorch's x - max). A +inf logit: nan, as
    // PyTorch's log_softmax (x - max is inf - inf there), whatever the target.
    if (std::isinf(m)) return m < 0 ? m : std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(x[k * stride]) - m);
    return m + std::log(sum);
  }

  // q_c of one position, for c in [0, C) (see above); false when the position is ignored.
  template <typename T>
  bool coefficients(int64_t position, const T* y, int64_t stride, std::vector<double>& q) const {
    const double smooth = eps / static_cast<double>(l.c);
    if (probabilities) {
      for (int64_t k = 0; k < l.c; ++k) {
        q[k] = weights[k] * (static_cast<double>(y[k * stride]) * (1 - eps) + smooth);
      }
      return true;
    }
    const int64_t t = indices[position];
    if (t == ignore_index) return false;
    for (int64_t k = 0; k < l.c; ++k) q[k] = smooth * weights[k];
    q[t] += (1 - eps) * weights[t];
    return true;
  }

  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                 CrossEntropyFuncOptions options) {
    const char* op = "cross_entropy";
    l = class_layout(op, input);
    reduction = options.reduction();
    eps = options.label_smoothing();
    ignore_index = options.ignore_index();
    check(eps >= 0 && eps <= 1, op, ": label_smoothing must be in [0, 1], got ", eps);
    weights = class_weights(op, weight, input, l);
    probabilities = target.shape() == input.shape();
    if (probabilities) {
      check(target.dtype() == input.dtype(), op, ": expected class probabilities of dtype ",
            dtype_name(input.dtype()), " as target (its shape equals the input's, ", input.shape(),
            "), got ", dtype_name(target.dtype()));
      check(ignore_index < 0, op, ": ignore_index (", ignore_index,
            ") is not supported for class probability targets");
      target_requires_grad = target.requires_grad();
      // PyTorch divides by input.numel() / C: 0 / 0 (nan) when there are no classes.
      denom = l.c == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(l.n * l.s);
    } else {
      indices = class_indices(op, input, target, l, ignore_index);
      for (int64_t t : indices) denom += t == ignore_index ? 0.0 : weights[t];
    }
    Tensor x = input.contiguous();
    Tensor y = probabilities ? target.contiguous() : Tensor();
    // input and target themselves too (the same tensors unless copied): the create_graph
    // backward differentiates through them.
    save_for_backward({x, y, input, probabilities ? target : Tensor()});
    std::vector<double> losses(static_cast<std::size_t>(l.n * l.s), 0.0);
    fast = !probabilities && eps == 0 && l.s == 1 && x.dtype() == DType::Float32;
    if (fast) {
      fast_forward(x.data_ptr<float>(), losses);
      return reduce_losses(losses, denom, reduction, l.loss_shape, input.dtype());
    }
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data_ptr<T>();
      const T* ys = probabilities ? y.data_ptr<T>() : nullptr;
      for_each_position([&](int64_t i, int64_t row, std::vector<double>& q) {
        if (!coefficients(i, ys ? ys + row : xs, l.s, q)) return;
        const double lse = log_sum_exp(xs + row, l.c, l.s);
        double loss = 0;
        for (int64_t k = 0; k < l.c; ++k) {
          if (q[k] != 0) loss += q[k] * (lse - static_cast<double>(xs[row + k * l.s]));
        }
        losses[i] = loss;
      });
    });
    return reduce_losses(losses, denom, reduction, l.loss_shape, input.dtype());
  }

  std::vector<Tensor> backward(const Tensor& grad) {
    if (GradMode::is_enabled()) return backward_with_ops(grad, saved(2), saved(3));
    Tensor x = saved(0), y = saved(1);
    const std::vector<double> g =
        position_grads(grad, denom, reduction, static_cast<std::size_t>(l.n * l.s));
    if (fast) {
      Tensor gx = detail::empty_for_overwrite(x.shape(), x.dtype());  // every row written
      fast_backward(x.data_ptr<float>(), g, gx.data_ptr<float>());
      return {gx, Tensor(), Tensor()};
    }
    Tensor gx = zeros(x.shape(), x.dtype());
    Tensor gy = target_requires_grad ? zeros(y.shape(), y.dtype()) : Tensor();
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data_ptr<T>();
      const T* ys = probabilities ? y.data_ptr<T>() : nullptr;
      T* gxs = gx.data_ptr<T>();
      T* gys = gy.defined() ? gy.data_ptr<T>() : nullptr;
      for_each_position([&](int64_t i, int64_t row, std::vector<double>& q) {
        if (!coefficients(i, ys ? ys + row : xs, l.s, q)) return;
        const double lse = log_sum_exp(xs + row, l.c, l.s);
        double total = 0;
        for (int64_t k = 0; k < l.c; ++k) total += q[k];
        for (int64_t k = 0; k < l.c; ++k) {
          const double x_k = static_cast<double>(xs[row + k * l.s]);
          gxs[row + k * l.s] = static_cast<T>(g[i] * (total * std::exp(x_k - lse) - q[k]));
          if (gys) gys[row + k * l.s] = static_cast<T>(g[i] * (1 - eps) * weights[k] * (lse - x_k));
        }
      });
    });
    return {gx, gy, Tensor()};
  }

  // The same formulas written with ops (under create_graph, so the gradients can be
  // differentiated again), along the class dim of input [C], [N, C] or [N, C, d...]:
  //   gx = g (Q softmax(x) - q),  Q = sum_c q_c       gy = -g (1 - eps) w log_softmax(x)
  // with g the upstream gradient of each position (divided by denom for mean).
  std::vector<Tensor> backward_with_ops(const Tensor& grad, const Tensor& x,
                                        const Tensor& y) const {
    const int64_t cd = x.dim() == 1 ? 0 : 1;  // the class dim
    const Tensor g = reduction == Reduction::None  ? (cd == 1 ? grad.unsqueeze(1) : grad)
                     : reduction == Reduction::Sum ? grad
                                                   : grad / denom;
    Shape class_shape(static_cast<std::size_t>(x.dim()), 1);  // [1, C, 1...]: w_c broadcast
    class_shape[static_cast<std::size_t>(cd)] = l.c;
    const Tensor w = from_vector(weights, {l.c}, x.dtype()).reshape(class_shape);
    Tensor q;
    if (probabilities) {
      q = w * (y * (1 - eps) + eps / static_cast<double>(l.c));
    } else {  // a constant: q_c of every position, laid out as x
      std::vector<double> all(static_cast<std::size_t>(x.numel()), 0.0);
      std::vector<double> row(static_cast<std::size_t>(l.c));
      for (int64_t i = 0; i < l.n * l.s; ++i) {
        if (!coefficients<double>(i, nullptr, l.s, row)) continue;
        const int64_t n = i / l.s, s = i % l.s;
        for (int64_t k = 0; k < l.c; ++k) all[(n * l.c + k) * l.s + s] = row[k];
      }
      q = from_vector(all, x.shape(), x.dtype());
    }
    const Tensor gx = g * (q.sum({cd}, /*keepdim=*/true) * softmax(x, cd) - q);
    const Tensor gy = target_requires_grad ? g * (-(1 - eps)) * w * log_softmax(x, cd) : Tensor();
    return {gx, gy, Tensor()};
  }
};

// ---- nll_loss ----
// loss_i = -w_t x[i, t] for the class index t of position i (0 if ignored); mean divides by the
// sum of w_t over the positions not ignored. d loss_i / d x[i, t] = -w_t.
struct NllLoss : Function<NllLoss> {
  static constexpr bool allows_undefined_inputs = true;  // optional weight (input, target: checked)
  static constexpr const char* name = "NllLossBackward0";
  static constexpr const char* formula = "l_i = -w_t x[i, t]:  dl_i/dx[i, t] = -w_t";
  ClassLayout l;
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  std::vector<int64_t> indices;
  std::vector<double> weights;
  double denom = 0;
  Shape input_shape;
  DType dtype = DType::Float32;
  Tensor target_, weight_;  // for the double backward (the loss is linear in the input)
  NLLLossFuncOptions options_;

  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                 NLLLossFuncOptions options) {
    const char* op = "nll_loss";
    target_ = target;
    weight_ = weight.defined() ? weight.detach() : Tensor();
    options_ = options;
    l = class_layout(op, input);
    reduction = options.reduction();
    ignore_index = options.ignore_index();
    weights = class_weights(op, weight, input, l);
    indices = class_indices(op, input, target, l, ignore_index);
    input_shape = input.shape();
    dtype = input.dtype();
    Tensor x = input.contiguous();
    std::vector<double> losses(indices.size(), 0.0);
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data_ptr<T>();
      for (int64_t n = 0; n < l.n; ++n) {
        for (int64_t s = 0; s < l.s; ++s) {
          const int64_t i = n * l.s + s, t = indices[i];
          if (t == ignore_index) continue;
          losses[i] = -weights[t] * static_cast<double>(xs[(n * l.c + t) * l.s + s]);
          denom += weights[t];
        }
      }
    });
    return reduce_losses(losses, denom, reduction, l.loss_shape, dtype);
  }

  struct Twice {
    static constexpr const char* name = "NllLossBackwardBackward0";
  };
  // The loss is linear in the input, so the derivative of this backward (create_graph) is the
  // loss itself applied to gg.
  std::vector<Tensor> backward(const Tensor& grad) {
    auto adjoint = [target = target_, weight = weight_, options = options_](const Tensor& gg) {
      return apply<NllLoss>(gg, target, weight, options);
    };
    return {autograd::linear_in_grad<Twice>(
                grad, [&](const Tensor& g) { return input_gradient(g); }, adjoint),
            Tensor(), Tensor()};
  }
  Tensor input_gradient(const Tensor& grad) const {
    const std::vector<double> g = position_grads(grad, denom, reduction, indices.size());
    Tensor gx = zeros(input_shape, dtype);
    dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* gxs = gx.data_ptr<T>();
      for (int64_t n = 0; n < l.n; ++n) {
        for (int64_t s = 0; s < l.s; ++s) {
          const int64_t i = n * l.s + s, t = indices[i];
          if (t != ignore_index) gxs[(n * l.c + t) * l.s + s] = static_cast<T>(-weights[t] * g[i]);
        }
      }
    });
    return gx;
  }
};

Tensor reduce(const Tensor& loss, Reduction reduction) {
  if (reduction == Reduction::Mean) return mean(loss);
  if (reduction == Reduction::Sum) return sum(loss);
  return loss;
}

Tensor clamped_log(const Tensor& t) { return maximum(log(t), scalar_tensor(-100.0, t.dtype())); }

// ---- binary_cross_entropy, elementwise (reduced afterwards) ----
// l = -w (y max(log x, -100) + (1 - y) max(log(1 - x), -100))
// dl/dx = w (x - y) / max((1 - x) x, 1e-12)          (PyTorch's formula, EPSILON = 1e-12)
// dl/dy = w (max(log(1 - x), -100) - max(log x, -100))
struct BinaryCrossEntropy : Function<BinaryCrossEntropy> {
  static constexpr bool allows_undefined_inputs = true;  // optional weight (input, target: checked)
  static constexpr const char* name = "BinaryCrossEntropyBackward0";
  static constexpr const char* formula =
      "l = -w (y log x + (1 - y) log(1 - x)):  dl/dx = w (x - y) / ((1 - x) x)";
  Tensor forward(const Tensor& x, const Tensor& y, const Tensor& weight) {
    save_for_backward({x, y, weight});
    Tensor loss = -(y * clamped_log(x) + (1.0 - y) * clamped_log(1.0 - x));
    return weight.defined() ? loss * weight : loss;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0), y = saved(1), w = saved(2);
    Tensor g = w.defined() ? grad * w : grad;
    Tensor gx = g * (x - y) / maximum((1.0 - x) * x, scalar_tensor(1e-12, x.dtype()));
    Tensor gy = g * (clamped_log(1.0 - x) - clamped_log(x));
    return {gx, gy, Tensor()};
  }
};

// ---- binary_cross_entropy_with_logits, elementwise ----
// With m = max(-x, 0) and lw = 1 + (pos_weight - 1) y (lw = 1 without pos_weight):
//   l = w ((1 - y) x + lw (log(exp(-m) + exp(-x - m)) + m))
// (log(exp(-m) + exp(-x - m)) + m = log(1 + exp(-x)) = -log sigmoid(x), computed stably).
//   dl/dx = w ((pos_weight y + 1 - y) sigmoid(x) - pos_weight y)
//   dl/dy = w (log sigmoid(-x) - pos_weight log sigmoid(x))
struct BinaryCrossEntropyWithLogits : Function<BinaryCrossEntropyWithLogits> {
  static constexpr bool allows_undefined_inputs = true;  // optional weight (input, target: checked)
  static constexpr const char* name = "BinaryCrossEntropyWithLogitsBackward0";
  static constexpr const char* formula =
      "l = -w (p y log s(x) + (1 - y) log(1 - s(x))):  dl/dx = w ((p y + 1 - y) s(x) - p y)";
  static Tensor neg_log_sigmoid(const Tensor& x) {  // log(1 + exp(-x)), stably
    Tensor m = maximum(-x, scalar_tensor(0.0, x.dtype()));
    return log(exp(-m) + exp(-x - m)) + m;
  }
  Tensor forward(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& pos_weight) {
    save_for_backward({x, y, weight, pos_weight});
    Tensor lw = pos_weight.defined() ? (pos_weight - 1.0) * y + 1.0 : Tensor();
    Tensor nls = neg_log_sigmoid(x);
    Tensor loss = (1.0 - y) * x + (lw.defined() ? lw * nls : nls);
    return weight.defined() ? loss * weight : loss;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0), y = saved(1), w = saved(2), pw = saved(3);
    Tensor g = w.defined() ? grad * w : grad;
    Tensor gx, gy;
    if (pw.defined()) {
      Tensor t = pw * y;
      gx = g * ((t + 1.0 - y) * sigmoid(x) - t);
      gy = g * (neg_log_sigmoid(x) * pw - neg_log_sigmoid(-x));
    } else {
      gx = g * (sigmoid(x) - y);
      gy = g * -x;
    }
    return {gx, gy, Tensor(), Tensor()};
  }
};

void check_defined(const char* op, const Tensor& input, const Tensor& target) {
  check(input.defined() && target.defined(), op, ": input and target must be defined tensors");
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(op, input, target);
  check(input.shape() == target.shape(), op, ": target of shape ", target.shape(),
        " must have the input's shape ", input.shape());
  check(is_floating(input.dtype()) && target.dtype() == input.dtype(), op,
        ": expected floating point input and target of the same dtype, got ",
        dtype_name(input.dtype()), " and ", dtype_name(target.dtype()));
}

void check_broadcastable(const char* op, const char* what, const Tensor& w, const Tensor& input) {
  if (!w.defined()) return;
  check(w.dtype() == input.dtype(), op, ": ", what, " must have the input's dtype ",
        dtype_name(input.dtype()), ", got ", dtype_name(w.dtype()));
  check(broadcast_shapes(w.shape(), input.shape(), op) == input.shape(), op, ": ", what,
        " of shape ", w.shape(), " cannot be broadcast to the input's shape ", input.shape());
}

// A Reduction made from an integer out of range (Reduction(7)) would act as some reduction.
void check_reduction(const char* op, Reduction reduction) {
  check(reduction == Reduction::None || reduction == Reduction::Mean || reduction == Reduction::Sum,
        op, ": ", static_cast<int>(reduction),
        " is not a valid value for reduction (None, Mean "
        "or Sum)");
}

}  // namespace

namespace functional {

Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyFuncOptions& options) {
  check_defined("cross_entropy", input, target);
  check_reduction("cross_entropy", options.reduction());
  return apply<CrossEntropy>(input, target, options.weight(), options);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options) {
  check_defined("nll_loss", input, target);
  check_reduction("nll_loss", options.reduction());
  return apply<NllLoss>(input, target, options.weight(), options);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options) {
  check_defined("mse_loss", input, target);
  check_reduction("mse_loss", options.reduction());
  check(broadcast_shapes(target.shape(), input.shape(), "mse_loss") == input.shape(),
        "mse_loss: target of shape ", target.shape(), " cannot be broadcast to input ",
        input.shape());
  Tensor d = input - target;
  return reduce(d * d, options.reduction());
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options) {
  check_defined("l1_loss", input, target);
  check_reduction("l1_loss", options.reduction());
  check(broadcast_shapes(target.shape(), input.shape(), "l1_loss") == input.shape(),
        "l1_loss: target of shape ", target.shape(), " cannot be broadcast to input ",
        input.shape());
  return reduce(abs(input - target), options.reduction());
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options) {
  const char* op = "binary_cross_entropy";
  check_reduction(op, options.reduction());
  check_same_shape(op, input, target);
  check_broadcastable(op, "weight", options.weight(), input);
  for (double v : input.to_vector<double>()) {
    check(v >= 0 && v <= 1, op, ": all elements of input should be between 0 and 1, found ", v,
          " (input ", input.shape(), ")");
  }
  return reduce(apply<BinaryCrossEntropy>(input, target, options.weight()), options.reduction());
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options) {
  const char* op = "binary_cross_entropy_with_logits";
  check_reduction(op, options.reduction());
  check_same_shape(op, input, target);
  check_broadcastable(op, "weight", options.weight(), input);
  check_broadcastable(op, "pos_weight", options.pos_weight(), input);
  return reduce(
      apply<BinaryCrossEntropyWithLogits>(input, target, options.weight(), options.pos_weight()),
      options.reduction());
}

}  // namespace functional

// ---- modules ----

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyFuncOptions o) : options(std::move(o)) {
  if (options.weight().defined()) register_buffer("weight", options.weight());
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  ForwardScope scope(*this);

  return functional::cross_entropy(input, target, options);
}

NLLLoss::NLLLoss(NLLLossFuncOptions o) : options(std::move(o)) {
  if (options.weight().defined()) register_buffer("weight", options.weight());
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  ForwardScope scope(*this);

  return functional::nll_loss(input, target, options);
}

MSELoss::MSELoss(MSELossFuncOptions o) : options(o) {}
Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  ForwardScope scope(*this);

  return functional::mse_loss(input, target, options);
}

L1Loss::L1Loss(L1LossFuncOptions o) : options(o) {}
Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  ForwardScope scope(*this);

  return functional::l1_loss(input, target, options);
}

BCELoss::BCELoss(BinaryCrossEntropyFuncOptions o) : options(std::move(o)) {
  if (options.weight().defined()) register_buffer("weight", options.weight());
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  ForwardScope scope(*this);

  return functional::binary_cross_entropy(input, target, options);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BinaryCrossEntropyWithLogitsFuncOptions o)
    : options(std::move(o)) {
  if (options.weight().defined()) register_buffer("weight", options.weight());
  if (options.pos_weight().defined()) register_buffer("pos_weight", options.pos_weight());
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  ForwardScope scope(*this);

  return functional::binary_cross_entropy_with_logits(input, target, options);
}

}  // namespace ember::nn
