// softmax and log_softmax, numerically stable (the row maximum is subtracted first).
#pragma once

#include "core/tensor/tensor.h"

namespace ember {

Tensor softmax(const Tensor& t, int64_t dim);      // SoftmaxBackward0
Tensor log_softmax(const Tensor& t, int64_t dim);  // LogSoftmaxBackward0

}  // namespace ember
