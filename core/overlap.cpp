// Memory overlap checks (see overlap.h).
#include "core/overlap.h"

#include <algorithm>
#include <numeric>

namespace ember {

namespace {

// The first and last element (in storage elements) a tensor touches; numel > 0.
std::pair<int64_t, int64_t> element_range(const Tensor& t) {
  int64_t lo = t.offset(), hi = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = t.strides()[d] * (t.shape()[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}

// PyTorch's is_non_overlapping_and_dense (positive strides only: PyTorch has no negative ones).
bool is_dense(const Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(),
            [&](int64_t a, int64_t b) { return t.strides()[a] < t.strides()[b]; });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t.strides()[d] != expected) return false;
    if (__builtin_mul_overflow(expected, t.shape()[d], &expected)) return false;
  }
  return true;
}

}  // namespace

bool has_internal_overlap(const Tensor& t) {
  // An empty tensor has no elements to share (and its strides may be wrapped products of huge
  // sizes: never compute with them).
  for (int64_t size : t.shape())
    if (size == 0) return false;
  // Fast path (every in-place op and copy_ asks): a contiguous tensor never overlaps itself.
  if (t.is_contiguous()) return false;
  // Dims of size > 1, by increasing |stride|. A zero stride repeats an element (expand).
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.shape()[d] == 1) continue;
    if (t.strides()[d] == 0) return true;
    dims.emplace_back(t.strides()[d] < 0 ? -t.strides()[d] : t.strides()[d], t.shape()[d]);
  }
  std::sort(dims.begin(), dims.end());
  // Each stride jumps past everything the smaller ones reach: no two elements can meet.
  int64_t reach = 0;
  bool nested = true;
  for (auto [stride, size] : dims) {
    if (stride <= reach) {
      nested = false;
      break;
    }
    reach += stride * (size - 1);
  }
  if (nested) return false;
  // Interleaved strides (not made by Ember's views, but decided exactly all the same).
  std::vector<int64_t> offsets{0};
  for (auto [stride, size] : dims) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<std::size_t>(size));
    for (int64_t o : offsets)
      for (int64_t i = 0; i < size; ++i) next.push_back(o + i * stride);
    offsets = std::move(next);
  }
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}

MemOverlap overlap_status(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return MemOverlap::No;
  if (a.storage() != b.storage()) return MemOverlap::No;
  // Byte ranges, so tensors of different element sizes compare right.
  auto [alo, ahi] = element_range(a);
  auto [blo, bhi] = element_range(b);
  const auto as = static_cast<int64_t>(dtype_size(a.dtype()));
  const auto bs = static_cast<int64_t>(dtype_size(b.dtype()));
  const int64_t a_begin = alo * as, a_end = (ahi + 1) * as;
  const int64_t b_begin = blo * bs, b_end = (bhi + 1) * bs;
  if (a_end <= b_begin || b_end <= a_begin) return MemOverlap::No;
  if (a.is_same(b) || (a.offset() * as == b.offset() * bs && a.shape() == b.shape() &&
                       a.strides() == b.strides() && as == bs))
    return MemOverlap::Full;
  if (is_dense(a) && is_dense(b)) {
    // PyTorch: the same range with the same strides is the same elements; otherwise partial.
    if (a_begin == b_begin && a_end == b_end && a.strides() == b.strides()) return MemOverlap::Full;
    return MemOverlap::Partial;
  }
  return MemOverlap::TooHard;
}

void assert_no_internal_overlap(const Tensor& t, const char* op) {
  check(!has_internal_overlap(t), op,
        ": unsupported operation: more than one element of the written-to tensor refers to a "
        "single memory location. Please clone() the tensor before performing the operation. "
        "(destination shape ",
        t.shape(), ", strides ", t.strides(), ")");
}

void assert_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op) {
  check(overlap_status(out, in) != MemOverlap::Partial, op,
        ": unsupported operation: some elements of the input tensor and the written-to tensor "
        "refer to a single memory location. Please clone() the tensor before performing the "
        "operation. (destination shape ",
        out.shape(), ", input shape ", in.shape(), ")");
}

}  // namespace ember
