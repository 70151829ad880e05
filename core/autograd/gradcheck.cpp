// gradcheck: the numerical Jacobian (central differences on the forward) against the analytic
// one (the backward, one output element at a time). See gradcheck.h for the idea.
//
// Layout of a Jacobian here (PyTorch's too): jacobian[i][j] = d output_j / d input_i, the
// transpose of the textbook dy/dx, with one row per input element (what gets perturbed) and one
// column per output element (flat, row-major). The numerical Jacobian is filled row by row
// (perturb input element i, read every output); the analytic one column by column (a backward
// with grad_output = e_j gives d output_j / d every input element, a row of the textbook dy/dx).
#include "core/autograd/gradcheck.h"

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <map>
#include <sstream>

#include "core/autograd/engine.h"
#include "core/base/bit_cast.h"
#include "core/base/generator.h"
#include "core/base/grad_mode.h"
#include "core/graph/node.h"
#include "core/ops/shape.h"
#include "core/tensor/random.h"

namespace ember::autograd {

namespace {

using Jacobian = std::vector<std::vector<double>>;  // [input element][output element]

// The multi-index of the flat (row-major) position `flat` in `shape`: 4 in [2, 3] is [1, 1].
std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// One input that requires grad, and the storage elements gradcheck perturbs for it.
//
// A logical element (a position in the input's shape) lives in the storage at
//   offset + sum_d index[d] * stride[d].
// For most inputs, contiguous or not, each logical element has its own storage element. An
// expanded input (stride 0) stores several logical elements in one storage element: nudging
// that storage element nudges all of them at once. So the unit perturbed is a storage element,
// and each remembers which logical elements it holds.
struct CheckedInput {
  std::size_t position = 0;  // index into the `inputs` of gradcheck
  Tensor tensor;
  std::vector<int64_t> storage_offsets;                // distinct, in order of first use
  std::vector<std::vector<int64_t>> logical_elements;  // flat indices stored at each offset
};

CheckedInput find_storage_elements(std::size_t position, const Tensor& t) {
  CheckedInput input{position, t, {}, {}};
  std::map<int64_t, std::size_t> row_of_offset;
  for (int64_t flat = 0; flat < t.numel(); ++flat) {
    std::vector<int64_t> index = unravel(flat, t.shape());
    int64_t offset = t.offset();
    for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
    auto [it, fresh] = row_of_offset.emplace(offset, input.storage_offsets.size());
    if (fresh) {
      input.storage_offsets.push_back(offset);
      input.logical_elements.emplace_back();
    }
    input.logical_elements[it->second].push_back(flat);
  }
  return input;
}

// The storage version of every input, to tell whether fn modified one in place.
std::vector<int64_t> versions_of(const std::vector<Tensor>& inputs) {
  std::vector<int64_t> versions;
  for (const Tensor& t : inputs) versions.push_back(t.version());
  return versions;
}

// fn is called many times on the same inputs: one it modified in place (x.mul_(2) on an input)
// would make every later call, and the numbers compared, different.
void check_unmodified(const std::vector<Tensor>& inputs, const std::vector<int64_t>& versions) {
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    check(inputs[k].version() == versions[k], "gradcheck: fn modified input ", k, " (shape ",
          inputs[k].shape(),
          ") in place; gradcheck calls fn many times on the same inputs, so fn must leave them "
          "as it found them (modify a clone)");
  }
}

// fn(inputs) without recording a graph, as plain numbers in row-major order.
std::vector<double> evaluate(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs, const Shape& expected_shape,
                             const std::vector<int64_t>& versions) {
  NoGradGuard no_grad;
  Tensor out = fn(inputs);
  check_unmodified(inputs, versions);
  check(out.defined() && out.shape() == expected_shape,
        "gradcheck: fn returned a different shape when called again (",
        out.defined() ? out.shape() : Shape{}, " instead of ", expected_shape,
        "); fn must be deterministic");
  return out.to_vector<double>();  // read now: the output may be a view of an input
}

// The numerical Jacobian of fn with respect to one input, by central differences:
//
//   d output / d x_i  ~  (fn(..., x_i + eps, ...) - fn(..., x_i - eps, ...)) / (2 eps)
//
// The error of this estimate shrinks like eps^2 (the even terms of the Taylor series cancel),
// against eps for the one-sided (fn(x + eps) - fn(x)) / eps.
Jacobian numerical_jacobian(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                            const std::vector<Tensor>& inputs, const CheckedInput& input,
                            const Shape& output_shape, double eps,
                            const std::vector<int64_t>& versions) {
  const std::size_t output_numel = static_cast<std::size_t>(numel_of(output_shape));
  Jacobian jacobian(input.storage_offsets.size(), std::vector<double>(output_numel, 0.0));
  // Perturb the number where it really lives, so a transposed, sliced or expanded input is
  // perturbed through its own strides. These raw writes bypass the version counter (like
  // PyTorch's writes through .data); every element gets its exact original bits back.
  auto* storage = static_cast<double*>(input.tensor.storage()->data());
  for (std::size_t i = 0; i < input.storage_offsets.size(); ++i) {
    double& x = storage[input.storage_offsets[i]];
    const double original = x;
    x = original + eps;
    std::vector<double> above = evaluate(fn, inputs, output_shape, versions);
    x = original - eps;
    std::vector<double> below = evaluate(fn, inputs, output_shape, versions);
    x = original;
    for (std::size_t j = 0; j < output_numel; ++j) {
      jacobian[i][j] = (above[j] - below[j]) / (2.0 * eps);
    }
  }
  return jacobian;
}

// The analytic Jacobians (one per checked input), column by column: a backward pass with
// grad_output = e_j (1 at output element j, 0 elsewhere) returns, for every input element,
// d output_j / d input. The graph of `output` is kept (retain_graph) for the next column.
// A gradient whose shape differs from its input's is recorded in `problems`.
std::vector<Jacobian> analytic_jacobians(const Tensor& output,
                                         const std::vector<CheckedInput>& inputs,
                                         std::vector<std::string>& problems) {
  const int64_t output_numel = output.numel();
  std::vector<Jacobian> jacobians;
  std::vector<Tensor> wrt;
  for (const CheckedInput& input : inputs) {
    jacobians.emplace_back(input.storage_offsets.size(),
                           std::vector<double>(static_cast<std::size_t>(output_numel), 0.0));
    wrt.push_back(input.tensor);
  }
  if (!output.requires_grad()) return jacobians;  // output does not depend on them: all zero

  for (int64_t j = 0; j < output_numel; ++j) {
    Tensor one_hot = zeros(output.shape(), DType::Float64);
    one_hot.set(unravel(j, output.shape()), 1.0);
    std::vector<Tensor> grads =
        grad({output}, wrt, {one_hot}, /*retain_graph=*/true, /*create_graph=*/false,
             /*allow_unused=*/true);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (!grads[k].defined()) continue;  // no path from this input: its column stays zero
      if (grads[k].shape() != inputs[k].tensor.shape()) {
        std::ostringstream s;
        s << "the gradient of input " << inputs[k].position << " has shape "
          << shape_str(grads[k].shape()) << ", but the input has shape "
          << shape_str(inputs[k].tensor.shape());
        problems.push_back(s.str());
        return jacobians;
      }
      std::vector<double> g = grads[k].to_vector<double>();
      // A storage element that holds several logical elements (an expanded input) moves all
      // of them: its derivative is the sum of theirs.
      for (std::size_t i = 0; i < inputs[k].logical_elements.size(); ++i) {
        double sum = 0.0;
        for (int64_t flat : inputs[k].logical_elements[i]) sum += g[flat];
        jacobians[k][i][j] = sum;
      }
    }
  }
  return jacobians;
}

