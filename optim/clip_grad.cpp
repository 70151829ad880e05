// Gradient clipping: PyTorch 1.13's torch/nn/utils/clip_grad.py.
//
// The gradients are read in place, in blocks of kBlock elements shared out to every thread at
// once (all the parameters' blocks in one parallel loop, so the hundreds of small biases and
// LayerNorm scales of a GPT do not each start a parallel region). Each block's sum of |g|^p is
// accumulated in double, in 8 independent lanes the compiler turns into vector registers; the
// blocks' sums are added in block order. So the result depends on the gradients alone, not on
// the thread count. (Until 2026-11-26 every gradient was copied into a std::vector<double> and
// summed serially: 2% of a GPT-124M training step, plus its allocations.)
#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/kernels/parallel_for.h"

namespace ember::optim {

namespace {

constexpr int64_t kBlock = int64_t{1} << 16;

// A contiguous range of one gradient.
struct Block {
  std::size_t tensor;
  int64_t begin, end;
};

std::vector<Block> blocks_of(const std::vector<Tensor>& grads) {
  std::vector<Block> blocks;
  for (std::size_t t = 0; t < grads.size(); ++t) {
    const int64_t n = grads[t].numel();
    for (int64_t b = 0; b < n; b += kBlock) blocks.push_back({t, b, std::min(n, b + kBlock)});
  }
  return blocks;
}

// The sum of |x|^p over x[0, n) for a finite p, or the largest |x| for p = inf (nan if any is
// nan), in double.
template <typename T>
double block_power_sum(const T* x, int64_t n, double p) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  if (std::isinf(p)) {
    bool nan = false;
    for (; i < n; ++i) {
      const double a = std::abs(static_cast<double>(x[i]));
      nan = nan || std::isnan(a);
      acc[0] = std::max(acc[0], a);
    }
    return nan ? NAN : acc[0];
  }
  if (p == 2.0) {
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const double v = static_cast<double>(x[i + j]);
        acc[j] += v * v;
      }
    }
    for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  } else if (p == 1.0) {
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) acc[j] += std::abs(static_cast<double>(x[i + j]));
    }
    for (; i < n; ++i) acc[0] += std::abs(static_cast<double>(x[i]));
  } else {
    for (; i < n; ++i) acc[0] += std::pow(std::abs(static_cast<double>(x[i])), p);
  }
  double sum = 0;
  for (double a : acc) sum += a;
  return sum;
}

// The p-norm from the sum of |x|^p (or the max for p = inf).
double finish_norm(double power_sum, double p) {
  if (std::isinf(p)) return power_sum;
  return p == 2.0 ? std::sqrt(power_sum) : std::pow(power_sum, 1.0 / p);
}

// Combines two blocks' sums (max for p = inf, keeping nan).
double combine(double a, double b, double p) {
  if (!std::isinf(p)) return a + b;
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

// The gradients of `params` (those that have one), contiguous: a strided gradient is read
// through a contiguous copy, and scaled through its own strides (see clip_grad_norm_).
std::vector<Tensor> gradients(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    // A parameter without a gradient is skipped, as PyTorch's; a missing parameter is a bug.
    check(params[i].defined(), op, ": parameter ", i, " is an undefined tensor");
    if (params[i].grad().defined()) grads.push_back(params[i].grad());
  }
  return grads;
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  check(norm_type > 0, "clip_grad_norm_: norm_type must be positive (or inf), got ", norm_type);
  std::vector<Tensor> grads = gradients(params, "clip_grad_norm_");
  if (grads.empty()) return 0.0;
  const DType dtype = grads.front().dtype();
  std::vector<Tensor> read(grads.size());
  for (std::size_t t = 0; t < grads.size(); ++t) read[t] = grads[t].contiguous();

  // Each gradient's norm rounded to the gradients' type, then the norm of those norms, as
  // torch.norm(torch.stack([torch.norm(g, p) for g in grads]), p) computes it.
  const std::vector<Block> blocks = blocks_of(read);
  std::vector<double> partial(blocks.size());
  int64_t elements = 0;
  for (const Tensor& g : read) elements += g.numel();
  kernels::parallel_ranges(
      static_cast<int64_t>(blocks.size()), elements, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const Block& k = blocks[static_cast<std::size_t>(b)];
          dispatch_floating(read[k.tensor].dtype(), [&](auto tag) {
            using T = decltype(tag);
            const T* x = read[k.tensor].data_ptr<T>() + k.begin;
            partial[static_cast<std::size_t>(b)] = block_power_sum(x, k.end - k.begin, norm_type);
          });
        }
      });
  std::vector<double> norms(read.size(), 0.0);
  std::vector<double> sums(read.size(), 0.0);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    sums[blocks[b].tensor] = combine(sums[blocks[b].tensor], partial[b], norm_type);
  }
  double total_sum = 0;
  for (std::size_t t = 0; t < read.size(); ++t) {
    const double n = finish_norm(sums[t], norm_type);
    norms[t] = dtype == DType::Float32 ? static_cast<double>(static_cast<float>(n)) : n;
    total_sum = combine(total_sum,
                        std::isinf(norm_type) ? norms[t]
                        : norm_type == 2.0    ? norms[t] * norms[t]
                                              : std::pow(std::abs(norms[t]), norm_type),
                        norm_type);
  }
  double total = finish_norm(total_sum, norm_type);
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
  // grads.mul_(clip_coef_clamped). Multiplying by exactly 1 changes no bit (nan stays nan), so
  // a step that does not clip skips the pass over every gradient.
  if (coef == 1.0) return total;
  NoGradGuard no_grad;
  bool strided = false;
  for (const Tensor& g : grads) strided = strided || !g.is_contiguous();
  if (strided) {
    for (Tensor& g : grads) g.mul_(coef);
    return total;
  }
  kernels::parallel_ranges(static_cast<int64_t>(blocks.size()), elements,
                           [&](int64_t b0, int64_t b1) {
                             for (int64_t b = b0; b < b1; ++b) {
                               const Block& k = blocks[static_cast<std::size_t>(b)];
                               dispatch_floating(grads[k.tensor].dtype(), [&](auto tag) {
                                 using T = decltype(tag);
                                 const T c = static_cast<T>(coef);
                                 T* x = grads[k.tensor].data_ptr<T>();
                                 for (int64_t i = k.begin; i < k.end; ++i) x[i] = x[i] * c;
                               });
                             }
                           });
  for (Tensor& g : grads) g.storage()->bump_version();
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads = gradients(params, "clip_grad_value_");
  for (const Tensor& g : grads)
    check(g.is_contiguous(), "clip_grad_value_: gradients must be contiguous (shape ", g.shape(),
          ", strides ", g.strides(), ")");
  const std::vector<Block> blocks = blocks_of(grads);
  int64_t elements = 0;
  for (const Tensor& g : grads) elements += g.numel();
  kernels::parallel_ranges(
      static_cast<int64_t>(blocks.size()), elements, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const Block& k = blocks[static_cast<std::size_t>(b)];
          Tensor& g = grads[k.tensor];
          dispatch_floating(g.dtype(), [&](auto tag) {
            using T = decltype(tag);
            T* d = g.data_ptr<T>();
            const T lo = static_cast<T>(-clip_value), hi = static_cast<T>(clip_value);
            // torch.clamp_: nan stays nan (std::max(nan, lo) is nan, then std::min(nan, hi)).
            for (int64_t i = k.begin; i < k.end; ++i) d[i] = std::min(std::max(d[i], lo), hi);
          });
        }
      });
  for (Tensor& g : grads) g.storage()->bump_version();
}

}  // namespace ember::optim
