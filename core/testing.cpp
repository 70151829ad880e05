#include "core/testing.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/base/repr.h"

namespace ember::testing {

namespace {

// Python's tuple of an index: (3,) or (1, 2) or ().
std::string index_tuple(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    index[i] = shape[i] == 0 ? 0 : flat % shape[i];
    flat = shape[i] == 0 ? 0 : flat / shape[i];
  }
  std::string text = "(";
  for (std::size_t i = 0; i < index.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(index[i]);
  }
  return text + (index.size() == 1 ? ",)" : ")");
}

std::string tolerance_text(double value) { return float_repr(value); }

// The element-wise comparison and the report, in the element type T of both tensors (as
// PyTorch compares after promoting them to a common dtype).
template <typename T>
std::optional<std::string> compare(const Tensor& actual, const Tensor& expected, double rtol,
                                   double atol, bool equal_nan) {
  const Tensor a = actual.detach().to(dtype_of<T>()).contiguous();
  const Tensor e = expected.detach().to(dtype_of<T>()).contiguous();
  const T* x = a.data_ptr<T>();
  const T* y = e.data_ptr<T>();
  const int64_t n = a.numel();
  constexpr bool floating = std::is_floating_point_v<T>;
  using Diff = std::conditional_t<floating, T, double>;

  int64_t mismatches = 0;
  Diff max_abs = 0, max_rel = 0;
  int64_t max_abs_at = 0, max_rel_at = 0;
  bool abs_nan = false, rel_nan = false;
  for (int64_t i = 0; i < n; ++i) {
    bool close = x[i] == y[i];
    Diff abs_diff = 0;
    if constexpr (floating) {
      if (equal_nan && std::isnan(x[i]) && std::isnan(y[i])) close = true;
      abs_diff = std::abs(x[i] - y[i]);
      const T allowed = static_cast<T>(atol) + std::abs(static_cast<T>(rtol) * y[i]);
      if (std::isfinite(abs_diff) && abs_diff <= allowed) close = true;
    } else {
      abs_diff = std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
      if (abs_diff <= atol + rtol * std::abs(static_cast<double>(y[i]))) close = true;
    }
    if (close) continue;
    ++mismatches;
    // torch.max over the mismatches' differences: the first greatest, a NaN wins.
    const Diff rel_diff = abs_diff / std::abs(static_cast<Diff>(y[i]));
    if (!abs_nan && (std::isnan(abs_diff) || abs_diff > max_abs || mismatches == 1)) {
      max_abs = abs_diff;
      max_abs_at = i;
      abs_nan = std::isnan(abs_diff);
    }
    if (!rel_nan && (std::isnan(rel_diff) || rel_diff > max_rel || mismatches == 1)) {
      max_rel = rel_diff;
      max_rel_at = i;
      rel_nan = std::isnan(rel_diff);
    }
  }
  if (mismatches == 0) return std::nullopt;

  const bool equality = rtol == 0 && atol == 0;
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f%%",
                100.0 * static_cast<double>(mismatches) / static_cast<double>(n));
  std::string text = std::string("Tensor-likes are not ") + (equality ? "equal" : "close") +
                     "!\n\nMismatched elements: " + std::to_string(mismatches) + " / " +
                     std::to_string(n) + " (" + percent + ")\n";
  const std::string abs_text = floating ? float_repr(static_cast<double>(max_abs))
                                        : std::to_string(static_cast<int64_t>(max_abs));
  text += "Greatest absolute difference: " + abs_text + " at index " +
          index_tuple(max_abs_at, actual.shape());
  if (!equality) text += " (up to " + tolerance_text(atol) + " allowed)";
  text += "\nGreatest relative difference: " + float_repr(static_cast<double>(max_rel)) +
          " at index " + index_tuple(max_rel_at, actual.shape());
  if (!equality) text += " (up to " + tolerance_text(rtol) + " allowed)";
  return text;
}

}  // namespace

Tolerances default_tolerances(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return {1.3e-6, 1e-5};
    case DType::Float64:
      return {1e-7, 1e-7};
    default:
      return {0.0, 0.0};
  }
}

std::optional<std::string> close_report(const Tensor& actual, const Tensor& expected,
                                        const CloseOptions& options) {
  check(actual.defined() && expected.defined(),
        "assert_close: expected defined tensors, got an undefined ",
        actual.defined() ? "expected" : "actual");
  check(options.rtol.has_value() == options.atol.has_value(),
        "assert_close: both 'rtol' and 'atol' must be either specified or omitted, but got no ",
        options.rtol ? "atol" : "rtol", ".");
  if (actual.shape() != expected.shape()) {
    return "The values for attribute 'shape' do not match: " + size_str(actual.shape()) +
           " != " + size_str(expected.shape()) + ".";
  }
  if (options.check_dtype && actual.dtype() != expected.dtype()) {
    return "The values for attribute 'dtype' do not match: torch." + dtype_name(actual.dtype()) +
           " != torch." + dtype_name(expected.dtype()) + ".";
  }
  const DType common = promote(actual.dtype(), expected.dtype());
  // Without explicit tolerances: the looser of the two dtypes' defaults, as PyTorch.
  Tolerances tol = default_tolerances(actual.dtype());
  const Tolerances other = default_tolerances(expected.dtype());
  tol = {std::max(tol.rtol, other.rtol), std::max(tol.atol, other.atol)};
  if (options.rtol) tol = {*options.rtol, *options.atol};
  if (actual.numel() == 0) return std::nullopt;
  switch (common) {
    case DType::Float32:
      return compare<float>(actual, expected, tol.rtol, tol.atol, options.equal_nan);
    case DType::Float64:
      return compare<double>(actual, expected, tol.rtol, tol.atol, options.equal_nan);
    default:
      return compare<int64_t>(actual, expected, tol.rtol, tol.atol, options.equal_nan);
  }
}

void assert_close(const Tensor& actual, const Tensor& expected, std::optional<double> rtol,
                  std::optional<double> atol, bool equal_nan) {
  CloseOptions options;
  options.rtol = rtol;
  options.atol = atol;
  options.equal_nan = equal_nan;
  if (auto report = close_report(actual, expected, options)) throw Error(*report);
}

}  // namespace ember::testing
