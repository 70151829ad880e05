// gradcheck: does an op's backward agree with its forward? (torch.autograd.gradcheck)
//
// The backward of an op is a hand-written formula; gradcheck tests it against the only thing
// we can trust without it, the forward. For y = fn(x) it builds the Jacobian dy/dx twice:
//
//   numerically, by central differences on the forward alone:
//       dy_j/dx_i ~ (fn(x + eps e_i)_j - fn(x - eps e_i)_j) / (2 eps)
//   analytically, by the backward: one backward pass per output element j, with a one-hot
//       grad_output e_j, gives row j of the Jacobian (dy_j/dx for every input element).
//
// and requires |analytic - numerical| <= atol + rtol * |numerical| everywhere. It also checks
// that every gradient has its input's shape, that backward is reentrant (computing the analytic
// Jacobian twice gives the same bits), and that a zero grad_output gives zero gradients.
//
// Use float64: with eps = 1e-6, a central difference in float32 is mostly rounding noise.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::autograd {

// PyTorch's defaults.
struct GradcheckOptions {
  double eps = 1e-6;            // the step of the central difference
  double atol = 1e-5;           // absolute tolerance
  double rtol = 1e-3;           // relative tolerance (relative to the numerical value)
  bool check_zero_grad = true;  // a zero grad_output must give zero (or undefined) gradients
  bool check_reentrant = true;  // two analytic Jacobians must be identical bit for bit
};

struct GradcheckResult {
  bool ok = false;
  // On failure: what failed, for which input, the worst element (flat index and multi-index
  // in the input and in the output) with its numerical and analytic values. On success, a
  // one-line summary.
  std::string report;
};

// Checks the gradients of fn with respect to every input that requires grad.
//
// fn maps the inputs to one output tensor of any shape; it must be deterministic (the same
// inputs give the same output) because it is called 2 * (number of checked elements) + 1 times,
// and must not modify its inputs in place (an Error names the input it modified).
// Every floating-point input and the output must be float64 (an ember::Error names the
// offending input and its dtype otherwise). Integer and bool inputs (indices, masks) are passed
// through unchecked; at least one input must require grad. No two inputs may share a storage
// element (they would be perturbed together; an Error names both): to use a tensor twice, pass
// it once and use it twice inside fn.
//
// Inputs may be non-contiguous views (transposed, sliced with a step, expanded): each input is
// perturbed in place, in its own storage, where its elements really live. An expanded input
// (stride 0) has several logical elements stored in one storage element; gradcheck perturbs
// each storage element once, which moves all the logical elements stored there, and so compares
// it with the analytic gradient summed over those logical elements. (PyTorch refuses such
// inputs instead; the comparison here is the same for inputs without overlap.)
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// gradgradcheck: are the gradients of fn themselves differentiated right?
// (torch.autograd.gradgradcheck.) With random grad_outputs v (a fixed generator, seed
// `seed`, float64 normal), it runs gradcheck on the vector-Jacobian product
//
//   vjp(inputs, v) = autograd::grad(fn(inputs), inputs that require grad, v, create_graph=true)
//
// (the gradients that are defined, flattened and concatenated), with respect to the inputs and
// to v: the numerical Jacobian of the vjp (central differences of first-order backward passes)
// against the analytic one (backward passes through the graph the create_graph backward
// recorded). Options and the rules for inputs are gradcheck's; the report names the node that
// made fn's output, and calls the inputs after fn's inputs "grad_output". An output that does
// not require grad (no graph back to the inputs: no gradients to differentiate) is an Error.
struct GradgradcheckOptions : GradcheckOptions {
  uint64_t seed = 0;  // of the generator that draws the grad_outputs
};
GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs,
                              const GradgradcheckOptions& options = {});

}  // namespace ember::autograd
