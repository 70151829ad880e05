// torch.autograd.functional, step for step (torch/autograd/functional.py of PyTorch 1.13): the
// same preprocessing of the inputs, the same strict-mode checks and messages, the same
// double-vjp trick for the forward-mode products.
#include "core/autograd/functional.h"

#include <optional>
#include <string>

#include "core/autograd/engine.h"
#include "core/base/error.h"
#include "core/base/grad_mode.h"
#include "core/ops/shape.h"

namespace ember::autograd::functional {

namespace {

// Grad mode on (or off) for a scope, then back as it was (torch.set_grad_enabled).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~GradModeGuard() { GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// _grad_preprocess: fresh tensors for the function to run on. Under create_graph an input that
// requires grad gets a differentiable alias (gradients flow back to it); any other input a
// detached copy that is a new leaf (need_graph: requiring grad).
std::vector<Tensor> preprocess(const std::vector<Tensor>& inputs, bool create_graph,
                               bool need_graph, const char* what, const char* fn) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    check(t.defined(), "autograd::functional::", fn, ": ", what, " ", i, " is undefined");
    if (create_graph && t.requires_grad()) {
      out.push_back(t.view(t.shape()));
    } else {
      Tensor leaf = t.detach();
      if (need_graph) leaf.requires_grad_(true);
      out.push_back(leaf);
    }
  }
  return out;
}

// _grad_postprocess: without create_graph, results leave the graph.
Tensor postprocess(const Tensor& t, bool create_graph) {
  return create_graph || !t.defined() ? t : t.detach();
}
std::vector<Tensor> postprocess(std::vector<Tensor> ts, bool create_graph) {
  for (Tensor& t : ts) t = postprocess(t, create_graph);
  return ts;
}

// _validate_v: one direction per reference, of its shape.
void validate_v(const std::vector<Tensor>& v, const std::vector<Tensor>& other, bool is_tuple,
                const char* fn) {
  if (v.size() != other.size()) {
    if (is_tuple) {
      fail("autograd::functional::", fn, ": v is a tuple of invalid length: should be ",
           other.size(), " but got ", v.size(), ".");
    }
    fail("autograd::functional::", fn, ": The given v should contain a single Tensor.");
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    check(v[i].defined(), "autograd::functional::", fn, ": ", is_tuple ? "entry " : "",
          is_tuple ? std::to_string(i) + " of " : "", "v is undefined");
    if (v[i].shape() != other[i].shape()) {
      fail("autograd::functional::", fn, ": ",
           is_tuple ? "Entry " + std::to_string(i) + " in " : std::string(),
           "v has invalid size: should be ", other[i].shape(), " but got ", v[i].shape(), ".");
    }
  }
}

enum class Stage { Outputs, GradInputs, Jacobian, Hessian };

// _check_requires_grad (strict mode only).
void check_requires_grad(const std::vector<Tensor>& ts, Stage stage, bool strict) {
  if (!strict) return;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].defined()) {
      fail("The output of the user-provided function is independent of input ", i,
           ". This is not allowed in strict mode.");
    }
    if (ts[i].requires_grad()) continue;
    switch (stage) {
      case Stage::Hessian:
        fail("The hessian of the user-provided function with respect to input ", i,
             " is independent of the input. This is not allowed in strict mode. You should "
             "ensure that your function is thrice differentiable and that the hessian depends "
             "on the inputs.");
      case Stage::Jacobian:
        fail(
            "While computing the hessian, found that the jacobian of the user-provided "
            "function with respect to input ",
            i,
            " is independent of the input. This is not allowed in strict mode. You should "
            "ensure that your function is twice differentiable and that the jacobian depends "
            "on the inputs (this would be violated by a linear function for example).");
      case Stage::GradInputs:
        fail("The gradient with respect to input ", i,
             " is independent of the inputs of the user-provided function. This is not allowed "
             "in strict mode.");
      case Stage::Outputs:
        fail("Output ", i,
             " of the user-provided function does not require gradients. The outputs must be "
             "computed in a differentiable manner from the input when running in strict mode.");
    }
  }
}

// _autograd_grad: autograd::grad over the outputs that require grad (allow_unused), or all
// undefined when none does.
std::vector<Tensor> grad_of(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& grad_outputs, bool create_graph,
                            std::optional<bool> retain_graph = std::nullopt) {
  std::vector<Tensor> outs, gouts;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].requires_grad()) {
      outs.push_back(outputs[i]);
      gouts.push_back(i < grad_outputs.size() ? grad_outputs[i] : Tensor());
    }
  }
  if (outs.empty()) return std::vector<Tensor>(inputs.size());
  return autograd::grad(outs, inputs, gouts, retain_graph, create_graph, /*allow_unused=*/true);
}

