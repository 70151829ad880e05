// GELU (tanh) forward and backward kernels; the derivation is in gelu.h.
//
// The elementwise arithmetic around tanh_row (the tanh's argument, the output, the backward's two
// forms) is written once over Highway (core/kernels/README.md) and compiled for each target: each
// scalar operation of the plain loops below (the reference, under HWY_ONCE) is one vector
// operation here, in the same order and the same precision (no fused multiply-adds: the plain
// loops have none and the build uses -ffp-contract=off), so every lane rounds as the plain loop
// does, on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/gelu.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>

#include "core/kernels/dispatch_by_type.h"
#include "core/kernels/gelu.h"
#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

namespace {

// u = k (x + c ((x x) x)), as tanh_argument.
template <typename T>
void TanhArgument(const T* x, T* u, int64_t n, T k) {
  for_each_vector<T>(0, n, [&](int64_t i, auto d, size_t count) {
    const auto v = load_lanes(d, x + i, count);
    const auto cube = hn::Mul(hn::Mul(v, v), v);
    const auto s = hn::Add(v, hn::Mul(hn::Set(d, static_cast<T>(kGeluTanhCubic)), cube));
    store_lanes(d, hn::Mul(hn::Set(d, k), s), u + i, count);
  });
}

// y = (0.5 x) (1 + t), as gelu_output.
template <typename T>
void GeluOutput(const T* x, const T* t, T* y, int64_t n) {
  for_each_vector<T>(0, n, [&](int64_t i, auto d, size_t count) {
    const auto half_x = hn::Mul(hn::Set(d, T(0.5)), load_lanes(d, x + i, count));
    store_lanes(d, hn::Mul(half_x, hn::Add(hn::Set(d, T(1)), load_lanes(d, t + i, count))), y + i,
                count);
  });
}

// dx from dy, x and t = tanh(u), as gelu_backward_block.
template <typename T>
void GeluBackwardBlock(const T* x, const T* t, const T* dy, T* dx, int64_t n, T k,
                       GeluBackward form) {
  for_each_vector<T>(0, n, [&](int64_t i, auto d, size_t count) {
    const auto v = load_lanes(d, x + i, count), ti = load_lanes(d, t + i, count),
               g = load_lanes(d, dy + i, count);
    const auto half = hn::Set(d, T(0.5)), one = hn::Set(d, T(1)), kv = hn::Set(d, k);
    const auto one_minus_t2 = hn::Sub(one, hn::Mul(ti, ti));
    if (form == GeluBackward::kSlope) {
      const auto three_c = hn::Set(d, static_cast<T>(3 * kGeluTanhCubic));
      const auto left = hn::Mul(half, hn::Add(one, ti));
      const auto du_dx = hn::Add(one, hn::Mul(hn::Mul(three_c, v), v));
      const auto right = hn::Mul(hn::Mul(hn::Mul(hn::Mul(half, v), one_minus_t2), kv), du_dx);
      store_lanes(d, hn::Mul(g, hn::Add(left, right)), dx + i, count);
    } else {
      const auto a = hn::Mul(half, v), bb = hn::Add(one, ti);
      const auto grad_a = hn::Mul(g, bb);
      const auto grad_u = hn::Mul(hn::Mul(g, a), one_minus_t2);
      const auto grad_s = hn::Mul(grad_u, kv);
      const auto grad_p = hn::Mul(grad_s, hn::Set(d, static_cast<T>(kGeluTanhCubic)));
      const auto from_pow = hn::Mul(grad_p, hn::Mul(hn::Set(d, T(3)), hn::Mul(v, v)));
      const auto from_half = hn::Mul(grad_a, half);
      store_lanes(d, hn::Add(hn::Add(grad_s, from_pow), from_half), dx + i, count);
    }
  });
}

}  // namespace

// The entry points of this target, one per type (HWY_EXPORT takes plain functions).
EMBER_ENTRIES_BY_TYPE(TanhArgument)
EMBER_ENTRIES_BY_TYPE(GeluOutput)
EMBER_ENTRIES_BY_TYPE(GeluBackwardBlock)

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>

#include "core/kernels/parallel_for.h"
#include "core/kernels/tanh.h"

