// Gradient clipping: PyTorch 1.13's torch/nn/utils/clip_grad.py.
//
// clip_grad_norm_ computes total_norm = torch.norm(torch.stack([torch.norm(g, p) for g in
// grads]), p), then scales every gradient by min(1, max_norm / (total_norm + 1e-6)).
//
// The 2-norm (the one everybody clips with) is PyTorch's to the bit, because the clip
// coefficient multiplies every gradient and so reaches every parameter through the optimizer.
// PyTorch 1.13 takes the 2-norm of a contiguous float32 tensor on the CPU in its norm kernel's
// "reduce the last dimension" fast path (aten/src/ATen/native/cpu/ReduceOpsKernel.cpp,
// norm_kernel_tensor_iterator_impl with binary_kernel_reduce_lastdim): one serial pass over the
// whole tensor with ONE vector accumulator of 8 floats (Vectorized<float> with AVX2, the
// capability Debian's build runs here), acc = fma(x, x, acc) lane by lane, then the lanes added
// left to right, the numel % 8 last elements added to that sum one at a time (fma again: GCC
// contracts x * x + sum in that AVX2-compiled file), and a square root, all in float. For the
// 38.6M-element out_head gradient of GPT-124M that float32 sum is about 0.3% below the exact
// norm (each lane adds 4.8M terms to a growing total), and torch.norm of the stacked norms is the
// same kernel again, so PyTorch's clip coefficient is ~0.3% larger than the exact one, and
// Ember takes PyTorch's, not the exact norm.
// A float64 tensor takes PyTorch's generic reduction instead (pytorch_norm2(const double*)).
// Each gradient's pass is serial, as PyTorch's; the gradients are shared out to the threads, so
// the result does not depend on the thread count.
//
// Other orders p (1, inf, 3...) are summed in double in blocks of kBlock elements (their
// PyTorch kernel, binary_kernel_reduce, is not reproduced bit for bit; p = inf is a max, exact
// either way).
//
// The eight-lane pass is written once over Highway (core/kernels/README.md): this file is
// compiled once per target for it, the rest of the file once (HWY_ONCE).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optim/clip_grad.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>

#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::optim::HWY_NAMESPACE {

// acc[j] = fma(x[i], x[i], acc[j]) for every i = j mod 8 in x[0, n), n a multiple of 8, in
// increasing i, from +0: PyTorch's one Vectorized<float> of eight lanes, kept as eight lanes
// whatever the target's width (LaneSums: one vector on AVX2 and AVX-512, two on NEON).
void SquaresInEightLanes(const float* x, int64_t n, float* acc) {
  namespace hn = hwy::HWY_NAMESPACE;
  using kernels::HWY_NAMESPACE::D8;
  const D8 d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  kernels::HWY_NAMESPACE::LaneSums<D8> lanes;
  for (int64_t i = 0; i < n; i += 8) {
    for (int64_t j = i; j < i + 8; j += N) {
      lanes.update(j, [&](hn::Vec<D8> s) {
        const hn::Vec<D8> v = hn::LoadU(d, x + j);
        return kernels::HWY_NAMESPACE::Fma(v, v, s);
      });
    }
  }
  lanes.store(acc);
}

}  // namespace ember::optim::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/cpu.h"
#include "core/base/error.h"
#include "core/base/grad_mode.h"
#include "core/kernels/parallel_for.h"
#include "core/tensor/overlap.h"

