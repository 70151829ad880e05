// Selection: sort, argsort, topk (values and int64 indices), and torch.where(cond) / nonzero
// (the indices of the true elements). Ordering as PyTorch's: NaN is greater than every number
// (last when ascending, first when descending); sort is stable (equal values keep their
// order), as PyTorch's CPU sort is. The values are gather(t, dim, indices), so they are
// differentiable (GatherBackward0, where PyTorch prints SortBackward0 or TopkBackward0);
// indices never are.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/args.h"
#include "core/ops/reduce.h"
#include "core/tensor/tensor.h"

namespace ember {

// torch.sort(t, dim, descending): values and indices along dim. `stable` is accepted for
// PyTorch's signature; the sort is always stable.
// A dim is an integer and a flag a bool only (args.h): sort(x, true) or topk(x, 2, false) does
// not compile, as PyTorch refuses a bool dim.
ValuesIndices sort(const Tensor& t, Dim dim = -1, Bool descending = false, Bool stable = false);
Tensor argsort(const Tensor& t, Dim dim = -1, Bool descending = false);

// torch.topk: the k largest (or smallest) elements along dim, sorted (largest first, or
// smallest first). Among equal values the lower index comes first (PyTorch leaves that order
// unspecified).
ValuesIndices topk(const Tensor& t, Dim k, Dim dim = -1, Bool largest = true, Bool sorted = true);

// torch.nonzero(t): int64 [n, t.dim()], the index of each non-zero element in row-major order.
Tensor nonzero(const Tensor& t);
// torch.where(condition) with one argument: one int64 tensor of indices per dim
// (nonzero(condition, as_tuple=True)). The three-argument where is in core/ops/elementwise.h.
std::vector<Tensor> where(const Tensor& condition);

}  // namespace ember
