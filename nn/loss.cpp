// Loss functions: the differentiable ops (one struct each, forward beside backward) and their
// functional and module forms.
#include "nn/loss.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/autograd/log.h"
#include "core/base/grad_mode.h"
#include "core/base/parallel.h"
#include "core/graph/function.h"
#include "core/kernels/exp.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/reduce_kernels.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"

namespace ember::nn {

using autograd::apply;
using autograd::OpFunction;

namespace {

// ---- the layout shared by cross_entropy and nll_loss ----
// input [N, C, d1, ...] is read as [N, C, S] (S = d1 * ...), [C] as [1, C, 1]; the per-position
// loss (reduction none) has shape [N, d1, ...] ([] for [C]).
struct ClassLayout {
  const char* op = "";
  Shape input_shape;
  int64_t n = 1, c = 1, s = 1;
  Shape loss_shape;

  // N * S, checked: with C = 0 the input is empty whatever N and S are.
  int64_t positions() const { return checked_mul(n, s, op); }

  // A vector of `count` values, count being C or a number of positions: no more than the
  // materialised input holds (an input with no elements, whose other dims may be huge, takes
  // empty_input_loss and makes none). A count that cannot be allocated is still an Error naming
  // the op and the input's shape, never std::length_error or std::bad_alloc.
  template <typename T>
  std::vector<T> vector(int64_t count, T value = T()) const {
    try {
      return std::vector<T>(static_cast<std::size_t>(count), value);
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    fail(op, ": cannot allocate ", count, " values of ", sizeof(T), " bytes for input of shape ",
         input_shape, " (expected its classes and positions to fit in memory)");
  }
};

ClassLayout class_layout(const char* op, const Tensor& input) {
  check(input.dim() >= 1, op, ": expected input of shape [C], [N, C] or [N, C, d1, ...], got ",
        input.shape());
  check(is_floating(input.dtype()), op, ": expected a floating point input, got ",
        dtype_name(input.dtype()), " (shape ", input.shape(), ")");
  numel_of(input.shape(), op);  // an expanded input may count beyond int64
  ClassLayout l;
  l.op = op;
  l.input_shape = input.shape();
  if (input.dim() == 1) {
    l.c = input.size(0);
    return l;
  }
  l.n = input.size(0);
  l.c = input.size(1);
  l.loss_shape.push_back(l.n);
  for (int64_t d = 2; d < input.dim(); ++d) {
    l.s = mul_wrap(l.s, input.size(d));  // an empty input's other dims may be huge
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

void check_class_weight(const char* op, const Tensor& weight, const Tensor& input,
                        const ClassLayout& l) {
  if (!weight.defined()) return;
  check(weight.dim() == 1 && weight.size(0) == l.c && weight.dtype() == input.dtype(), op,
        ": expected weight of shape [", l.c, "] and dtype ", dtype_name(input.dtype()),
        " (one per class of input ", input.shape(), "), got ", weight.shape(), " ",
        dtype_name(weight.dtype()));
}

std::vector<double> class_weights(const char* op, const Tensor& weight, const Tensor& input,
                                  const ClassLayout& l) {
  check_class_weight(op, weight, input, l);
  if (!weight.defined()) return l.vector<double>(l.c, 1.0);
  return weight.to_vector<double>();
}

// The loss of an input with no elements, as PyTorch's: no position has a class to pick (N * S is
// 0, or C is 0 and every target is ignored), so reduction none gives zeros of the loss's shape,
// sum 0 and mean 0 / 0 = nan. Nothing per class or per position is made: an empty input's other
// dims may be huge ([0, 2^62]), and the answer does not depend on them.
Tensor empty_input_loss(Reduction reduction, const Shape& loss_shape, DType dtype) {
  if (reduction == Reduction::None) return zeros(loss_shape, dtype);
  return scalar_tensor(reduction == Reduction::Sum ? 0.0 : std::numeric_limits<double>::quiet_NaN(),
                       dtype);
}

// The per-position losses reduced: a tensor of loss_shape (none), their sum, or sum / denom.
// A mean over a total weight of 0 (every position ignored or of weight 0) is nan, as PyTorch's
// nll part 0 / 0 makes it even when label smoothing adds a nonzero sum. The total rounds to the
// dtype (a float32 sum past 3.4e38 is inf, as PyTorch's), not through scalar_tensor, which
// refuses a value out of the dtype's range.
Tensor reduce_losses(const std::vector<double>& losses, double denom, Reduction reduction,
                     const Shape& loss_shape, DType dtype) {
  if (reduction == Reduction::None) return from_vector(losses, loss_shape, dtype);
  double total = 0;
  for (double v : losses) total += v;
  if (reduction == Reduction::Mean) {
    total = denom == 0 ? std::numeric_limits<double>::quiet_NaN() : total / denom;
  }
  return from_vector({total}, {}, dtype);
}

// The upstream gradient of position i: g[i] (none), g (sum) or g / denom (mean).
std::vector<double> position_grads(const Tensor& grad, double denom, Reduction reduction,
                                   std::size_t count) {
  if (reduction == Reduction::None) return grad.contiguous().to_vector<double>();
  double g = grad.item();
  if (reduction == Reduction::Mean) g /= denom;
  return std::vector<double>(count, g);
}

// PyTorch's reduction of nll_loss over the positions of a [C] or [N, C] input
// (nll_loss_out_frame, aten/src/ATen/native/LossNLL.cpp), in the input's type T: the picked
// log-probabilities -w_t x[i, t] are added in a cascade of partial sums, 16 positions per
// level (level 0 collects -x w for 16 positions, then passes its sum up to level 1, ...), the
// weights w_t likewise (their sum is the mean's divisor; without weights it is the count of
// positions not ignored). The levels are then added from the lowest. A float32 loss so rounds
// as PyTorch's: a mean over 512 positions summed in one float would drift from it by ulps.
template <typename T>
struct NllSums {
  T loss = 0, total_weight = 0;
};

template <typename T>
NllSums<T> nll_cascade(const std::vector<T>& picked, const std::vector<int64_t>& indices,
                       const std::vector<double>& weights, bool weighted, int64_t ignore_index) {
  constexpr int kLevels = 8;
  const auto n = static_cast<int64_t>(indices.size());
  int64_t ceil_log2 = 0;
  while (ceil_log2 < 63 && (int64_t{1} << ceil_log2) < n) ++ceil_log2;
  const int64_t level_power = std::max<int64_t>(4, ceil_log2 / kLevels);
  const int64_t level_mask = (int64_t{1} << level_power) - 1;
  T loss[kLevels] = {}, weight[kLevels] = {};
  int64_t ignored = 0;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t t = indices[static_cast<std::size_t>(b)];
    if (t == ignore_index) {
      ++ignored;
      continue;
    }
    const T x = picked[static_cast<std::size_t>(b)];
    if (weighted) {
      const auto w = static_cast<T>(weights[static_cast<std::size_t>(t)]);
      loss[0] -= x * w;
      weight[0] += w;
    } else {
      loss[0] -= x;
    }
    for (int j = 0; j + 1 < kLevels; ++j) {
      if ((b & (level_mask << (j * level_power))) != 0) break;
      loss[j + 1] += loss[j];
      weight[j + 1] += weight[j];
      loss[j] = 0;
      weight[j] = 0;
    }
  }
  NllSums<T> sums;
  for (int j = 0; j < kLevels; ++j) sums.loss += loss[j];
  if (weighted) {
    for (int j = 0; j < kLevels; ++j) sums.total_weight += weight[j];
  } else {
    sums.total_weight = static_cast<T>(n - ignored);
  }
  return sums;
}

// nll_loss of the picked values x[i, t_i] (0 where ignored) as PyTorch's nll_loss_out_frame
// computes it in T: -x w_t per position (none), or nll_cascade's sum, divided by the total
// weight for mean (stored in *total_weight for the backward).
template <typename T>
Tensor nll_from_picked(const std::vector<T>& picked, const std::vector<int64_t>& indices,
                       const std::vector<double>& weights, bool weighted, int64_t ignore_index,
                       Reduction reduction, const Shape& loss_shape, DType dtype,
                       double* total_weight) {
  if (reduction == Reduction::None) {
    std::vector<T> out(picked.size(), T(0));
    for (std::size_t i = 0; i < picked.size(); ++i) {
      const int64_t t = indices[i];
      if (t != ignore_index) out[i] = -picked[i] * static_cast<T>(weights[t]);
    }
    return from_vector(out, loss_shape, dtype);
  }
  const NllSums<T> sums = nll_cascade(picked, indices, weights, weighted, ignore_index);
  *total_weight = static_cast<double>(sums.total_weight);
  // An empty batch: 0 / 0 = nan, as PyTorch's mean.
  const T loss = reduction == Reduction::Sum ? sums.loss : sums.loss / sums.total_weight;
  return scalar_tensor(static_cast<double>(loss), dtype);
}

// NllLossBackward0's gradient at each position's target, as PyTorch's nll_loss_backward
// rounds it in T: w_t (-(g / W)) for mean (W: nll_cascade's total weight), w_t (-g) for sum,
// -w_t g_i for none (w_t = 1 without weights); 0 for an ignored position.
template <typename T>
std::vector<T> nll_target_grads(const Tensor& grad, Reduction reduction, double total_weight,
                                const std::vector<int64_t>& indices,
                                const std::vector<double>& weights, int64_t ignore_index) {
  std::vector<T> a(indices.size(), T(0));
  std::vector<T> g_none;
  if (reduction == Reduction::None) g_none = grad.contiguous().to_vector<T>();
  const T g = reduction == Reduction::None ? T(0) : static_cast<T>(grad.item());
  const T shared = reduction == Reduction::Mean ? -(g / static_cast<T>(total_weight)) : -g;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const int64_t t = indices[i];
    if (t == ignore_index) continue;
    const auto w = static_cast<T>(weights[static_cast<std::size_t>(t)]);
    a[i] = reduction == Reduction::None ? -w * g_none[i] : w * shared;  // 1 * shared is exact
  }
  return a;
}

// ---- cross_entropy ----
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
// CrossEntropy's backward is this formula written with ops. Class indices without label
// smoothing over a [C] or [N, C] input (a language model's logits [N, C], C = 50257) take
// PyTorch's own road, forward and fused backward, below; every other target sums each
// position's loss in double (position_losses), and its first-order backward is the formula.

// The coefficients q_c of each position (see above): its target, the smoothing and the weights.
struct ClassTargets {
  int64_t classes = 0;
  bool probabilities = false;    // class probabilities (of the input's shape), else indices
  double eps = 0;                // label_smoothing
  int64_t ignore_index = -100;   // class indices only
  std::vector<int64_t> indices;  // class indices, one per position
  std::vector<double> weights;   // w_c (all 1 without a weight)