// "element 4 (index [1, 1])", or, for a storage element behind several logical ones,
// "storage element 2, which holds elements 1 (index [0, 1]) and 4 (index [1, 1])".
std::string describe_input_element(const CheckedInput& input, std::size_t i) {
  const std::vector<int64_t>& held = input.logical_elements[i];
  auto one = [&](int64_t flat) {
    std::ostringstream s;
    s << flat << " (index " << shape_str(unravel(flat, input.tensor.shape())) << ")";
    return s.str();
  };
  if (held.size() == 1) return "element " + one(held[0]);
  std::ostringstream s;
  s << "storage element " << input.storage_offsets[i] << ", which holds elements ";
  for (std::size_t k = 0; k < held.size(); ++k) {
    s << (k == 0 ? "" : k + 1 == held.size() ? " and " : ", ") << one(held[k]);
  }
  s << " (expanded input: its derivative is the sum over them)";
  return s.str();
}

std::string describe_output_element(std::size_t j, const Shape& output_shape) {
  std::ostringstream s;
  s << "output element " << j << " (index "
    << shape_str(unravel(static_cast<int64_t>(j), output_shape)) << ")";
  return s.str();
}

// Both Jacobians side by side, when they are small enough to read.
void print_jacobians(std::ostringstream& s, const Jacobian& numerical, const Jacobian& analytic) {
  const std::size_t rows = numerical.size(), cols = rows ? numerical[0].size() : 0;
  if (rows * cols > 64) return;
  s << "  numerical | analytic Jacobian (row: input element, column: output element):\n";
  s << std::setprecision(6);
  for (std::size_t i = 0; i < rows; ++i) {
    s << "   ";
    for (std::size_t j = 0; j < cols; ++j) s << " " << std::setw(11) << numerical[i][j];
    s << "  |";
    for (std::size_t j = 0; j < cols; ++j) s << " " << std::setw(11) << analytic[i][j];
    s << "\n";
  }
}

