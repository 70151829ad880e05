// GELU (tanh) forward and backward kernels; the derivation is in gelu.h.
#include "core/kernels/gelu.h"

#include <algorithm>

#include "core/kernels/parallel_for.h"
#include "core/kernels/tanh.h"

namespace ember::kernels {

namespace {

// Elements per block: the block's arguments and tanh values stay in L1 between the loops.
constexpr int64_t kBlock = 256;

// u[i] = k (x + c (x x x)), the tanh's argument, in T's arithmetic (the composite's
// pow(x, 3) is x * x * x, then c * that, x + that, k * that).
template <typename T>
void tanh_argument(const T* x, T* u, int64_t n, T k) {
  const T c = static_cast<T>(kGeluTanhCubic);
  for (int64_t i = 0; i < n; ++i) u[i] = k * (x[i] + c * (x[i] * x[i] * x[i]));
}

}  // namespace

template <typename T>
void gelu_tanh_forward(const T* x, T* y, int64_t n, T k, T* t_out) {
  parallel_ranges(n, n, [&](int64_t first, int64_t last) {
    T block[kBlock];
    for (int64_t b = first; b < last; b += kBlock) {
      const int64_t m = std::min(kBlock, last - b);
      const T* xb = x + b;
      T* t = t_out != nullptr ? t_out + b : block;
      tanh_argument(xb, t, m, k);
      tanh_row(t, t, m);
      // 0.5 * x * (1 + t) is (0.5 * x) * (1 + t).
      for (int64_t i = 0; i < m; ++i) y[b + i] = (T(0.5) * xb[i]) * (T(1) + t[i]);
    }
  });
}

template <typename T>
void gelu_tanh_backward(const T* x, const T* tanh_u, const T* dy, T* dx, int64_t n, T k,
                        GeluBackward form) {
  const T c = static_cast<T>(kGeluTanhCubic);
  parallel_ranges(n, n, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; b += kBlock) {
      const int64_t m = std::min(kBlock, last - b);
      const T* xb = x + b;
      const T* t = tanh_u + b;
      const T* gb = dy + b;
      T* out = dx + b;
      if (form == GeluBackward::kSlope) {
        for (int64_t i = 0; i < m; ++i) {
          const T v = xb[i];
          const T slope = T(0.5) * (T(1) + t[i]) + T(0.5) * v * (T(1) - t[i] * t[i]) * k *
                                                       (T(1) + T(3 * kGeluTanhCubic) * v * v);
          out[i] = gb[i] * slope;
        }
      } else {
        // The composite, y = a * b with a = 0.5 * x, b = 1 + t, t = tanh(u), u = k * s,
        // s = x + q, q = c * p, p = pow(x, 3), node by node from the output back:
        for (int64_t i = 0; i < m; ++i) {
          const T v = xb[i], g = gb[i];
          const T a = T(0.5) * v, bb = T(1) + t[i];
          const T grad_a = g * bb;                         // MulBackward0 (a * b), to a
          const T grad_b = g * a;                          //                       to b
          const T grad_u = grad_b * (T(1) - t[i] * t[i]);  // AddBackward0 passes it; TanhBackward0
          const T grad_s = grad_u * k;                     // MulBackward0 (k * s)
          const T grad_p = grad_s * c;  // AddBackward0 passes it; MulBackward0 (c * p)
          const T from_pow = grad_p * (T(3) * (v * v));  // PowBackward0: grad * (3 * pow(x, 2))
          const T from_half = grad_a * T(0.5);           // MulBackward0 (0.5 * x)
          // x's three gradients, summed in the order the engine sums them: the two reaching x
          // through s = x + c x^3 first (AddBackward0's own, then PowBackward0's), then
          // 0.5 * x's. (Float addition is not associative: another order changes last bits.)
          out[i] = (grad_s + from_pow) + from_half;
        }
      }
    }
  });
}

template void gelu_tanh_forward<float>(const float*, float*, int64_t, float, float*);
template void gelu_tanh_forward<double>(const double*, double*, int64_t, double, double*);
template void gelu_tanh_backward<float>(const float*, const float*, const float*, float*, int64_t,
                                        float, GeluBackward);
template void gelu_tanh_backward<double>(const double*, const double*, const double*, double*,
                                         int64_t, double, GeluBackward);

}  // namespace ember::kernels