namespace ember::optim {

HWY_EXPORT(SquaresInEightLanes);

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

// The order PyTorch's norm kernel takes: torch.norm and torch.linalg.vector_norm round the
// order to float before they use it, for float64 tensors too (torch.norm(t, 1e-300) is the
// 0-"norm", torch.norm(t, 1e300) the inf-norm, torch.norm(t, 2.0000001) the 2-norm).
double kernel_order(double norm_type) { return static_cast<double>(static_cast<float>(norm_type)); }

// Reduces |x| over x[0, n) for an order p other than 2 (already through kernel_order), as
// PyTorch's norm kernel in the accumulation type T (float for float32, double for float64):
// p = 0 counts the elements that are not 0 (nan counts), p = inf and -inf take the largest and
// smallest |x| (nan if any is nan), any other p adds |x|^p, each power taken in T, so a float32
// power overflows to inf (and a negative p's power of 0 is inf) where PyTorch's does. The sum
// itself is kept in double: a sum of terms >= 0 only grows, so rounded to T at the end it
// overflows when PyTorch's float sum does, with less rounding error on the way.
template <typename T>
double block_reduce(const T* x, int64_t n, double p) {
  if (std::isinf(p)) {
    bool nan = false;
    double acc = p > 0 ? 0.0 : INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      const double a = std::abs(static_cast<double>(x[i]));
      nan = nan || std::isnan(a);
      acc = p > 0 ? std::max(acc, a) : std::min(acc, a);
    }
    return nan ? NAN : acc;
  }
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  if (p == 0.0) {
    for (; i < n; ++i) acc[0] += x[i] != T(0) ? 1.0 : 0.0;
  } else if (p == 1.0) {
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) acc[j] += std::abs(static_cast<double>(x[i + j]));
    }
    for (; i < n; ++i) acc[0] += std::abs(static_cast<double>(x[i]));
  } else {
    const T pt = static_cast<T>(p);
    for (; i < n; ++i) acc[0] += static_cast<double>(std::pow(std::abs(x[i]), pt));
  }
  double sum = 0;
  for (double a : acc) sum += a;
  return sum;
}

// The norm of order p in type T from a tensor's reduction (block_reduce, combined): the count
// for p = 0, the max or min for p = +-inf, else sum^(1/p) in T. A tensor with no elements has
// norm 0 for every order, as PyTorch's (torch.norm(torch.tensor([]), -1) is 0, not inf).
template <typename T>
double finish_norm(double reduced, double p, int64_t numel) {
  if (numel == 0) return 0.0;
  if (p == 0.0 || std::isinf(p)) return static_cast<double>(static_cast<T>(reduced));
  const T pt = static_cast<T>(p);
  return static_cast<double>(std::pow(static_cast<T>(reduced), T(1) / pt));
}

// Combines two blocks' reductions (max or min for p = +-inf, keeping nan; else a sum).
double combine(double a, double b, double p) {
  if (!std::isinf(p)) return a + b;
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return p > 0 ? std::max(a, b) : std::min(a, b);
}

// The identity of combine: 0, or +inf for p = -inf.
double combine_start(double p) { return std::isinf(p) && p < 0 ? INFINITY : 0.0; }

// PyTorch's 2-norm of float32 x[0, n) (see the top of this file): one accumulator of 8 floats,
// acc[j] = fma(x, x, acc[j]) over the whole range in order, the lanes added left to right, the
// tail added with fma, the square root; all in float. The accumulator is vectors
// (SquaresInEightLanes): written as eight scalar lanes, GCC splits the loop into scalar and
// 128-bit pieces and the pass runs below one core's bandwidth for one read stream; as one AVX2
// register it runs at that bandwidth. The same fmas lane by lane either way.
float pytorch_norm2(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  float acc[kLanes] = {};
  const int64_t whole = n - n % kLanes;
  cpu::apply_capability();
  HWY_DYNAMIC_DISPATCH(SquaresInEightLanes)(x, whole, acc);
  float sum = acc[0];
  for (int j = 1; j < kLanes; ++j) sum = sum + acc[j];
  for (int64_t i = whole; i < n; ++i) sum = std::fma(x[i], x[i], sum);
  return std::sqrt(sum);
}

