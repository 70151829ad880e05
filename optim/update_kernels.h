// The optimizers' elementwise updates (optim/optimizers.cpp), each written once over Highway and
// compiled for every target (update_kernels.cpp, core/kernels/README.md), beside its plain loop:
// the loop body is PyTorch 1.13's _single_tensor_<name> for one element, operation by operation
// in the parameter's type T, rounded as optimizers.cpp's top comment says, and the vector kernel
// does the same operations in the same order (tests/optim/test_update_kernels.cpp checks every
// bit on every target this CPU has).
#pragma once

#include <cstdint>

namespace ember::optim {

// One parameter's arrays for an Adam or AdamW step (max_sq null without amsgrad).
template <typename T>
struct AdamArrays {
  T* param;
  const T* grad;
  T* exp_avg;
  T* exp_avg_sq;
  T* max_sq;
};

// Its step's constants, each rounded to T once, as PyTorch passes them to its kernels.
template <typename T>
struct AdamConstants {
  T beta1, beta2, one_minus_beta1, one_minus_beta2;
  T weight_decay;  // Adam's L2 term: grad.add(param, alpha=weight_decay)
  T decay;         // AdamW's 1 - lr * weight_decay
  T bias_correction2_sqrt, eps, neg_step_size;
  bool decoupled, maximize, amsgrad, l2;  // AdamW; maximize; amsgrad; Adam with weight decay
};

// Elements [begin, end) of one Adam or AdamW step.
template <typename T>
void adam_update(const AdamArrays<T>& a, const AdamConstants<T>& c, int64_t begin, int64_t end);
template <typename T>
void adam_update_plain(const AdamArrays<T>& a, const AdamConstants<T>& c, int64_t begin,
                       int64_t end);

// One parameter's SGD step: its arrays (buffer null without momentum) and constants.
template <typename T>
struct SgdArrays {
  T* param;
  const T* grad;
  T* buffer;
};

template <typename T>
struct SgdConstants {
  T weight_decay, momentum, one_minus_dampening, neg_lr;
  bool maximize, decay, first, nesterov;  // decay: weight_decay != 0; first: the buffer is new
};

// Elements [begin, end) of one SGD step.
template <typename T>
void sgd_update(const SgdArrays<T>& a, const SgdConstants<T>& c, int64_t begin, int64_t end);
template <typename T>
void sgd_update_plain(const SgdArrays<T>& a, const SgdConstants<T>& c, int64_t begin, int64_t end);

// One parameter's RMSprop step (buffer null without momentum, grad_avg null unless centered).
template <typename T>
struct RmspropArrays {
  T* param;
  const T* grad;
  T* square_avg;
  T* buffer;
  T* grad_avg;
};

template <typename T>
struct RmspropConstants {
  T alpha, one_minus_alpha, weight_decay, eps, momentum, neg_lr;
  bool maximize, decay;  // decay: weight_decay != 0
};

template <typename T>
void rmsprop_update(const RmspropArrays<T>& a, const RmspropConstants<T>& c, int64_t begin,
                    int64_t end);
template <typename T>
void rmsprop_update_plain(const RmspropArrays<T>& a, const RmspropConstants<T>& c, int64_t begin,
                          int64_t end);

// One parameter's Adagrad step.
template <typename T>
struct AdagradArrays {
  T* param;
  const T* grad;
  T* sum;
};

template <typename T>
struct AdagradConstants {
  T weight_decay, eps, neg_clr;  // neg_clr: -lr / (1 + (step - 1) lr_decay)
  bool maximize, decay;          // decay: weight_decay != 0
};

template <typename T>
void adagrad_update(const AdagradArrays<T>& a, const AdagradConstants<T>& c, int64_t begin,
                    int64_t end);
template <typename T>
void adagrad_update_plain(const AdagradArrays<T>& a, const AdagradConstants<T>& c, int64_t begin,
                          int64_t end);

}  // namespace ember::optim