enum class Back { Back, BackTrick, DoubleBack, DoubleBackTrick };

// _fill_in_zeros: an undefined gradient is zeros (or, in strict mode, PyTorch's error).
std::vector<Tensor> fill_in_zeros(std::vector<Tensor> grads, const std::vector<Tensor>& refs,
                                  bool strict, bool create_graph, Back stage) {
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      if (strict) {
        switch (stage) {
          case Back::Back:
            fail("The output of the user-provided function is independent of input ", i,
                 ". This is not allowed in strict mode.");
          case Back::BackTrick:
            fail("The gradient with respect to the input is independent of entry ", i,
                 " in the grad_outputs when using the double backward trick to compute forward "
                 "mode gradients. This is not allowed in strict mode.");
          case Back::DoubleBack:
            fail("The jacobian of the user-provided function is independent of input ", i,
                 ". This is not allowed in strict mode.");
          case Back::DoubleBackTrick:
            fail("The hessian of the user-provided function is independent of entry ", i,
                 " in the grad_jacobian. This is not allowed in strict mode as it prevents from "
                 "using the double backward trick to replace forward mode AD.");
        }
      }
      grads[i] = zeros_like(refs[i]);
    } else if (strict && create_graph && !grads[i].requires_grad()) {
      if (stage == Back::Back || stage == Back::BackTrick) {
        fail("The jacobian of the user-provided function is independent of input ", i,
             ". This is not allowed in strict mode when create_graph=True.");
      }
      fail("The hessian of the user-provided function is independent of input ", i,
           ". This is not allowed in strict mode when create_graph=True.");
    }
  }
  return grads;
}

// v, or 1 when it may be left out (one input/output of one element).
std::vector<Tensor> directions(const std::vector<Tensor>& v, const std::vector<Tensor>& refs,
                               bool is_tuple, const char* fn, const char* of_what) {
  const bool given = !(v.empty() || (v.size() == 1 && !v[0].defined()));
  if (given) {
    validate_v(v, refs, is_tuple, fn);
    std::vector<Tensor> out;
    for (const Tensor& t : v) out.push_back(t.detach());
    return out;
  }
  if (refs.size() != 1 || refs[0].numel() != 1) {
    fail("autograd::functional::", fn, ": The vector v can only be None if ", of_what,
         " a single Tensor with a single element.");
  }
  return {Tensor()};  // autograd::grad's implicit 1
}

Tensor run(const FunctionOfMany& f, const std::vector<Tensor>& inputs, const char* fn) {
  Tensor out = f(inputs);
  check(out.defined(), "autograd::functional::", fn,
        ": the user-provided function returned an undefined tensor");
  return out;
}

// hessian, vhp and hvp: a function with one element.
void check_scalar(const Tensor& out, const char* fn) {
  check(out.numel() == 1, "autograd::functional::", fn,
        ": The Tensor returned by the function given to ", fn,
        " should contain a single element (got one of shape ", out.shape(), ")");
}

FunctionOfMany of_many(const Function& f) {
  return [f](const std::vector<Tensor>& xs) { return f(xs[0]); };
}

}  // namespace

// ---- several inputs ----

std::pair<Tensor, std::vector<Tensor>> vjp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                           const Tensor& v, bool create_graph, bool strict) {
  std::vector<Tensor> inputs, vs;
  Tensor out;
  {
    GradModeGuard enable(true);
    inputs = preprocess(xs, create_graph, /*need_graph=*/true, "input", "vjp");
    out = run(f, inputs, "vjp");
    check_requires_grad({out}, Stage::Outputs, strict);
    if (v.defined()) {
      validate_v({v}, {out}, false, "vjp");
      vs = {v.detach()};
    } else {
      vs = directions({}, {out}, false, "vjp", "the user-provided function returns");
    }
  }
  std::vector<Tensor> result;
  {
    GradModeGuard mode(create_graph || GradMode::is_enabled());
    result = fill_in_zeros(grad_of({out}, inputs, vs, create_graph), inputs, strict, create_graph,
                           Back::Back);
  }
  return {postprocess(out, create_graph), postprocess(result, create_graph)};
}

