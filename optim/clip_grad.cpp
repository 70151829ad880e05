// Gradient clipping: PyTorch 1.13's torch/nn/utils/clip_grad.py.
#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/kernels/parallel_for.h"

namespace ember::optim {

namespace {

// The p-norm (or max |x| for p = inf) of the values, accumulated in double.
double norm_of(const std::vector<double>& values, double p) {
  if (std::isinf(p)) {
    double m = 0;
    for (double v : values) m = std::isnan(v) || std::isnan(m) ? NAN : std::max(m, std::abs(v));
    return m;
  }
  double sum = 0;
  for (double v : values) sum += p == 2.0 ? v * v : std::pow(std::abs(v), p);
  return p == 2.0 ? std::sqrt(sum) : std::pow(sum, 1.0 / p);
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  check(norm_type > 0, "clip_grad_norm_: norm_type must be positive (or inf), got ", norm_type);
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    // A parameter without a gradient is skipped, as PyTorch's; a missing parameter is a bug.
    check(params[i].defined(), "clip_grad_norm_: parameter ", i, " is an undefined tensor");
    if (params[i].grad().defined()) grads.push_back(params[i].grad());
  }
  if (grads.empty()) return 0.0;
  // torch.stack of the per-gradient norms promotes them to one type: float64 if any gradient is
  // float64 (mixed float32/float64 gradients are not rounded to the first one's type).
  DType dtype = DType::Float32;
  for (const Tensor& g : grads) {
    if (g.dtype() == DType::Float64) dtype = DType::Float64;
  }
  // Each gradient's norm rounded to the gradients' type, then the norm of those norms, as
  // torch.norm(torch.stack([torch.norm(g, p) for g in grads]), p) computes it.
  std::vector<double> norms;
  for (const Tensor& g : grads) {
    const double n = norm_of(g.to_vector<double>(), norm_type);
    norms.push_back(g.dtype() == DType::Float32 ? static_cast<double>(static_cast<float>(n)) : n);
  }
  double total = norm_of(norms, norm_type);
  if (dtype == DType::Float32) total = static_cast<float>(total);
  if (error_if_nonfinite && !std::isfinite(total)) {
    fail("clip_grad_norm_: the total norm of order ", norm_type,
         " for gradients from `parameters` is non-finite (", total,
         "), so it cannot be clipped. To disable this error and scale the gradients by the "
         "non-finite norm anyway, set error_if_nonfinite=false");
  }
  double coef = max_norm / (total + 1e-6);
  if (dtype == DType::Float32)
    coef = static_cast<float>(max_norm / static_cast<float>(total + 1e-6f));
  coef = std::min(coef, 1.0);  // torch.clamp(clip_coef, max=1.0) (nan stays nan)
  if (std::isnan(max_norm / (total + 1e-6))) coef = NAN;
  NoGradGuard no_grad;
  for (Tensor& g : grads) g.mul_(coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    check(p.defined(), "clip_grad_value_: parameter ", i, " is an undefined tensor");
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    check(g.is_contiguous(), "clip_grad_value_: gradients must be contiguous");
    dispatch_floating(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* d = g.data_ptr<T>();
      const T lo = static_cast<T>(-clip_value), hi = static_cast<T>(clip_value);
      const bool nan_bound = std::isnan(clip_value);
      kernels::parallel_ranges(g.numel(), g.numel(), [&](int64_t i0, int64_t i1) {
        // torch.clamp: a nan bound (or value) gives nan; std::max/min would keep d[i].
        for (int64_t i = i0; i < i1; ++i) d[i] = nan_bound ? hi : std::min(std::max(d[i], lo), hi);
      });
    });
    g.storage()->bump_version();
  }
}

}  // namespace ember::optim
