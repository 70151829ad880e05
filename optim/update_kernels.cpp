// The optimizers' elementwise updates on Highway (update_kernels.h): each vector operation here
// is one scalar operation of the plain loop below it (under HWY_ONCE), in the same order, with
// Fma where the plain loop writes std::fma and nowhere else (-ffp-contract=off), so every lane
// rounds as the plain loop does, on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optim/update_kernels.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>

#include "core/kernels/dispatch_by_type.h"
#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"
#include "optim/update_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace ember::optim::HWY_NAMESPACE {

namespace {

namespace hn = hwy::HWY_NAMESPACE;
using kernels::HWY_NAMESPACE::Fma;
using kernels::HWY_NAMESPACE::for_each_vector;
using kernels::HWY_NAMESPACE::load_lanes;
using kernels::HWY_NAMESPACE::store_lanes;

template <typename T>
void AdamRange(const AdamArrays<T>& a, const AdamConstants<T>& c, int64_t begin, int64_t end) {
  for_each_vector<T>(begin, end, [&](int64_t i, auto d, size_t count) {
    auto g = load_lanes(d, a.grad + i, count);
    if (c.maximize) g = hn::Neg(g);
    auto p = load_lanes(d, a.param + i, count);
    if (c.decoupled) {
      p = hn::Mul(p, hn::Set(d, c.decay));
    } else if (c.l2) {
      g = Fma(p, hn::Set(d, c.weight_decay), g);
    }
    auto m = hn::Mul(load_lanes(d, a.exp_avg + i, count), hn::Set(d, c.beta1));
    m = Fma(g, hn::Set(d, c.one_minus_beta1), m);
    auto v = hn::Mul(load_lanes(d, a.exp_avg_sq + i, count), hn::Set(d, c.beta2));
    v = Fma(hn::Mul(hn::Set(d, c.one_minus_beta2), g), g, v);
    store_lanes(d, m, a.exp_avg + i, count);
    store_lanes(d, v, a.exp_avg_sq + i, count);
    if (c.amsgrad) {
      const auto old = load_lanes(d, a.max_sq + i, count);
      v = hn::IfThenElse(hn::Lt(old, v), v, old);  // std::max(old, v), nan and zeros included
      store_lanes(d, v, a.max_sq + i, count);
    }
    const auto denom =
        hn::Add(hn::Div(hn::Sqrt(v), hn::Set(d, c.bias_correction2_sqrt)), hn::Set(d, c.eps));
    p = hn::Add(p, hn::Div(hn::Mul(hn::Set(d, c.neg_step_size), m), denom));
    store_lanes(d, p, a.param + i, count);
  });
}

template <typename T>
void SgdRange(const SgdArrays<T>& a, const SgdConstants<T>& c, int64_t begin, int64_t end) {
  for_each_vector<T>(begin, end, [&](int64_t i, auto d, size_t count) {
    const auto p = load_lanes(d, a.param + i, count);
    auto d_p = load_lanes(d, a.grad + i, count);
    if (c.maximize) d_p = hn::Neg(d_p);
    if (c.decay) d_p = Fma(p, hn::Set(d, c.weight_decay), d_p);
    if (a.buffer != nullptr) {
      auto buf = d_p;
      if (!c.first) {
        buf = hn::Mul(load_lanes(d, a.buffer + i, count), hn::Set(d, c.momentum));
        buf = Fma(d_p, hn::Set(d, c.one_minus_dampening), buf);
      }
      store_lanes(d, buf, a.buffer + i, count);
      d_p = c.nesterov ? Fma(buf, hn::Set(d, c.momentum), d_p) : buf;
    }
    store_lanes(d, Fma(d_p, hn::Set(d, c.neg_lr), p), a.param + i, count);
  });
}

template <typename T>
void RmspropRange(const RmspropArrays<T>& a, const RmspropConstants<T>& c, int64_t begin,
                  int64_t end) {
  for_each_vector<T>(begin, end, [&](int64_t i, auto d, size_t count) {
    const auto alpha = hn::Set(d, c.alpha), one_minus_alpha = hn::Set(d, c.one_minus_alpha);
    auto p = load_lanes(d, a.param + i, count);
    auto g = load_lanes(d, a.grad + i, count);
    if (c.maximize) g = hn::Neg(g);
    if (c.decay) g = Fma(p, hn::Set(d, c.weight_decay), g);
    auto sq = hn::Mul(load_lanes(d, a.square_avg + i, count), alpha);
    sq = Fma(hn::Mul(one_minus_alpha, g), g, sq);
    store_lanes(d, sq, a.square_avg + i, count);
    auto avg = sq;
    if (a.grad_avg != nullptr) {
      auto ga = hn::Mul(load_lanes(d, a.grad_avg + i, count), alpha);
      ga = Fma(g, one_minus_alpha, ga);
      store_lanes(d, ga, a.grad_avg + i, count);
      avg = Fma(hn::Mul(hn::Set(d, T(-1)), ga), ga, sq);
    }
    avg = hn::Add(hn::Sqrt(avg), hn::Set(d, c.eps));
    if (a.buffer != nullptr) {
      auto buf = hn::Mul(load_lanes(d, a.buffer + i, count), hn::Set(d, c.momentum));
      buf = hn::Add(buf, hn::Div(g, avg));
      store_lanes(d, buf, a.buffer + i, count);
      p = Fma(buf, hn::Set(d, c.neg_lr), p);
    } else {
      p = hn::Add(p, hn::Div(hn::Mul(hn::Set(d, c.neg_lr), g), avg));
    }
    store_lanes(d, p, a.param + i, count);
  });
}

template <typename T>
void AdagradRange(const AdagradArrays<T>& a, const AdagradConstants<T>& c, int64_t begin,
                  int64_t end) {
  for_each_vector<T>(begin, end, [&](int64_t i, auto d, size_t count) {
    const auto p = load_lanes(d, a.param + i, count);
    auto g = load_lanes(d, a.grad + i, count);
    if (c.maximize) g = hn::Neg(g);
    if (c.decay) g = Fma(p, hn::Set(d, c.weight_decay), g);
    const auto s = Fma(hn::Mul(hn::Set(d, T(1)), g), g, load_lanes(d, a.sum + i, count));
    store_lanes(d, s, a.sum + i, count);
    const auto std_ = hn::Add(hn::Sqrt(s), hn::Set(d, c.eps));
    store_lanes(d, hn::Add(p, hn::Div(hn::Mul(hn::Set(d, c.neg_clr), g), std_)), a.param + i,
                count);
  });
}

}  // namespace

