// Whole-tensor comparisons: equal and allclose (torch.equal, torch.allclose). They broadcast
// (expand, a view op) and read values, so they sit with the ops.
#include <cmath>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "equal");
  detail::check_defined(b, "equal");
  if (a.shape() != b.shape()) return false;
  numel_of(a.shape(), "equal");  // an expanded view may count beyond int64
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  return x == y;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  detail::check_defined(a, "allclose");
  detail::check_defined(b, "allclose");
  Shape target = broadcast_shapes(a.shape(), b.shape(), "allclose");
  numel_of(target, "allclose");  // an expanded view may count beyond int64
  auto x = a.expand(target).to_vector<double>(), y = b.expand(target).to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (!(equal_nan && std::isnan(x[i]) && std::isnan(y[i]))) return false;
      continue;
    }
    if (x[i] == y[i]) continue;  // equal infinities
    // Unequal infinities: |inf - (-inf)| = inf is not > atol + rtol * inf, so say it here.
    if (std::isinf(x[i]) || std::isinf(y[i])) return false;
    if (std::fabs(x[i] - y[i]) > atol + rtol * std::fabs(y[i])) return false;
  }
  return true;
}

}  // namespace ember