  // Whether PyTorch's loss multiplies every class's log p_c by its coefficient, a zero one too
  // (probabilities: -(log p y w).sum(); label smoothing: -(log p w).sum()), so that a -inf
  // log p_c of coefficient 0 makes the loss nan; a class index alone picks log p_t only.
  bool every_class() const { return probabilities || eps > 0; }

  // q_c of one position, for c in [0, C), from its probabilities y (stride apart) or its class
  // index; false when the position is ignored.
  template <typename T>
  bool coefficients(int64_t position, const T* y, int64_t stride, std::vector<double>& q) const {
    const double smooth = eps / static_cast<double>(classes);
    if (probabilities) {
      for (int64_t k = 0; k < classes; ++k) {
        q[k] = weights[k] * (static_cast<double>(y[k * stride]) * (1 - eps) + smooth);
      }
      return true;
    }
    const int64_t t = indices[position];
    if (t == ignore_index) return false;
    for (int64_t k = 0; k < classes; ++k) q[k] = smooth * weights[k];
    q[t] += (1 - eps) * weights[t];
    return true;
  }
};

// log sum_c exp(x_c) of one position's logits (stride apart), in double, as its two parts
// m = max_c x_c and log_sum = log sum_c exp(x_c - m): -log p_c is log_sum - (x_c - m), as
// PyTorch's log_softmax forms it. m + log_sum then - x_c would lose log_sum beside a huge m
// (logits all -3e38 give log 3 each, not 0).
struct LogSumExp {
  double m = 0, log_sum = 0;
  double minus_log_p(double x) const { return log_sum - (x - m); }
};

template <typename T>
LogSumExp log_sum_exp(const T* x, int64_t c, int64_t stride) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < c; ++k) m = std::max(m, static_cast<double>(x[k * stride]));
  // All -inf or a +inf logit: nan for every class, as PyTorch's log_softmax (x - max is
  // -inf - -inf or inf - inf there), whatever the target.
  if (std::isinf(m)) return {m, std::numeric_limits<double>::quiet_NaN()};
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(x[k * stride]) - m);
  return {m, std::log(sum)};
}