namespace ember::kernels {

EMBER_EXPORT_BY_TYPE(TanhArgument);
EMBER_EXPORT_BY_TYPE(GeluOutput);
EMBER_EXPORT_BY_TYPE(GeluBackwardBlock);

namespace {

// Elements per block: the block's arguments and tanh values stay in L1 between the loops.
constexpr int64_t kBlock = 256;

// The plain loops, the reference the Highway kernels above equal bit for bit.

// u[i] = k (x + c (x x x)), the tanh's argument, in T's arithmetic (the composite's
// pow(x, 3) is x * x * x, then c * that, x + that, k * that).
template <typename T>
void tanh_argument(const T* x, T* u, int64_t n, T k) {
  const T c = static_cast<T>(kGeluTanhCubic);
  for (int64_t i = 0; i < n; ++i) u[i] = k * (x[i] + c * (x[i] * x[i] * x[i]));
}

// y[i] = 0.5 * x * (1 + t), that is (0.5 * x) * (1 + t).
template <typename T>
void gelu_output(const T* x, const T* t, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = (T(0.5) * x[i]) * (T(1) + t[i]);
}

template <typename T>
void gelu_backward_block(const T* x, const T* t, const T* dy, T* dx, int64_t n, T k,
                         GeluBackward form) {
  const T c = static_cast<T>(kGeluTanhCubic);
  if (form == GeluBackward::kSlope) {
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i];
      const T slope = T(0.5) * (T(1) + t[i]) + T(0.5) * v * (T(1) - t[i] * t[i]) * k *
                                                   (T(1) + T(3 * kGeluTanhCubic) * v * v);
      dx[i] = dy[i] * slope;
    }
    return;
  }
  // The composite, y = a * b with a = 0.5 * x, b = 1 + t, t = tanh(u), u = k * s,
  // s = x + q, q = c * p, p = pow(x, 3), node by node from the output back:
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i], g = dy[i];
    const T a = T(0.5) * v, bb = T(1) + t[i];
    const T grad_a = g * bb;                         // MulBackward0 (a * b), to a
    const T grad_b = g * a;                          //                       to b
    const T grad_u = grad_b * (T(1) - t[i] * t[i]);  // AddBackward0 passes it; TanhBackward0
    const T grad_s = grad_u * k;                     // MulBackward0 (k * s)
    const T grad_p = grad_s * c;                     // AddBackward0 passes it; MulBackward0 (c * p)
    const T from_pow = grad_p * (T(3) * (v * v));    // PowBackward0: grad * (3 * pow(x, 2))
    const T from_half = grad_a * T(0.5);             // MulBackward0 (0.5 * x)
    // x's three gradients, summed in the order the engine sums them: the two reaching x
    // through s = x + c x^3 first (AddBackward0's own, then PowBackward0's), then
    // 0.5 * x's. (Float addition is not associative: another order changes last bits.)
    dx[i] = (grad_s + from_pow) + from_half;
  }
}

// The loops over blocks or ranges, on the Highway kernels (vector = true) or the plain loops.
template <typename T>
void forward_blocks(const T* x, T* y, int64_t n, T k, T* t_out, bool vector) {
  parallel_ranges(n, n, [&](int64_t first, int64_t last) {
    T block[kBlock];
    for (int64_t b = first; b < last; b += kBlock) {
      const int64_t m = std::min(kBlock, last - b);
      T* t = t_out != nullptr ? t_out + b : block;
      if (!vector) {
        tanh_argument(x + b, t, m, k);
      } else {
        EMBER_DISPATCH_BY_TYPE(T, TanhArgument, x + b, t, m, k);
      }
      tanh_row(t, t, m);
      if (!vector) {
        gelu_output(x + b, t, y + b, m);
      } else {
        EMBER_DISPATCH_BY_TYPE(T, GeluOutput, x + b, t, y + b, m);
      }
    }
  });
}

// (The backward reads what the forward saved: no block needs to stay in L1 between two loops, so
// each thread's range is one call.)
template <typename T>
void backward_ranges(const T* x, const T* tanh_u, const T* dy, T* dx, int64_t n, T k,
                     GeluBackward form, bool vector) {
  parallel_ranges(n, n, [&](int64_t first, int64_t last) {
    const int64_t m = last - first;
    if (!vector) {
      gelu_backward_block(x + first, tanh_u + first, dy + first, dx + first, m, k, form);
    } else {
      EMBER_DISPATCH_BY_TYPE(T, GeluBackwardBlock, x + first, tanh_u + first, dy + first,
                             dx + first, m, k, form);
    }
  });
}

}  // namespace

template <typename T>
void gelu_tanh_forward(const T* x, T* y, int64_t n, T k, T* t_out) {
  forward_blocks(x, y, n, k, t_out, /*vector=*/true);
}

template <typename T>
void gelu_tanh_backward(const T* x, const T* tanh_u, const T* dy, T* dx, int64_t n, T k,
                        GeluBackward form) {
  backward_ranges(x, tanh_u, dy, dx, n, k, form, /*vector=*/true);
}

template <typename T>
void gelu_tanh_forward_plain(const T* x, T* y, int64_t n, T k, T* t_out) {
  forward_blocks(x, y, n, k, t_out, /*vector=*/false);
}

template <typename T>
void gelu_tanh_backward_plain(const T* x, const T* tanh_u, const T* dy, T* dx, int64_t n, T k,
                              GeluBackward form) {
  backward_ranges(x, tanh_u, dy, dx, n, k, form, /*vector=*/false);
}

#define EMBER_GELU_INSTANCES(T)                                                                    \
  template void gelu_tanh_forward<T>(const T*, T*, int64_t, T, T*);                                \
  template void gelu_tanh_backward<T>(const T*, const T*, const T*, T*, int64_t, T, GeluBackward); \
  template void gelu_tanh_forward_plain<T>(const T*, T*, int64_t, T, T*);                          \
  template void gelu_tanh_backward_plain<T>(const T*, const T*, const T*, T*, int64_t, T,          \
                                            GeluBackward);
EMBER_GELU_INSTANCES(float)
EMBER_GELU_INSTANCES(double)
#undef EMBER_GELU_INSTANCES

}  // namespace ember::kernels
#endif  // HWY_ONCE
