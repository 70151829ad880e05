// ember::autograd::functional: torch.autograd.functional's higher-order helpers, with its names
// and meaning. Each takes a function and the point where to differentiate it; the function is
// of one tensor (Tensor f(const Tensor&)) or of several (Tensor f(const std::vector<Tensor>&))
// and returns one tensor.
//
//   vjp(f, x, v)     v^T J          (a vector-Jacobian product: one backward)
//   jvp(f, x, v)     J v            (by the double-vjp trick: u -> u^T J is linear in u, so
//                                   differentiating it with respect to u gives J v)
//   jacobian(f, x)   J              of shape f(x).shape + x.shape
//   hessian(f, x)    H              of shape x.shape + x.shape (f scalar)
//   vhp(f, x, v)     v^T H          (the gradient of grad(f) . v)
//   hvp(f, x, v)     H v            (by the double-vjp trick on grad(f))
//
// vjp, jvp, vhp and hvp return (f(x), product). Options, as PyTorch's:
//   create_graph  the results are computed in a differentiable way (they require grad and can
//                 be differentiated again); otherwise they are detached.
//   strict        an input that the output does not depend on (or, for the Hessian helpers,
//                 whose gradient does not depend on the inputs) is an ember::Error with
//                 PyTorch's message instead of a zero result.
// Like PyTorch's, these run the function on fresh leaves (detached copies of the inputs, or
// differentiable views of them under create_graph), so the caller's tensors' .grad is never
// touched. Every product is also a test of the others: hvp == vhp for a symmetric Hessian,
// jacobian of the gradient == hessian (tests/core/autograd/test_functional.cpp).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::autograd::functional {

using Function = std::function<Tensor(const Tensor&)>;
using FunctionOfMany = std::function<Tensor(const std::vector<Tensor>&)>;

// ---- one input ----

// (f(x), v^T J): v has f(x)'s shape (may be undefined when f(x) has one element: then 1).
std::pair<Tensor, Tensor> vjp(const Function& f, const Tensor& x, const Tensor& v = Tensor(),
                              bool create_graph = false, bool strict = false);
// (f(x), J v): v has x's shape (may be undefined when x has one element).
std::pair<Tensor, Tensor> jvp(const Function& f, const Tensor& x, const Tensor& v = Tensor(),
                              bool create_graph = false, bool strict = false);
// d f(x) / dx, of shape f(x).shape + x.shape.
Tensor jacobian(const Function& f, const Tensor& x, bool create_graph = false, bool strict = false);
// d^2 f(x) / dx^2 of a function with a one-element result, of shape x.shape + x.shape.
Tensor hessian(const Function& f, const Tensor& x, bool create_graph = false, bool strict = false);
// (f(x), v^T H) and (f(x), H v) for a function with a one-element result; v has x's shape.
std::pair<Tensor, Tensor> vhp(const Function& f, const Tensor& x, const Tensor& v = Tensor(),
                              bool create_graph = false, bool strict = false);
std::pair<Tensor, Tensor> hvp(const Function& f, const Tensor& x, const Tensor& v = Tensor(),
                              bool create_graph = false, bool strict = false);

// ---- several inputs (PyTorch's tuple of tensors) ----

// (f(xs), [v^T dJ/dx_i for each input i]).
std::pair<Tensor, std::vector<Tensor>> vjp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                           const Tensor& v = Tensor(), bool create_graph = false,
                                           bool strict = false);
// (f(xs), sum_i J_i v_i): one direction per input.
std::pair<Tensor, Tensor> jvp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                              const std::vector<Tensor>& vs, bool create_graph = false,
                              bool strict = false);
// [d f / d x_i], each of shape f(xs).shape + x_i.shape.
std::vector<Tensor> jacobian(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                             bool create_graph = false, bool strict = false);
// H[i][j] = d^2 f / dx_i dx_j, of shape x_i.shape + x_j.shape.
std::vector<std::vector<Tensor>> hessian(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                         bool create_graph = false, bool strict = false);
std::pair<Tensor, std::vector<Tensor>> vhp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                           const std::vector<Tensor>& vs, bool create_graph = false,
                                           bool strict = false);
std::pair<Tensor, std::vector<Tensor>> hvp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                           const std::vector<Tensor>& vs, bool create_graph = false,
                                           bool strict = false);

}  // namespace ember::autograd::functional