// The loss of every position, sum_c q_c (lse - x_c), in double; y: the probabilities, or null.
// In parallel over positions when there is enough work (each writes only its own loss; q is the
// thread's scratch row), on ember::get_num_threads() threads.
template <typename T>
std::vector<double> position_losses(const T* xs, const T* ys, const ClassLayout& l,
                                    const ClassTargets& targets) {
  const int64_t positions = l.positions();
  std::vector<double> losses = l.vector<double>(positions, 0.0);
  const int threads = positions * l.c > (1 << 16) ? get_num_threads() : 1;
  std::vector<std::vector<double>> scratch(static_cast<std::size_t>(threads),
                                           l.vector<double>(l.c));
  kernels::parallel_for(positions, threads, [&](int64_t i, int thread) {
    const int64_t row = (i / l.s) * l.c * l.s + i % l.s;  // the offset of its class-0 logit
    std::vector<double>& q = scratch[static_cast<std::size_t>(thread)];
    if (!targets.coefficients(i, ys ? ys + row : xs, l.s, q)) return;
    const LogSumExp lse = log_sum_exp(xs + row, l.c, l.s);
    double loss = 0;
    for (int64_t k = 0; k < l.c; ++k) {
      if (q[k] != 0 || targets.every_class()) {
        loss += q[k] * lse.minus_log_p(static_cast<double>(xs[row + k * l.s]));
      }
    }
    losses[static_cast<std::size_t>(i)] = loss;
  });
  return losses;
}