// PyTorch's 2-norm of float64 x[0, n): not the fast path above (float32 only) but its generic
// reduction (binary_kernel_reduce with NormTwoOps), which at one thread, or below 32768 elements
// (its GRAIN_SIZE), is one sequential sum acc = fma(x, x, acc) (contracted by GCC), then the
// square root. At more threads and more elements it adds one partial sum per thread, so its result
// depends on its thread count; Ember's is always that of one thread.
double pytorch_norm2(const double* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum = std::fma(x[i], x[i], sum);
  return std::sqrt(sum);
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

// Each gradient as an update that writes it, for updates_overlap.
std::vector<UpdateTensors> one_update_each(const std::vector<Tensor>& grads) {
  std::vector<UpdateTensors> updates(grads.size());
  for (std::size_t t = 0; t < grads.size(); ++t) updates[t].written = {grads[t]};
  return updates;
}

// torch.norm(torch.stack([torch.norm(g) for g in grads])) for p = 2, as PyTorch computes it:
// each gradient's norm in its own type by pytorch_norm2 (one gradient per thread at a time), the
// stacked norms in `dtype` (float64 if any gradient is: a float32 norm converts exactly), and
// their norm by the same kernel.
double total_norm2(const std::vector<Tensor>& grads, DType dtype, int64_t elements) {
  std::vector<double> norms(grads.size());
  kernels::parallel_ranges(
      static_cast<int64_t>(grads.size()), elements, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const Tensor& g = grads[static_cast<std::size_t>(t)];
          dispatch_floating(g.dtype(), [&](auto tag) {
            using T = decltype(tag);
            norms[static_cast<std::size_t>(t)] = pytorch_norm2(g.data_ptr<T>(), g.numel());
          });
        }
      });
  const auto n = static_cast<int64_t>(norms.size());
  if (dtype == DType::Float64) return pytorch_norm2(norms.data(), n);
  const std::vector<float> stacked(norms.begin(), norms.end());
  return pytorch_norm2(stacked.data(), n);
}