std::pair<Tensor, Tensor> jvp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                              const std::vector<Tensor>& v, bool create_graph, bool strict) {
  std::vector<Tensor> inputs, vs, grad_inputs;
  Tensor out, grad_output;
  {
    GradModeGuard enable(true);
    inputs = preprocess(xs, create_graph, /*need_graph=*/true, "input", "jvp");
    vs = directions(v, inputs, xs.size() > 1 || v.size() > 1, "jvp",
                    "the input to the user-provided function is");
    out = run(f, inputs, "jvp");
    check_requires_grad({out}, Stage::Outputs, strict);
    // u -> u^T J is linear in u: its value at u = 0 does not matter, only that it is finite.
    grad_output = zeros_like(out).requires_grad_(true);
    grad_inputs = grad_of({out}, inputs, {grad_output}, /*create_graph=*/true);
    check_requires_grad(grad_inputs, Stage::GradInputs, strict);
  }
  // d(u^T J v)/du = J v: the gradient of the vjp's result, against v, with respect to u.
  std::vector<Tensor> result;
  {
    GradModeGuard mode(create_graph || GradMode::is_enabled());
    result = fill_in_zeros(grad_of(grad_inputs, {grad_output}, vs, create_graph), {out}, strict,
                           create_graph, Back::BackTrick);
  }
  return {postprocess(out, create_graph), postprocess(result[0], create_graph)};
}

std::vector<Tensor> jacobian(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                             bool create_graph, bool strict) {
  GradModeGuard enable(true);
  std::vector<Tensor> inputs =
      preprocess(xs, create_graph, /*need_graph=*/true, "input", "jacobian");
  Tensor out = run(f, inputs, "jacobian");
  check_requires_grad({out}, Stage::Outputs, strict);
  // One backward per element of the output: row j of the Jacobian is d out[j] / d inputs.
  std::vector<std::vector<Tensor>> rows(inputs.size());
  const Tensor flat = out.reshape({out.numel()});
  for (int64_t j = 0; j < out.numel(); ++j) {
    std::vector<Tensor> vj =
        grad_of({flat.select(0, j)}, inputs, {}, create_graph, /*retain_graph=*/true);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (vj[i].defined()) {
        if (strict && create_graph && !vj[i].requires_grad()) {
          fail(
              "The jacobian of the user-provided function is independent of input 0. This is "
              "not allowed in strict mode when create_graph=True.");
        }
        rows[i].push_back(vj[i]);
      } else {
        if (strict) {
          fail("Output 0 of the user-provided function is independent of input ", i,
               ". This is not allowed in strict mode.");
        }
        rows[i].push_back(zeros_like(inputs[i]));
      }
    }
  }
  std::vector<Tensor> result;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Shape shape = out.shape();
    shape.insert(shape.end(), inputs[i].shape().begin(), inputs[i].shape().end());
    Tensor jac =
        out.numel() == 0 ? zeros(shape, inputs[i].dtype()) : stack(rows[i], 0).reshape(shape);
    result.push_back(postprocess(jac, create_graph));
  }
  return result;
}

std::vector<std::vector<Tensor>> hessian(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                         bool create_graph, bool strict) {
  // The Jacobian of the gradient (PyTorch's jac_func: the inner Jacobian with create_graph).
  auto single_output = [&f, strict](const std::vector<Tensor>& inputs) {
    Tensor out = run(f, inputs, "hessian");
    check_requires_grad({out}, Stage::Outputs, strict);
    check_scalar(out, "hessian");
    return out.reshape({});
  };
  const std::size_t n = xs.size();
  // H[i][j] = d (d f / d x_i) / d x_j: the outer Jacobian of each gradient, per input i.
  std::vector<std::vector<Tensor>> result(n);
  GradModeGuard enable(true);
  std::vector<Tensor> inputs =
      preprocess(xs, create_graph, /*need_graph=*/true, "input", "hessian");
  std::vector<Tensor> jac = jacobian(single_output, inputs, /*create_graph=*/true, false);
  check_requires_grad(jac, Stage::Jacobian, strict);
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor flat = jac[i].reshape({jac[i].numel()});
    std::vector<std::vector<Tensor>> rows(n);
    for (int64_t k = 0; k < flat.numel(); ++k) {
      std::vector<Tensor> vj = grad_of({flat.select(0, k)}, inputs, {}, create_graph, true);
      for (std::size_t j = 0; j < n; ++j) {
        if (vj[j].defined()) {
          if (strict && create_graph && !vj[j].requires_grad()) {
            fail("The jacobian of the user-provided function is independent of input ", i,
                 ". This is not allowed in strict mode when create_graph=True.");
          }
          rows[j].push_back(vj[j]);
        } else {
          if (strict) {
            fail("Output ", i, " of the user-provided function is independent of input ", j,
                 ". This is not allowed in strict mode.");
          }
          rows[j].push_back(zeros_like(inputs[j]));
        }
      }
    }
    for (std::size_t j = 0; j < n; ++j) {
      Shape shape = inputs[i].shape();
      shape.insert(shape.end(), inputs[j].shape().begin(), inputs[j].shape().end());
      Tensor h =
          flat.numel() == 0 ? zeros(shape, inputs[j].dtype()) : stack(rows[j], 0).reshape(shape);
      result[i].push_back(postprocess(h, create_graph));
    }
  }
  return result;
}

