// A Tensor printed exactly as PyTorch's repr prints it (the number formatting is in
// core/base/format.cpp). It names the tensor's grad_fn, so it sits above the autograd graph.
#include <ostream>
#include <string>
#include <vector>

#include "core/base/format.h"
#include "core/graph/node.h"
#include "core/tensor/tensor.h"

namespace ember {

namespace {

// The entries a summarized print shows (shown_shape: the first and last 3 of each long dim),
// row-major, read through t's strides: a huge expanded view is never copied whole.
template <typename V>
std::vector<V> shown_values(const Tensor& t, const Shape& shown) {
  const Shape& shape = t.shape();
  const auto ndim = static_cast<int64_t>(shape.size());
  std::vector<V> out;
  dispatch(t.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* data = static_cast<const S*>(t.storage()->data()) + t.offset();
    std::vector<int64_t> index(static_cast<std::size_t>(ndim), 0);  // over `shown`
    while (true) {
      int64_t off = 0;
      for (int64_t d = 0; d < ndim; ++d) {
        // A cut dim's last entries come from its end.
        const int64_t i = index[d] < 3 ? index[d] : index[d] + (shape[d] - shown[d]);
        off += i * t.strides()[d];
      }
      out.push_back(static_cast<V>(data[off]));
      int64_t d = ndim - 1;
      for (; d >= 0; --d) {
        if (++index[d] < shown[d]) break;
        index[d] = 0;
      }
      if (d < 0) break;
    }
  });
  return out;
}

}  // namespace

std::string repr(const Tensor& t) {
  if (!t.defined()) return "None";
  numel_of(t.shape(), "repr");  // an expanded view may count beyond int64
  std::vector<std::string> suffixes;
  if (t.grad_fn()) {
    suffixes.push_back("grad_fn=<" + t.grad_fn()->name() + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  const Shape shown = shown_shape(t.shape());
  if (shown != t.shape()) {  // summarized: the shown entries only
    if (!is_floating(t.dtype()))
      return format_int_tensor(t.shape(), shown_values<int64_t>(t, shown), t.dtype(), suffixes);
    return format_tensor(t.shape(), shown_values<double>(t, shown), t.dtype(), suffixes);
  }
  if (!is_floating(t.dtype()))
    return format_int_tensor(t.shape(), t.to_vector<int64_t>(), t.dtype(), suffixes);
  return format_tensor(t.shape(), t.to_vector<double>(), t.dtype(), suffixes);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << repr(t); }

}  // namespace ember
