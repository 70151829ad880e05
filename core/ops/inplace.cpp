// In-place ops (libtorch's signatures: add_, sub_, mul_, div_, addcmul_, addcdiv_, lerp_,
// clamp_, sqrt_, masked_fill_). Each computes its result out of place (recorded by autograd, as
// the op of core/ops/arithmetic.cpp or selection.cpp), checks PyTorch's rules, then writes it into
// self, whose history is rebased onto the op.
#include <vector>

#include "core/base/grad_mode.h"
#include "core/graph/node.h"
#include "core/ops/elementwise.h"
#include "core/ops/elementwise_loops.h"
#include "core/tensor/overlap.h"

namespace ember {

using detail::wrap_scalar;

namespace {

// In-place ops: compute the result out of place (recording the op), write it into `self`'s
// storage, and make the new node self's grad_fn: self's history is rebased onto the op.
Tensor& write_in_place(Tensor& self, const Tensor& result, const char* op) {
  check(result.shape() == self.shape(), op, ": result of shape ", result.shape(),
        " does not fit the in-place destination of shape ", self.shape());
  // Rebasing a view's history would leave its base out of the graph while its values change:
  // the base's gradients would then be silently wrong (copy_ refuses the same case).
  check(!(result.grad_fn() && self.impl()->is_view), op,
        ": writing a result that requires grad into a view of shape ", self.shape(),
        " is not supported (the view's base would not see it); apply the op out of place");
  {
    NoGradGuard no_grad;
    self.copy_(result);
  }
  if (result.grad_fn()) {
    TensorImpl* impl = self.impl();
    // The old node no longer produces self: retain_grad moves to the new one (as in PyTorch,
    // where y.retain_grad() before y.masked_fill_() keeps the final y's grad); hooks registered
    // before stay on the old node and see the gradient of the old version.
    if (impl->grad_fn) impl->grad_fn->output.reset();
    impl->grad_fn = result.grad_fn();
    impl->requires_grad = true;
    impl->grad_fn->output = self.impl_ptr();
    self.storage()->mark_graph_write();  // earlier views of self keep the old history
  }
  return self;
}

// PyTorch's canCast: no float to an integer, nothing but bool to bool.
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

// PyTorch's scalar type names, as its error messages print them.
const char* torch_type_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "Bool";
    case DType::Int64:
      return "Long";
    case DType::Float32:
      return "Float";
    case DType::Float64:
      return "Double";
  }
  return "?";
}

// The common path of every in-place op: the checks PyTorch makes, then the out-of-place result
// written into self.
template <typename Compute>
Tensor& in_place(Tensor& self, const std::vector<Tensor>& inputs, const char* op,
                 Compute&& compute) {
  detail::check_defined(self, op);
  for (const Tensor& in : inputs) detail::check_defined(in, op);
  detail::check_inplace(self, op);
  for (const Tensor& in : inputs) assert_no_partial_overlap(self, in, op);
  // In a graph, the op reads a copy of self's old values: its backward may have saved them
  // (clamp_, lerp_, mul_ by a tensor that requires grad), and self is about to be overwritten.
  Tensor result = compute(GradMode::is_enabled() && self.requires_grad() ? self.clone() : self);
  check(can_cast(result.dtype(), self.dtype()), op, ": result type ",
        torch_type_name(result.dtype()), " can't be cast to the desired output type ",
        torch_type_name(self.dtype()));
  return write_in_place(self, result.to(self.dtype()), op);
}

}  // namespace

Tensor& masked_fill_(Tensor& t, const Tensor& mask, Scalar value) {
  check(t.defined() && mask.defined(),
        "masked_fill_: expected defined tensors, got an undefined one");
  detail::check_inplace(t, "masked_fill_");
  assert_no_partial_overlap(t, mask, "masked_fill_");
  OpScope scope("masked_fill_");  // the value's errors name masked_fill_
  return write_in_place(t, masked_fill(t, mask, value), "masked_fill_");
}

Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  return ember::masked_fill_(*this, mask, value);
}

// ---- in-place arithmetic: in_place's checks, then the op's result written into self ----
Tensor& Tensor::add_(const Tensor& other, Scalar alpha) {
  return in_place(*this, {other}, "add_",
                  [&](const Tensor& s) { return ember::add(s, other, alpha); });
}
Tensor& Tensor::add_(Scalar other, Scalar alpha) {
  return in_place(*this, {}, "add_",
                  [&](const Tensor& s) { return ember::add(s, wrap_scalar(other, s), alpha); });
}
Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) {
  return in_place(*this, {other}, "sub_",
                  [&](const Tensor& s) { return ember::sub(s, other, alpha); });
}
Tensor& Tensor::sub_(Scalar other, Scalar alpha) {
  return in_place(*this, {}, "sub_",
                  [&](const Tensor& s) { return ember::sub(s, wrap_scalar(other, s), alpha); });
}
Tensor& Tensor::mul_(const Tensor& other) {
  return in_place(*this, {other}, "mul_", [&](const Tensor& s) { return ember::mul(s, other); });
}
Tensor& Tensor::mul_(Scalar factor) {
  return in_place(*this, {}, "mul_", [&](const Tensor& s) { return ember::mul(s, factor); });
}
Tensor& Tensor::div_(const Tensor& other) {
  return in_place(*this, {other}, "div_", [&](const Tensor& s) { return ember::div(s, other); });
}
Tensor& Tensor::div_(Scalar divisor) {
  return in_place(*this, {}, "div_", [&](const Tensor& s) { return ember::div(s, divisor); });
}
Tensor& Tensor::addcmul_(const Tensor& tensor1, const Tensor& tensor2, double value) {
  return in_place(*this, {tensor1, tensor2}, "addcmul_",
                  [&](const Tensor& s) { return ember::addcmul(s, tensor1, tensor2, value); });
}
Tensor& Tensor::addcdiv_(const Tensor& tensor1, const Tensor& tensor2, double value) {
  return in_place(*this, {tensor1, tensor2}, "addcdiv_",
                  [&](const Tensor& s) { return ember::addcdiv(s, tensor1, tensor2, value); });
}
Tensor& Tensor::lerp_(const Tensor& end, double weight) {
  return in_place(*this, {end}, "lerp_",
                  [&](const Tensor& s) { return ember::lerp(s, end, weight); });
}
Tensor& Tensor::lerp_(const Tensor& end, const Tensor& weight) {
  return in_place(*this, {end, weight}, "lerp_",
                  [&](const Tensor& s) { return ember::lerp(s, end, weight); });
}
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  return in_place(*this, {}, "clamp_", [&](const Tensor& s) { return ember::clamp(s, min, max); });
}
Tensor& Tensor::sqrt_() {
  return in_place(*this, {}, "sqrt_", [&](const Tensor& s) { return ember::sqrt(s); });
}

}  // namespace ember