// PyTorch's road, nll_loss(log_softmax(x)) over [N, C] rows, every step in the input's type T
// as PyTorch rounds it (a float32 loss is not the exact loss rounded once: in a confident row
// the sum of exponentials loses its small terms, and the loss with them):
//   m = max_c x_c,  e_c = exp(x_c - m) (core/kernels/exp.h),  s = sum_c e_c in PyTorch's order
//   (kernels::vec_lane_sum),  lse = log(s),  log p_c = (x_c - m) - lse
//   loss: nll_cascade's sums of -w_t log p_t (mean: divided by the sum of the w_t, in T)
// Backward, as NllLossBackward0 then LogSoftmaxBackward0: the upstream gradient of position i
// reaches log p_t as a_i = w_t (-(g / W)) (mean; -g for sum, -w_t g_i for none) and
//   dx_c = 0 - exp(log p_c) a_i  (c != t),   dx_t = a_i - exp(log p_t) a_i
// (the last in one rounding, the fused multiply-add PyTorch's compiled kernel does), from m and
// lse kept per row. Besides PyTorch's bits, this road is the fast one: the general road's sums
// in double, with a scalar exp per class, cost a few percent of a GPT-2 training step.

// m and lse of every row (values of T), kept by the forward for the backward.
struct RowLogSumExp {
  std::vector<double> max, lse;
};

// log p_t of every row (ignored ones too, as PyTorch's log_softmax runs over every row; their
// value is not used), and each row's m and lse in `rows`.
template <typename T>
std::vector<T> log_softmax_at_targets(const T* xs, const ClassLayout& l,
                                      const ClassTargets& targets, RowLogSumExp& rows) {
  const int64_t n = l.n, c = l.c;
  rows.max = l.vector<double>(n, 0.0);
  rows.lse = l.vector<double>(n, 0.0);
  std::vector<T> picked = l.vector<T>(n);
  const int threads = n * c > (1 << 16) ? get_num_threads() : 1;
  std::vector<std::vector<T>> scratch(static_cast<std::size_t>(threads), l.vector<T>(c));
  kernels::parallel_for(n, threads, [&](int64_t i, int thread) {
    const T* x = xs + i * c;
    T* e = scratch[static_cast<std::size_t>(thread)].data();
    // max_row skips a nan, whose exp(nan - m) then makes s, lse and the row nan; a row of -inf
    // (m = -inf) or with +inf (m = inf) gives nan through x - m, as in PyTorch.
    const T m = kernels::max_row(x, c);
    kernels::exp_row(x, m, e, c);
    const T lse = std::log(kernels::vec_lane_sum(e, c));
    rows.max[static_cast<std::size_t>(i)] = m;
    rows.lse[static_cast<std::size_t>(i)] = lse;
    const int64_t t = targets.indices[static_cast<std::size_t>(i)];
    if (t != targets.ignore_index) picked[static_cast<std::size_t>(i)] = (x[t] - m) - lse;
  });
  return picked;
}

