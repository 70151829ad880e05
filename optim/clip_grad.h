// Gradient clipping, as torch.nn.utils.clip_grad_norm_ and clip_grad_value_.
#pragma once

#include <limits>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::optim {

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

// Scales the gradients of `params` (those that have one) in place so that their total norm
// (the norm of the vector of every gradient's norm) is at most max_norm, by
// min(1, max_norm / (total_norm + 1e-6)); returns the total norm before clipping. norm_type is
// any order torch.norm takes, rounded to float as PyTorch rounds it: p != 0 gives
// (sum |g|^p)^(1/p) (a negative p too: a gradient holding a 0 has norm 0), 0 the count of
// elements that are not 0 (of gradients, then of gradient norms that are not 0), kInfNorm the
// largest |g| (an Error for a gradient with no elements, as PyTorch's max()), -kInfNorm the
// smallest, nan a nan norm. With error_if_nonfinite, a nan or inf total norm is an Error and
// nothing is scaled.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient element to [-clip_value, clip_value], in place.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace ember::optim