// The total norm for an order p other than 2 (through kernel_order): each gradient reduced
// block by block (block_reduce; the blocks shared out to the threads, combined in block order),
// its norm in the gradient's type, then the same norm of those norms in `dtype` (torch.norm of
// torch.stack of them).
double total_norm(const std::vector<Tensor>& grads, const std::vector<Block>& blocks, DType dtype,
                  int64_t elements, double p) {
  std::vector<double> partial(blocks.size());
  kernels::parallel_ranges(
      static_cast<int64_t>(blocks.size()), elements, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const Block& k = blocks[static_cast<std::size_t>(b)];
          dispatch_floating(grads[k.tensor].dtype(), [&](auto tag) {
            using T = decltype(tag);
            const T* x = grads[k.tensor].data_ptr<T>() + k.begin;
            partial[static_cast<std::size_t>(b)] = block_reduce(x, k.end - k.begin, p);
          });
        }
      });
  std::vector<double> reduced(grads.size(), combine_start(p));
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    reduced[blocks[b].tensor] = combine(reduced[blocks[b].tensor], partial[b], p);
  }
  std::vector<double> norms(grads.size());
  for (std::size_t t = 0; t < grads.size(); ++t) {
    dispatch_floating(grads[t].dtype(), [&](auto tag) {
      using T = decltype(tag);
      norms[t] = finish_norm<T>(reduced[t], p, grads[t].numel());
    });
  }
  double total = 0;
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> stacked(norms.begin(), norms.end());
    total = finish_norm<T>(block_reduce(stacked.data(), static_cast<int64_t>(stacked.size()), p), p,
                           static_cast<int64_t>(stacked.size()));
  });
  return total;
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  std::vector<Tensor> grads = gradients(params, "clip_grad_norm_");
  if (grads.empty()) return 0.0;
  // PyTorch takes norm_type = inf as the largest |g| of each gradient by g.abs().max(), which
  // refuses a gradient with no elements; every other order (a huge one that rounds to inf in
  // float included) goes through torch.norm, which gives 0 for it.
  if (norm_type == kInfNorm) {
    for (std::size_t t = 0; t < grads.size(); ++t) {
      check(grads[t].numel() > 0, "clip_grad_norm_: norm_type inf takes the largest |element| of ",
            "each gradient, and gradient ", t, " (shape ", grads[t].shape(),
            ") has no elements (PyTorch's max() refuses it too); use another norm_type");
    }
  }
  // torch.stack of the per-gradient norms promotes them to one type: float64 if any gradient is
  // float64 (mixed float32/float64 gradients are not rounded to the first one's type).
  DType dtype = DType::Float32;
  for (const Tensor& g : grads) {
    if (g.dtype() == DType::Float64) dtype = DType::Float64;
  }
  std::vector<Tensor> read(grads.size());
  for (std::size_t t = 0; t < grads.size(); ++t) read[t] = grads[t].contiguous();

  const std::vector<Block> blocks = blocks_of(read);
  int64_t elements = 0;
  for (const Tensor& g : read) elements += g.numel();
  const double p = kernel_order(norm_type);
  const double total =
      p == 2.0 ? total_norm2(read, dtype, elements) : total_norm(read, blocks, dtype, elements, p);
  if (error_if_nonfinite && !std::isfinite(total)) {
    fail("clip_grad_norm_: the total norm of order ", norm_type,
         " for gradients from `parameters` is non-finite (", total,
         "), so it cannot be clipped. To disable this error and scale the gradients by the "
         "non-finite norm anyway, set error_if_nonfinite=false");
  }
  // clip_coef = max_norm / (total_norm + 1e-6) with total_norm a tensor of type `dtype`: Python
  // calls Tensor.__rdiv__, which is (total_norm + 1e-6).reciprocal() * max_norm, every op in
  // `dtype` (for max_norm 1 or a power of 2 the same as one division).
  double coef;
  if (dtype == DType::Float32) {
    const float denom = static_cast<float>(total) + static_cast<float>(1e-6);
    coef = (1.0f / denom) * static_cast<float>(max_norm);
  } else {
    coef = (1.0 / (total + 1e-6)) * max_norm;
  }
  coef = std::min(coef, 1.0);  // torch.clamp(clip_coef, max=1.0) (nan stays nan)
  // grads.mul_(clip_coef_clamped). Multiplying by exactly 1 changes no bit (nan stays nan), so
  // a step that does not clip skips the pass over every gradient.
  if (coef == 1.0) return total;
  NoGradGuard no_grad;
  bool strided = false;
  for (const Tensor& g : grads) strided = strided || !g.is_contiguous();
  // One gradient after another where they share memory (the same one listed twice is scaled
  // twice, as PyTorch's loop does) or are strided; else one parallel pass over all of them.
  if (strided || updates_overlap(one_update_each(grads))) {
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
  const std::vector<Tensor> targets = gradients(params, "clip_grad_value_");
  // A strided gradient (one set by set_grad: a transpose, a view of a larger buffer) is clamped
  // in a contiguous copy and written back through its own strides, as PyTorch's clamp_ of any
  // layout; one whose elements share memory (an expand) is then copy_'s Error, as clamp_'s.
  std::vector<Tensor> grads(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) grads[t] = targets[t].contiguous();
  const std::vector<Block> blocks = blocks_of(grads);
  int64_t elements = 0;
  for (const Tensor& g : grads) elements += g.numel();
  const auto clamp_blocks = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const Block& k = blocks[static_cast<std::size_t>(b)];
      Tensor& g = grads[k.tensor];
      dispatch_floating(g.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* d = g.data_ptr<T>();
        const T lo = static_cast<T>(-clip_value), hi = static_cast<T>(clip_value);
        // torch.clamp_: nan stays nan (std::max(nan, lo) is nan, then std::min(nan, hi)); a
        // nan bound gives nan everywhere (std::max(d, nan) would keep d).
        if (std::isnan(clip_value)) {
          for (int64_t i = k.begin; i < k.end; ++i) d[i] = hi;
          return;
        }
        for (int64_t i = k.begin; i < k.end; ++i) d[i] = std::min(std::max(d[i], lo), hi);
      });
    }
  };
  // Gradients that share memory (one listed twice) are clamped one after another, as PyTorch's
  // loop; two threads would write one element at once.
  const auto n_blocks = static_cast<int64_t>(blocks.size());
  if (updates_overlap(one_update_each(grads))) {
    clamp_blocks(0, n_blocks);
  } else {
    kernels::parallel_ranges(n_blocks, elements, clamp_blocks);
  }
  for (std::size_t t = 0; t < grads.size(); ++t) {
    if (grads[t].is_same(targets[t])) {
      grads[t].storage()->bump_version();
    } else {
      Tensor target = targets[t];
      target.copy_(grads[t]);
    }
  }
}

}  // namespace ember::optim
#endif  // HWY_ONCE