// dx of every row from its m and lse, and a_i, the gradient reaching log p_t (nll_target_grads;
// 0 for an ignored row, whose gradient is then 0 - e_c * 0).
template <typename T>
void log_softmax_nll_backward(const T* xs, int64_t n, int64_t c, const ClassTargets& targets,
                              const RowLogSumExp& rows, const std::vector<T>& a, T* gxs) {
  const int threads = n * c > (1 << 16) ? get_num_threads() : 1;
  kernels::parallel_for(n, threads, [&](int64_t i, int) {
    const T* x = xs + i * c;
    T* y = gxs + i * c;
    const auto m = static_cast<T>(rows.max[static_cast<std::size_t>(i)]);
    const auto lse = static_cast<T>(rows.lse[static_cast<std::size_t>(i)]);
    const T ai = a[static_cast<std::size_t>(i)];
    for (int64_t k = 0; k < c; ++k) y[k] = (x[k] - m) - lse;  // log p_c
    kernels::exp_row(y, T(0), y, c);                          // exp(log p_c - 0) = p_c
    const int64_t t = targets.indices[static_cast<std::size_t>(i)];
    const T p_t = t == targets.ignore_index ? T(0) : y[t];
    for (int64_t k = 0; k < c; ++k) y[k] = T(0) - y[k] * ai;
    if (t != targets.ignore_index) y[t] = std::fma(-p_t, ai, ai);
  });
}