std::pair<Tensor, std::vector<Tensor>> vhp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                           const std::vector<Tensor>& v, bool create_graph,
                                           bool strict) {
  std::vector<Tensor> inputs, vs, jac;
  Tensor out;
  {
    GradModeGuard enable(true);
    inputs = preprocess(xs, create_graph, /*need_graph=*/true, "input", "vhp");
    vs = directions(v, inputs, xs.size() > 1 || v.size() > 1, "vhp",
                    "the input to the user-provided function is");
    out = run(f, inputs, "vhp");
    check_requires_grad({out}, Stage::Outputs, strict);
    check_scalar(out, "vhp");
    jac = grad_of({out}, inputs, {}, /*create_graph=*/true);
    check_requires_grad(jac, Stage::Jacobian, strict);
  }
  // v^T H: the gradient of grad(f), against v.
  std::vector<Tensor> result;
  {
    GradModeGuard mode(create_graph || GradMode::is_enabled());
    result = fill_in_zeros(grad_of(jac, inputs, vs, create_graph), inputs, strict, create_graph,
                           Back::DoubleBack);
  }
  return {postprocess(out, create_graph), postprocess(result, create_graph)};
}

std::pair<Tensor, std::vector<Tensor>> hvp(const FunctionOfMany& f, const std::vector<Tensor>& xs,
                                           const std::vector<Tensor>& v, bool create_graph,
                                           bool strict) {
  std::vector<Tensor> inputs, vs, jac, grad_jac, double_back;
  Tensor out;
  {
    GradModeGuard enable(true);
    inputs = preprocess(xs, create_graph, /*need_graph=*/true, "input", "hvp");
    vs = directions(v, inputs, xs.size() > 1 || v.size() > 1, "hvp",
                    "the input to the user-provided function is");
    out = run(f, inputs, "hvp");
    check_requires_grad({out}, Stage::Outputs, strict);
    check_scalar(out, "hvp");
    jac = grad_of({out}, inputs, {}, /*create_graph=*/true);
    check_requires_grad(jac, Stage::Jacobian, strict);
    // u -> u^T H, linear in u; its gradient with respect to u against v is H v.
    for (const Tensor& x : inputs) grad_jac.push_back(zeros_like(x).requires_grad_(true));
    double_back = grad_of(jac, inputs, grad_jac, /*create_graph=*/true);
    check_requires_grad(jac, Stage::Hessian, strict);
  }
  std::vector<Tensor> result;
  {
    GradModeGuard mode(create_graph || GradMode::is_enabled());
    result = fill_in_zeros(grad_of(double_back, grad_jac, vs, create_graph), inputs, strict,
                           create_graph, Back::DoubleBackTrick);
  }
  return {postprocess(out, create_graph), postprocess(result, create_graph)};
}

// ---- one input: the same on a vector of one ----

std::pair<Tensor, Tensor> vjp(const Function& f, const Tensor& x, const Tensor& v,
                              bool create_graph, bool strict) {
  auto [out, r] = vjp(of_many(f), std::vector<Tensor>{x}, v, create_graph, strict);
  return {out, r[0]};
}

std::pair<Tensor, Tensor> jvp(const Function& f, const Tensor& x, const Tensor& v,
                              bool create_graph, bool strict) {
  return jvp(of_many(f), std::vector<Tensor>{x}, std::vector<Tensor>{v}, create_graph, strict);
}

Tensor jacobian(const Function& f, const Tensor& x, bool create_graph, bool strict) {
  return jacobian(of_many(f), std::vector<Tensor>{x}, create_graph, strict)[0];
}

Tensor hessian(const Function& f, const Tensor& x, bool create_graph, bool strict) {
  return hessian(of_many(f), std::vector<Tensor>{x}, create_graph, strict)[0][0];
}

std::pair<Tensor, Tensor> vhp(const Function& f, const Tensor& x, const Tensor& v,
                              bool create_graph, bool strict) {
  auto [out, r] =
      vhp(of_many(f), std::vector<Tensor>{x}, std::vector<Tensor>{v}, create_graph, strict);
  return {out, r[0]};
}

std::pair<Tensor, Tensor> hvp(const Function& f, const Tensor& x, const Tensor& v,
                              bool create_graph, bool strict) {
  auto [out, r] =
      hvp(of_many(f), std::vector<Tensor>{x}, std::vector<Tensor>{v}, create_graph, strict);
  return {out, r[0]};
}

}  // namespace ember::autograd::functional