// The entry points of this target, one per type (HWY_EXPORT takes plain functions).
EMBER_ENTRIES_BY_TYPE(AdamRange)
EMBER_ENTRIES_BY_TYPE(SgdRange)
EMBER_ENTRIES_BY_TYPE(RmspropRange)
EMBER_ENTRIES_BY_TYPE(AdagradRange)

}  // namespace ember::optim::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>

namespace ember::optim {

EMBER_EXPORT_BY_TYPE(AdamRange);
EMBER_EXPORT_BY_TYPE(SgdRange);
EMBER_EXPORT_BY_TYPE(RmspropRange);
EMBER_EXPORT_BY_TYPE(AdagradRange);

template <typename T>
void adam_update(const AdamArrays<T>& a, const AdamConstants<T>& c, int64_t begin, int64_t end) {
  EMBER_DISPATCH_BY_TYPE(T, AdamRange, a, c, begin, end);
}

// PyTorch 1.13's _single_tensor_adam(w) for one element at a time, each line its tensor op.
template <typename T>
void adam_update_plain(const AdamArrays<T>& a, const AdamConstants<T>& c, int64_t begin,
                       int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    T gi = c.maximize ? -a.grad[i] : a.grad[i];
    T pi = a.param[i];
    if (c.decoupled) {
      pi = pi * c.decay;  // param.mul_(1 - lr * wd)
    } else if (c.l2) {
      gi = std::fma(pi, c.weight_decay, gi);  // grad.add(param, alpha=wd)
    }
    T mi = a.exp_avg[i] * c.beta1;                  // exp_avg.mul_(beta1)
    mi = std::fma(gi, c.one_minus_beta1, mi);       //    .add_(grad, alpha=1-beta1)
    T vi = a.exp_avg_sq[i] * c.beta2;               // exp_avg_sq.mul_(beta2)
    vi = std::fma(c.one_minus_beta2 * gi, gi, vi);  //    .addcmul_(grad, grad, 1-beta2)
    a.exp_avg[i] = mi;
    a.exp_avg_sq[i] = vi;
    if (c.amsgrad) {
      vi = std::max(a.max_sq[i], vi);  // torch.maximum(max_sq, exp_avg_sq)
      a.max_sq[i] = vi;
    }
    // (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps), of max_sq with amsgrad
    const T denom = std::sqrt(vi) / c.bias_correction2_sqrt + c.eps;
    a.param[i] = pi + (c.neg_step_size * mi) / denom;  // param.addcdiv_(m, denom, -step_size)
  }
}

template <typename T>
void sgd_update(const SgdArrays<T>& a, const SgdConstants<T>& c, int64_t begin, int64_t end) {
  EMBER_DISPATCH_BY_TYPE(T, SgdRange, a, c, begin, end);
}

// PyTorch 1.13's _single_tensor_sgd for one element at a time.
template <typename T>
void sgd_update_plain(const SgdArrays<T>& a, const SgdConstants<T>& c, int64_t begin, int64_t end) {
  T* p = a.param;
  T* buf = a.buffer;
  for (int64_t i = begin; i < end; ++i) {
    T d_p = c.maximize ? -a.grad[i] : a.grad[i];             // d_p = -grad if maximize
    if (c.decay) d_p = std::fma(p[i], c.weight_decay, d_p);  // d_p.add(param, alpha=wd)
    if (buf) {
      if (c.first) {
        buf[i] = d_p;  // buf = clone(d_p)
      } else {
        buf[i] = buf[i] * c.momentum;                           // buf.mul_(momentum)
        buf[i] = std::fma(d_p, c.one_minus_dampening, buf[i]);  //    .add_(d_p, alpha=1-damp)
      }
      d_p = c.nesterov ? std::fma(buf[i], c.momentum, d_p) : buf[i];  // d_p.add(buf, alpha=mom)
    }
    p[i] = std::fma(d_p, c.neg_lr, p[i]);  // param.add_(d_p, alpha=-lr)
  }
}

