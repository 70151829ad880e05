// softmax and log_softmax, numerically stable (the row maximum is subtracted first).
#pragma once

#include "core/tensor.h"

namespace ember {

Tensor softmax(const Tensor& t, int64_t dim);      // SoftmaxBackward0
Tensor log_softmax(const Tensor& t, int64_t dim);  // LogSoftmaxBackward0

// The chapter's masked, scaled softmax in one op (kernels in core/kernels/masked_softmax.h):
//   softmax(x.masked_fill(mask, -inf) / divisor, -1)
// with the same numbers as that composite (its output bit for bit). x is [..., n_q, n_k]
// floating; mask is bool [n_q, n_k] (true = masked), broadcast over the leading dims.
Tensor masked_scaled_softmax(const Tensor& x, const Tensor& mask, double divisor);

}  // namespace ember