// Compares one input's Jacobians entry by entry: |a - n| <= atol + rtol * |n|. On failure,
// describes the worst entry (the one furthest beyond its tolerance).
void compare_jacobians(const CheckedInput& input, const Shape& output_shape,
                       const Jacobian& numerical, const Jacobian& analytic,
                       const GradcheckOptions& options, std::vector<std::string>& problems) {
  std::size_t mismatches = 0, total = 0, worst_i = 0, worst_j = 0;
  double worst_excess = -1.0;
  for (std::size_t i = 0; i < numerical.size(); ++i) {
    for (std::size_t j = 0; j < numerical[i].size(); ++j) {
      const double n = numerical[i][j], a = analytic[i][j];
      const double allowed = options.atol + options.rtol * std::fabs(n);
      const double difference = std::fabs(a - n);
      ++total;
      if (difference <= allowed) continue;  // false for NaN, which counts as a mismatch
      ++mismatches;
      const double excess = std::isnan(difference) ? INFINITY : difference - allowed;
      if (excess > worst_excess) worst_excess = excess, worst_i = i, worst_j = j;
    }
  }
  if (mismatches == 0) return;
  const double n = numerical[worst_i][worst_j], a = analytic[worst_i][worst_j];
  std::ostringstream s;
  s << std::setprecision(12);
  s << "Jacobian mismatch for input " << input.position << " (shape "
    << shape_str(input.tensor.shape()) << "): " << mismatches << " of " << total
    << " entries differ.\n"
    << "  worst: d " << describe_output_element(worst_j, output_shape) << " / d input "
    << input.position << " " << describe_input_element(input, worst_i) << "\n"
    << "  numerical " << n << ", analytic " << a
    << " (|analytic - numerical| = " << std::fabs(a - n)
    << " > atol + rtol * |numerical| = " << options.atol + options.rtol * std::fabs(n) << ")\n";
  print_jacobians(s, numerical, analytic);
  problems.push_back(s.str());
}

// Reentrancy: the same backward, run twice on the same graph, must give the same bits.
void compare_bitwise(const CheckedInput& input, const Shape& output_shape, const Jacobian& first,
                     const Jacobian& second, std::vector<std::string>& problems) {
  for (std::size_t i = 0; i < first.size(); ++i) {
    for (std::size_t j = 0; j < first[i].size(); ++j) {
      if (ember::bit_cast<uint64_t>(first[i][j]) == ember::bit_cast<uint64_t>(second[i][j]))
        continue;
      std::ostringstream s;
      s << std::setprecision(17) << "backward is not reentrant for input " << input.position
        << ": two backward passes over the same graph gave " << first[i][j] << " and "
        << second[i][j] << " for d " << describe_output_element(j, output_shape) << " / d input "
        << input.position << " " << describe_input_element(input, i);
      problems.push_back(s.str());
      return;
    }
  }
}

