// A Tensor printed exactly as PyTorch's repr prints it (the number formatting is in
// core/base/format.cpp). It names the tensor's grad_fn, so it sits above the autograd graph.
#include <ostream>
#include <string>
#include <vector>

#include "core/base/format.h"
#include "core/graph/node.h"
#include "core/tensor/tensor.h"

namespace ember {

std::string repr(const Tensor& t) {
  if (!t.defined()) return "None";
  numel_of(t.shape(), "repr");  // an expanded view may count beyond int64
  std::vector<std::string> suffixes;
  if (t.grad_fn()) {
    suffixes.push_back("grad_fn=<" + t.grad_fn()->name() + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  if (!is_floating(t.dtype()))
    return format_int_tensor(t.shape(), t.to_vector<int64_t>(), t.dtype(), suffixes);
  return format_tensor(t.shape(), t.to_vector<double>(), t.dtype(), suffixes);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << repr(t); }

}  // namespace ember
