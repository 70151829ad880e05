// Products: dot, mv, mm, bmm, and matmul with PyTorch's rules for 1-d, 2-d and batched N-d.
#pragma once

#include "core/tensor/tensor.h"

namespace ember {

Tensor dot(const Tensor& a, const Tensor& b);  // 1-d . 1-d -> 0-d      (DotBackward0)
Tensor mv(const Tensor& a, const Tensor& b);   // 2-d @ 1-d             (MvBackward0)
Tensor mm(const Tensor& a, const Tensor& b);   // 2-d @ 2-d             (MmBackward0)
Tensor bmm(const Tensor& a, const Tensor& b);  // 3-d @ 3-d, same batch (BmmBackward0)
// torch.matmul: dispatches to the above, folding and broadcasting batch dims as PyTorch does,
// so grad_fn names match (e.g. UnsafeViewBackward0 for batched results).
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace ember