struct CrossEntropy : OpFunction<CrossEntropy> {
  static constexpr bool allows_undefined_inputs = true;  // optional weight (input, target: checked)
  static constexpr const char* name = "CrossEntropyLossBackward0";
  static constexpr const char* formula =
      "l = -sum_c q_c log softmax(x)_c:  dl/dx_c = Q softmax(x)_c - q_c";
  ClassLayout l;
  ClassTargets targets;
  Reduction reduction = Reduction::Mean;
  bool weighted = false;
  double denom = 0;  // the mean's divisor
  bool target_requires_grad = false;
  bool pytorch_road = false;  // class indices, no smoothing, [C] or [N, C]
  bool empty = false;         // an input with no elements (empty_input_loss)
  bool weight_requires_grad = false;
  RowLogSumExp rows;        // (PyTorch's road)
  double total_weight = 0;  // the mean's divisor as PyTorch sums it (PyTorch's road)

  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                 CrossEntropyFuncOptions options) {
    const char* op = "cross_entropy";
    l = class_layout(op, input);
    // Materialised first: an expanded input too large for memory is the allocator's Error here,
    // and the vectors of C classes and of positions below are then no larger than x (an input
    // with no elements makes none: empty_input_loss).
    const Tensor x = input.contiguous();
    reduction = options.reduction();
    targets.classes = l.c;
    targets.eps = options.label_smoothing();
    targets.ignore_index = options.ignore_index();
    check(targets.eps >= 0 && targets.eps <= 1, op, ": label_smoothing must be in [0, 1], got ",
          targets.eps);
    weighted = weight.defined();
    weight_requires_grad = weighted && weight.requires_grad();  // class probabilities only
    empty = x.numel() == 0;
    targets.weights = empty ? (check_class_weight(op, weight, input, l), std::vector<double>())
                            : class_weights(op, weight, input, l);
    targets.probabilities = target.shape() == input.shape();
    if (targets.probabilities) {
      check(target.dtype() == input.dtype(), op, ": expected class probabilities of dtype ",
            dtype_name(input.dtype()), " as target (its shape equals the input's, ", input.shape(),
            "), got ", dtype_name(target.dtype()));
      check(targets.ignore_index < 0, op, ": ignore_index (", targets.ignore_index,
            ") is not supported for class probability targets");
      target_requires_grad = target.requires_grad();
      // PyTorch divides by input.numel() / C: 0 / 0 (nan) when there are no classes.
      denom = l.c == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(l.n * l.s);
    } else {
      targets.indices = class_indices(op, input, target, l, targets.ignore_index);
      if (empty) return empty_input_loss(reduction, l.loss_shape, input.dtype());
      for (int64_t t : targets.indices) {
        denom += t == targets.ignore_index ? 0.0 : targets.weights[t];
      }
    }
    if (empty) return empty_input_loss(reduction, l.loss_shape, input.dtype());
    pytorch_road = !targets.probabilities && targets.eps == 0 && l.s == 1;
    const Tensor y = targets.probabilities ? target.contiguous() : Tensor();
    // The fused backward reads x; the backward differentiates through input and target
    // themselves (the same tensors unless copied).
    save_for_backward({x, input, targets.probabilities ? target : Tensor(),
                       weight_requires_grad ? weight : Tensor()});
    Tensor loss;
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data_ptr<T>();
      if (pytorch_road) {
        loss = nll_from_picked(log_softmax_at_targets(xs, l, targets, rows), targets.indices,
                               targets.weights, weighted, targets.ignore_index, reduction,
                               l.loss_shape, input.dtype(), &total_weight);
      } else {
        const T* ys = y.defined() ? y.data_ptr<T>() : nullptr;
        loss = reduce_losses(position_losses(xs, ys, l, targets), denom, reduction, l.loss_shape,
                             input.dtype());
      }
    });
    return loss;
  }

  // The formula with ops, along the class dim of input [C], [N, C] or [N, C, d...]:
  //   gx = g (Q softmax(x) - q),  Q = sum_c q_c       gy = -g (1 - eps) w log_softmax(x)
  // with g the upstream gradient of each position (divided by denom for mean).
  std::vector<Tensor> backward(const Tensor& grad) const {
    if (empty) {  // zeros of the input's shape, which has no elements (and so has y's)
      const Tensor gx = zeros(l.input_shape, grad.dtype());
      return {gx, target_requires_grad ? gx : Tensor(),
              weight_requires_grad ? zeros({l.c}, grad.dtype()) : Tensor()};
    }
    const Tensor x = saved(1), y = saved(2);
    const double eps = targets.eps;
    const int64_t cd = x.dim() == 1 ? 0 : 1;  // the class dim
    Tensor g = reduction == Reduction::None  ? (cd == 1 ? grad.unsqueeze(1) : grad)
               : reduction == Reduction::Sum ? grad
                                             : grad / denom;
    if (!targets.probabilities) {
      // A mean over a total weight of 0 has PyTorch's nll gradient -w_t (g / 0) = 0 * inf: nan
      // at every position not ignored. An ignored position's upstream gradient is 0 whatever g
      // is (PyTorch's nll skips it, its smoothing term is masked_fill_'ed), so a g of inf or
      // 1 / 0 reaches it as 0 (0 * (Q p - q) = 0, nan only where its p is nan, as PyTorch's).
      if (reduction == Reduction::Mean && denom == 0)
        g = g * std::numeric_limits<double>::quiet_NaN();
      bool any_ignored = false;
      std::vector<double> kept(targets.indices.size());
      for (std::size_t i = 0; i < kept.size(); ++i) {
        kept[i] = targets.indices[i] != targets.ignore_index;
        any_ignored = any_ignored || kept[i] == 0;
      }
      if (any_ignored) {
        Shape kept_shape = l.loss_shape;  // [N, d...] -> [N, 1, d...] as g's; [] for [C]
        if (cd == 1) kept_shape.insert(kept_shape.begin() + 1, 1);
        g = where(from_vector(kept, kept_shape, DType::Bool), g, scalar_tensor(0.0, x.dtype()));
      }
    }
    Shape class_shape(static_cast<std::size_t>(x.dim()), 1);  // [1, C, 1...]: w_c broadcast
    class_shape[static_cast<std::size_t>(cd)] = l.c;
    // The weight itself when it requires grad (class probabilities), so that a create_graph
    // backward differentiates through it; else its values, a constant.
    const Tensor w = weight_requires_grad
                         ? saved(3).reshape(class_shape)
                         : from_vector(targets.weights, {l.c}, x.dtype()).reshape(class_shape);
    Tensor q;
    if (targets.probabilities) {
      q = w * (y * (1 - eps) + eps / static_cast<double>(l.c));
    } else {  // a constant: q_c of every position, laid out as x
      std::vector<double> all(static_cast<std::size_t>(x.numel()), 0.0);
      std::vector<double> row = l.vector<double>(l.c);
      for (int64_t i = 0; i < l.n * l.s; ++i) {
        if (!targets.coefficients<double>(i, nullptr, l.s, row)) continue;
        const int64_t n = i / l.s, s = i % l.s;
        for (int64_t k = 0; k < l.c; ++k) all[(n * l.c + k) * l.s + s] = row[k];
      }
      q = from_vector(all, x.shape(), x.dtype());
    }
    const Tensor gx = g * (q.sum({cd}, /*keepdim=*/true) * softmax(x, cd) - q);
    const Tensor gy = target_requires_grad ? g * (-(1 - eps)) * w * log_softmax(x, cd) : Tensor();
    // Class probabilities: d loss / d w_c = -sum over positions of g ((1 - eps) y_c + eps / C)
    // log softmax(x)_c, as PyTorch's composite differentiates it.
    Tensor gw;
    if (weight_requires_grad) {
      const Tensor per_class =
          g * (y * (1 - eps) + eps / static_cast<double>(l.c)) * -log_softmax(x, cd);
      std::vector<int64_t> others;
      for (int64_t d = 0; d < x.dim(); ++d) {
        if (d != cd) others.push_back(d);
      }
      gw = others.empty() ? per_class : ember::sum(per_class, others);
    }
    return {gx, gy, gw};
  }

  // PyTorch's road (see above), by the kernels; any other target runs the formula.
  std::vector<Tensor> fused_backward(const Tensor& grad) const {
    if (!pytorch_road) return backward(grad);
    const Tensor x = saved(0);
    Tensor gx = detail::empty_for_overwrite(x.shape(), x.dtype());  // every row written
    dispatch_floating(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> a = nll_target_grads<T>(grad, reduction, total_weight, targets.indices,
                                                   targets.weights, targets.ignore_index);
      log_softmax_nll_backward(x.data_ptr<T>(), l.n, l.c, targets, rows, a, gx.data_ptr<T>());
    });
    return {gx, Tensor(), Tensor()};
  }
};

