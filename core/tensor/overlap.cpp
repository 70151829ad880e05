// Memory overlap checks (see overlap.h).
#include "core/tensor/overlap.h"

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

bool has_internal_overlap(const Tensor& t) { return has_internal_overlap(t.shape(), t.strides()); }

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

bool updates_overlap(const std::vector<UpdateTensors>& updates) {
  struct Entry {
    const void* storage;
    std::size_t update;
    const Tensor* tensor;
    bool written;
  };
  std::vector<Entry> entries;
  for (std::size_t u = 0; u < updates.size(); ++u) {
    for (const Tensor& t : updates[u].written) entries.push_back({t.storage().get(), u, &t, true});
    for (const Tensor& t : updates[u].read) entries.push_back({t.storage().get(), u, &t, false});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::less<const void*>()(a.storage, b.storage);
  });
  for (std::size_t i = 0; i < entries.size(); ++i) {
    for (std::size_t j = i + 1; j < entries.size() && entries[j].storage == entries[i].storage;
         ++j) {
      const Entry &a = entries[i], &b = entries[j];
      if (a.update == b.update || !(a.written || b.written)) continue;
      if (overlap_status(*a.tensor, *b.tensor) != MemOverlap::No) return true;
    }
  }
  return false;
}

void assert_no_internal_overlap(const Tensor& t, const char* op) {
  check_no_internal_overlap(t.shape(), t.strides(), op);
}

void assert_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op) {
  check(overlap_status(out, in) != MemOverlap::Partial, op,
        ": unsupported operation: some elements of the input tensor and the written-to tensor "
        "refer to a single memory location. Please clone() the tensor before performing the "
        "operation. (destination shape ",
        out.shape(), ", input shape ", in.shape(), ")");
}

}  // namespace ember