// A zero grad_output must give zero (or undefined) gradients.
void check_zero_grad_output(const Tensor& output, const std::vector<CheckedInput>& inputs,
                            std::vector<std::string>& problems) {
  if (!output.requires_grad()) return;
  std::vector<Tensor> wrt;
  for (const CheckedInput& input : inputs) wrt.push_back(input.tensor);
  std::vector<Tensor> grads = grad({output}, wrt, {zeros(output.shape(), DType::Float64)},
                                   /*retain_graph=*/true, /*create_graph=*/false,
                                   /*allow_unused=*/true);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!grads[k].defined()) continue;
    std::vector<double> g = grads[k].to_vector<double>();
    for (std::size_t flat = 0; flat < g.size(); ++flat) {
      if (g[flat] == 0.0) continue;
      std::ostringstream s;
      s << std::setprecision(12) << "a zero grad_output gave a nonzero gradient for input "
        << inputs[k].position << ": " << g[flat] << " at element " << flat << " (index "
        << shape_str(unravel(static_cast<int64_t>(flat), grads[k].shape())) << ")";
      problems.push_back(s.str());
      break;
    }
  }
}

// Refuses what gradcheck cannot check meaningfully, naming the input.
void check_inputs(const std::vector<Tensor>& inputs) {
  bool any_requires_grad = false;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    check(t.defined(), "gradcheck: input ", k, " is an undefined tensor");
    check(!is_floating(t.dtype()) || t.dtype() == DType::Float64, "gradcheck: input ", k,
          " has dtype ", dtype_name(t.dtype()), " (shape ", t.shape(),
          "); gradcheck needs float64 inputs: with eps = 1e-6, a central difference in float32 "
          "is mostly rounding noise. Use .to(DType::Float64).");
    any_requires_grad = any_requires_grad || t.requires_grad();
  }
  check(any_requires_grad,
        "gradcheck: no input requires grad; call requires_grad_() on the inputs to check");

  // Inputs are perturbed in place: two inputs stored in the same place would move together,
  // and the numerical derivative would be the sum of both partial derivatives.
  std::map<std::pair<const Storage*, int64_t>, std::size_t> owner;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    for (int64_t offset : find_storage_elements(k, inputs[k]).storage_offsets) {
      auto [it, fresh] = owner.emplace(std::make_pair(inputs[k].storage().get(), offset), k);
      check(fresh, "gradcheck: inputs ", it->second, " and ", k,
            " share storage (both read storage element ", offset,
            "); gradcheck perturbs inputs in place, so give each input its own storage "
            "(pass a clone, or use one input twice inside fn)");
    }
  }
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  check_inputs(inputs);
  std::vector<CheckedInput> checked;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].requires_grad()) checked.push_back(find_storage_elements(k, inputs[k]));
  }

  // The output whose graph the analytic Jacobians come from.
  const std::vector<int64_t> versions = versions_of(inputs);
  Tensor output = fn(inputs);
  check_unmodified(inputs, versions);
  check(output.defined(), "gradcheck: fn returned an undefined tensor");
  check(output.dtype() == DType::Float64, "gradcheck: fn returned a tensor of dtype ",
        dtype_name(output.dtype()), " (shape ", output.shape(), "); the output must be float64");
  const Shape output_shape = output.shape();

  std::vector<std::string> problems;
  std::vector<Jacobian> analytic = analytic_jacobians(output, checked, problems);
  if (problems.empty()) {
    for (std::size_t k = 0; k < checked.size(); ++k) {
      Jacobian numerical =
          numerical_jacobian(fn, inputs, checked[k], output_shape, options.eps, versions);
      compare_jacobians(checked[k], output_shape, numerical, analytic[k], options, problems);
    }
    if (options.check_reentrant) {
      std::vector<Jacobian> again = analytic_jacobians(output, checked, problems);
      for (std::size_t k = 0; k < checked.size(); ++k) {
        compare_bitwise(checked[k], output_shape, analytic[k], again[k], problems);
      }
    }
    if (options.check_zero_grad) check_zero_grad_output(output, checked, problems);
  }

  GradcheckResult result;
  result.ok = problems.empty();
  std::ostringstream report;
  if (result.ok) {
    std::size_t entries = 0;
    for (const Jacobian& j : analytic) entries += j.empty() ? 0 : j.size() * j[0].size();
    report << "gradcheck passed: " << checked.size() << " input(s), " << entries
           << " Jacobian entries, output shape " << shape_str(output_shape);
  } else {
    report << "gradcheck failed:\n";
    for (const std::string& problem : problems) {
      report << problem << (problem.ends_with('\n') ? "" : "\n");
    }
  }
  result.report = report.str();
  return result;
}

GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs,
                              const GradgradcheckOptions& options) {
  check_inputs(inputs);
  // The output, once, for its shape and its name; the grad_output v drawn to its shape.
  Tensor output = fn(inputs);
  check(output.defined() && output.dtype() == DType::Float64,
        "gradgradcheck: fn must return a defined float64 tensor");
  check(output.requires_grad(), "gradgradcheck: fn's output (shape ", output.shape(),
        ") does not require grad: it has no graph back to the inputs, so there are no gradients "
        "to differentiate again (is an input detached inside fn?)");
  const std::string op = output.grad_fn() ? output.grad_fn()->name() : std::string("(no graph)");
  Generator generator(options.seed);
  Tensor v = randn(output.shape(), DType::Float64, &generator).requires_grad_();

  std::vector<std::size_t> differentiable;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].requires_grad()) differentiable.push_back(k);
  }
  const std::size_t n = inputs.size();
  // The vector-Jacobian product as a function of (inputs..., v): each defined gradient,
  // flattened, one after the other. Its graph (create_graph) is what gets checked.
  auto vjp = [&](const std::vector<Tensor>& args) {
    // gradcheck evaluates its fn in no-grad mode; this one needs a graph to differentiate.
    const bool previous_mode = GradMode::is_enabled();
    GradMode::set_enabled(true);
    struct RestoreMode {
      bool mode;
      ~RestoreMode() { GradMode::set_enabled(mode); }
    } restore{previous_mode};
    std::vector<Tensor> fn_inputs(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(n));
    Tensor out = fn(fn_inputs);
    std::vector<Tensor> wrt;
    for (std::size_t k : differentiable) wrt.push_back(fn_inputs[k]);
    if (!out.requires_grad()) return zeros({0}, DType::Float64);
    std::vector<Tensor> grads = grad({out}, wrt, {args[n]}, /*retain_graph=*/std::nullopt,
                                     /*create_graph=*/true, /*allow_unused=*/true);
    std::vector<Tensor> flat;
    for (const Tensor& g : grads) {
      if (g.defined()) flat.push_back(g.reshape({-1}));
    }
    if (flat.empty()) return zeros({0}, DType::Float64);
    return flat.size() == 1 ? flat[0] : cat(flat, 0);
  };
  std::vector<Tensor> args = inputs;
  args.push_back(v);
  GradcheckResult result = gradcheck(vjp, args, options);
  // Name the op, and the extra input for what it is.
  std::string report = result.report;
  const std::string extra = "input " + std::to_string(n);
  for (std::size_t at = report.find(extra); at != std::string::npos; at = report.find(extra, at)) {
    const char next = at + extra.size() < report.size() ? report[at + extra.size()] : ' ';
    if (next >= '0' && next <= '9') {  // input 12, not input 1
      at += extra.size();
      continue;
    }
    report.replace(at, extra.size(), "input " + std::to_string(n) + " (the grad_output)");
    at += extra.size() + 18;
  }
  result.report =
      "gradgradcheck of " + op + (result.ok ? ": " : " failed (second derivatives):\n") + report;
  return result;
}

}  // namespace ember::autograd