// ---- nll_loss ----
// loss_i = -w_t x[i, t] for the class index t of position i (0 if ignored); mean divides by the
// sum of w_t over the positions not ignored. d loss_i / d x[i, t] = -w_t. For [C] and [N, C]
// inputs the sums and products round in the input's type as PyTorch's (nll_cascade), so that
// log_softmax then nll_loss gives cross_entropy's bits; [N, C, d...] sums in double.
struct NllLoss : OpFunction<NllLoss> {
  static constexpr bool allows_undefined_inputs = true;  // optional weight (input, target: checked)
  static constexpr const char* name = "NllLossBackward0";
  static constexpr const char* formula = "l_i = -w_t x[i, t]:  dl_i/dx[i, t] = -w_t";
  ClassLayout l;
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  std::vector<int64_t> indices;
  std::vector<double> weights;
  double denom = 0;         // [N, C, d...] only
  double total_weight = 0;  // [C] / [N, C]: the mean's divisor as PyTorch sums it, in T
  bool empty = false;       // an input with no elements (empty_input_loss)
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
    const Tensor x = input.contiguous();  // first, as cross_entropy's
    reduction = options.reduction();
    ignore_index = options.ignore_index();
    empty = x.numel() == 0;
    if (empty) {
      check_class_weight(op, weight, input, l);
    } else {
      weights = class_weights(op, weight, input, l);
    }
    indices = class_indices(op, input, target, l, ignore_index);
    input_shape = input.shape();
    dtype = input.dtype();
    if (empty) return empty_input_loss(reduction, l.loss_shape, dtype);
    if (l.s == 1) {  // [C] or [N, C]: PyTorch's sums in T (nll_cascade)
      Tensor loss;
      dispatch_floating(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* xs = x.data_ptr<T>();
        std::vector<T> picked(indices.size(), T(0));
        for (int64_t n = 0; n < l.n; ++n) {
          const int64_t t = indices[static_cast<std::size_t>(n)];
          if (t != ignore_index) picked[static_cast<std::size_t>(n)] = xs[n * l.c + t];
        }
        loss = nll_from_picked(picked, indices, weights, weight.defined(), ignore_index, reduction,
                               l.loss_shape, dtype, &total_weight);
      });
      return loss;
    }
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
    if (empty) return zeros(input_shape, dtype);
    if (l.s == 1) {  // PyTorch's: -(g / W) (mean) or -g, times w_t when weighted; -w_t g_i (none)
      Tensor gx = zeros(input_shape, dtype);
      dispatch_floating(dtype, [&](auto tag) {
        using T = decltype(tag);
        T* gxs = gx.data_ptr<T>();
        const std::vector<T> a =
            nll_target_grads<T>(grad, reduction, total_weight, indices, weights, ignore_index);
        for (int64_t n = 0; n < l.n; ++n) {
          const int64_t t = indices[static_cast<std::size_t>(n)];
          if (t != ignore_index) gxs[n * l.c + t] = a[static_cast<std::size_t>(n)];
        }
      });
      return gx;
    }
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
struct BinaryCrossEntropy : OpFunction<BinaryCrossEntropy> {
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
struct BinaryCrossEntropyWithLogits : OpFunction<BinaryCrossEntropyWithLogits> {
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

// input - target over their common shape, as PyTorch's mse_loss and l1_loss broadcast them
// (torch.broadcast_tensors); the gradients sum back to each one's shape. Shapes that differ get
// PyTorch's warning, once per process and op as Python shows it once per call site: a target
// [N] for an input [N, 1] makes an [N, N] difference, rarely what was meant.
Tensor broadcast_difference(const char* op, const Tensor& input, const Tensor& target,
                            std::atomic<bool>& warned) {
  OpScope scope(op);
  broadcast_shapes(input.shape(), target.shape(), op);  // or an Error naming op and both shapes
  if (target.shape() != input.shape() && !warned.exchange(true)) {
    logging::init_from_env();  // EMBER_LOG=off (or error) silences the warning
    spdlog::warn(
        "{}: Using a target size ({}) that is different to the input size ({}). This will likely "
        "lead to incorrect results due to broadcasting. Please ensure they have the same size.",
        op, size_str(target.shape()), size_str(input.shape()));
  }
  return input - target;
}

// PyTorch's losses are not differentiable in their weights (nll_loss's and cross_entropy's class
// weights with class-index targets, binary_cross_entropy's weight, the logits form's weight and
// pos_weight): a weight that requires grad, with grad mode on, is refused as PyTorch refuses it
// ("The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'"),
// rather than left without a gradient. (cross_entropy with class probabilities is PyTorch's
// composite, differentiable in its weight: CrossEntropy's backward.)
void check_not_differentiable(const char* op, const char* arg, const Tensor& t) {
  if (!t.defined() || !t.requires_grad() || !GradMode::is_enabled()) return;
  fail(op, ": not differentiable with respect to argument '", arg, "' (shape ", t.shape(),
       "): it cannot have requires_grad true (pass ", arg, ".detach())");
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
  if (target.shape() != input.shape()) {  // class indices: nll_loss's weight
    check_not_differentiable("cross_entropy", "weight", options.weight());
  }
  return apply<CrossEntropy>(input, target, options.weight(), options);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options) {
  check_defined("nll_loss", input, target);
  check_reduction("nll_loss", options.reduction());
  check_not_differentiable("nll_loss", "weight", options.weight());
  return apply<NllLoss>(input, target, options.weight(), options);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options) {
  check_defined("mse_loss", input, target);
  check_reduction("mse_loss", options.reduction());
  // PyTorch's mse_loss is one kernel over the promoted dtype, floating point only ("mse_cpu" not
  // implemented for 'Long'), whatever the reduction.
  const DType dtype = promote(input.dtype(), target.dtype());
  check(is_floating(dtype), "mse_loss: not implemented for ", dtype_name(dtype), " (input ",
        dtype_name(input.dtype()), " ", input.shape(), ", target ", dtype_name(target.dtype()), " ",
        target.shape(), "); expected a floating point input or target");
  // Its kernel reads a bool operand as the promoted dtype (where the `-` operator refuses bool,
  // as l1_loss's composite (input - target).abs() does).
  auto as_dtype = [&](const Tensor& t) { return t.dtype() == DType::Bool ? t.to(dtype) : t; };
  static std::atomic<bool> warned{false};
  Tensor d = broadcast_difference("mse_loss", as_dtype(input), as_dtype(target), warned);
  return reduce(d * d, options.reduction());
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options) {
  check_defined("l1_loss", input, target);
  check_reduction("l1_loss", options.reduction());
  static std::atomic<bool> warned{false};
  return reduce(abs(broadcast_difference("l1_loss", input, target, warned)), options.reduction());
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options) {
  const char* op = "binary_cross_entropy";
  check_reduction(op, options.reduction());
  check_same_shape(op, input, target);
  check_broadcastable(op, "weight", options.weight(), input);
  check_not_differentiable(op, "weight", options.weight());
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
  check_not_differentiable(op, "weight", options.weight());
  check_not_differentiable(op, "pos_weight", options.pos_weight());
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