template <typename T>
void rmsprop_update(const RmspropArrays<T>& a, const RmspropConstants<T>& c, int64_t begin,
                    int64_t end) {
  EMBER_DISPATCH_BY_TYPE(T, RmspropRange, a, c, begin, end);
}

// PyTorch 1.13's _single_tensor_rmsprop for one element at a time.
template <typename T>
void rmsprop_update_plain(const RmspropArrays<T>& a, const RmspropConstants<T>& c, int64_t begin,
                          int64_t end) {
  T* p = a.param;
  T* sq = a.square_avg;
  T* buf = a.buffer;
  T* ga = a.grad_avg;
  for (int64_t i = begin; i < end; ++i) {
    T gi = c.maximize ? -a.grad[i] : a.grad[i];
    if (c.decay) gi = std::fma(p[i], c.weight_decay, gi);  // grad.add(param, alpha=wd)
    sq[i] = sq[i] * c.alpha;                               // square_avg.mul_(alpha)
    sq[i] = std::fma(c.one_minus_alpha * gi, gi, sq[i]);   //    .addcmul_(g, g, 1-alpha)
    T avg;
    if (ga) {
      ga[i] = ga[i] * c.alpha;                         // grad_avg.mul_(alpha)
      ga[i] = std::fma(gi, c.one_minus_alpha, ga[i]);  //    .add_(grad, alpha=1-alpha)
      // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
      avg = std::sqrt(std::fma(T(-1) * ga[i], ga[i], sq[i]));
    } else {
      avg = std::sqrt(sq[i]);  // square_avg.sqrt()
    }
    avg = avg + c.eps;  // avg.add_(eps)
    if (buf) {
      buf[i] = buf[i] * c.momentum;             // buf.mul_(momentum)
      buf[i] = buf[i] + gi / avg;               //    .addcdiv_(grad, avg)
      p[i] = std::fma(buf[i], c.neg_lr, p[i]);  // param.add_(buf, alpha=-lr)
    } else {
      p[i] = p[i] + (c.neg_lr * gi) / avg;  // param.addcdiv_(grad, avg, -lr)
    }
  }
}

template <typename T>
void adagrad_update(const AdagradArrays<T>& a, const AdagradConstants<T>& c, int64_t begin,
                    int64_t end) {
  EMBER_DISPATCH_BY_TYPE(T, AdagradRange, a, c, begin, end);
}

// PyTorch 1.13's _single_tensor_adagrad for one element at a time.
template <typename T>
void adagrad_update_plain(const AdagradArrays<T>& a, const AdagradConstants<T>& c, int64_t begin,
                          int64_t end) {
  T* p = a.param;
  T* s = a.sum;
  for (int64_t i = begin; i < end; ++i) {
    T gi = c.maximize ? -a.grad[i] : a.grad[i];
    if (c.decay) gi = std::fma(p[i], c.weight_decay, gi);  // grad.add(param, alpha=wd)
    s[i] = std::fma(T(1) * gi, gi, s[i]);                  // state_sum.addcmul_(g, g, 1)
    const T std_ = std::sqrt(s[i]) + c.eps;                // state_sum.sqrt().add_(eps)
    p[i] = p[i] + (c.neg_clr * gi) / std_;                 // param.addcdiv_(g, std, -clr)
  }
}

#define EMBER_UPDATE_INSTANCES(T)                                                                \
  template void adam_update<T>(const AdamArrays<T>&, const AdamConstants<T>&, int64_t, int64_t); \
  template void adam_update_plain<T>(const AdamArrays<T>&, const AdamConstants<T>&, int64_t,     \
                                     int64_t);                                                   \
  template void sgd_update<T>(const SgdArrays<T>&, const SgdConstants<T>&, int64_t, int64_t);    \
  template void sgd_update_plain<T>(const SgdArrays<T>&, const SgdConstants<T>&, int64_t,        \
                                    int64_t);                                                    \
  template void rmsprop_update<T>(const RmspropArrays<T>&, const RmspropConstants<T>&, int64_t,  \
                                  int64_t);                                                      \
  template void rmsprop_update_plain<T>(const RmspropArrays<T>&, const RmspropConstants<T>&,     \
                                        int64_t, int64_t);                                       \
  template void adagrad_update<T>(const AdagradArrays<T>&, const AdagradConstants<T>&, int64_t,  \
                                  int64_t);                                                      \
  template void adagrad_update_plain<T>(const AdagradArrays<T>&, const AdagradConstants<T>&,     \
                                        int64_t, int64_t);
EMBER_UPDATE_INSTANCES(float)
EMBER_UPDATE_INSTANCES(double)
#undef EMBER_UPDATE_INSTANCES

}  // namespace ember::optim
#endif  // HWY_ONCE
