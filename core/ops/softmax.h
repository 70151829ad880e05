// softmax and log_softmax, numerically stable (the row maximum is subtracted first).
#pragma once

#include <concepts>

#include "core/tensor/tensor.h"

namespace ember {

Tensor softmax(const Tensor& t, int64_t dim);      // SoftmaxBackward0
Tensor log_softmax(const Tensor& t, int64_t dim);  // LogSoftmaxBackward0
// A dim is an integer: softmax(x, true) does not compile (torch.softmax(x, True): TypeError).
template <std::same_as<bool> B>
Tensor softmax(const Tensor&, B) = delete;
template <std::same_as<bool> B>
Tensor log_softmax(const Tensor&, B) = delete;

}  // namespace ember
