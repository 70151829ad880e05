// Tensor printing, rule for rule after PyTorch 1.13's torch/_tensor_str.py.
//
// The pieces, in the order PyTorch applies them:
//   1. _Formatter looks at every value that will be shown and picks one style for all of
//      them (integers, int_mode floats "2.", fixed "0.1234", scientific "1.2340e-05") and one
//      width, so that columns line up.
//   2. _tensor_str_with_formatter prints nested brackets; the innermost dimension
//      (_vector_str) wraps its elements at the line width.
//   3. Above 1000 elements, every dimension longer than 6 shows only its first and last 3
//      entries around "...", and the formatter sees only those entries (get_summarized_data).
//   4. _str_intern wraps the result in "tensor(...)" and _add_suffixes appends the parts like
//      "dtype=torch.float64" or "grad_fn=<MulBackward0>", each on a new line if it would
//      overflow the current one.
#include "core/base/format.h"
#include "core/base/shape.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/base/error.h"

namespace ember {
namespace {

// PRINT_OPTS, as set by torch.set_printoptions(profile="default").
constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

// Python's '{:.Nf}' (style 'f') or '{:.Ne}' (style 'e') of a float.
//
// For finite values printf is exact: both round the exact binary value half-to-even, and
// both print at least two exponent digits. Python spells the non-finite values itself:
// "nan" whatever the sign bit, "inf", "-inf".
std::string python_float_format(double v, char style, int precision) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const char* fmt = style == 'e' ? "%.*e" : "%.*f";
  int n = std::snprintf(nullptr, 0, fmt, precision, v);
  std::string s(static_cast<std::size_t>(n), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, precision, v);
  return s;
}

// Python's '{}'.format(x) for the elements of an integer or bool tensor, from the integer itself
// (a double cannot hold every int64: 2^53 + 1, INT64_MAX).
std::string python_int_format(int64_t v, DType dtype) {
  if (dtype == DType::Bool) return v != 0 ? "True" : "False";
  return std::to_string(v);
}

// The integer and bool counterpart of Formatter below: one width for all shown values.
class IntFormatter {
 public:
  IntFormatter(const std::vector<int64_t>& shown, DType dtype) : dtype_(dtype) {
    for (int64_t v : shown) max_width_ = std::max(max_width_, python_int_format(v, dtype).size());
  }
  std::size_t width() const { return max_width_; }
  std::string format(int64_t v) const {
    std::string s = python_int_format(v, dtype_);
    if (s.size() < max_width_) s.insert(0, max_width_ - s.size(), ' ');
    return s;
  }

 private:
  DType dtype_;
  std::size_t max_width_ = 1;
};

// torch._tensor_str._Formatter: one printing style and one width for all shown values.
class Formatter {
 public:
  // `shown` holds the values that will actually be printed (after summarization).
  Formatter(const std::vector<double>& shown, DType dtype)
      : dtype_(dtype), floating_(is_floating(dtype)) {
    // Integer and bool tensors have their own IntFormatter (exact integers).
    if (!floating_) {
      for (double v : shown)
        max_width_ = std::max(max_width_, python_int_format(static_cast<int64_t>(v), dtype).size());
      return;
    }

    // Floating tensors: the style is decided by the nonzero finite values only; zeros, nan
    // and inf take whatever style the others chose and do not count towards the width.
    std::vector<double> nonzero_finite;
    for (double v : shown) {
      if (std::isfinite(v) && v != 0) nonzero_finite.push_back(v);
    }
    if (nonzero_finite.empty()) return;  // "no valid number": int_mode, width 1

    double abs_min = std::abs(nonzero_finite[0]);
    double abs_max = abs_min;
    for (double v : nonzero_finite) {
      abs_min = std::min(abs_min, std::abs(v));
      abs_max = std::max(abs_max, std::abs(v));
    }

    // int_mode: every value is a whole number, so it prints as "2." instead of "2.0000".
    for (double v : nonzero_finite) {
      if (v != std::ceil(v)) {
        int_mode_ = false;
        break;
      }
    }

    // sci_mode: the magnitudes span more than three decades, or are too large (> 1e8), or
    // (for non-integers) too small (< 1e-4) to show in four decimals.
    bool wide_range = abs_max / abs_min > 1000.0 || abs_max > 1.0e8;
    sci_mode_ = int_mode_ ? wide_range : wide_range || abs_min < 1.0e-4;

    for (double v : nonzero_finite) {
      std::size_t len;
      if (sci_mode_) {
        len = python_float_format(v, 'e', kPrecision).size();
      } else if (int_mode_) {
        len = python_float_format(v, 'f', 0).size() + 1;  // + 1 for the trailing "."
      } else {
        len = python_float_format(v, 'f', kPrecision).size();
      }
      max_width_ = std::max(max_width_, len);
    }
  }

  std::size_t width() const { return max_width_; }

  // _Formatter.format: the value in the chosen style, right-aligned to the common width.
  std::string format(double v) const {
    std::string s;
    if (!floating_) {
      s = python_int_format(static_cast<int64_t>(v), dtype_);
    } else if (sci_mode_) {
      s = python_float_format(v, 'e', kPrecision);
    } else if (int_mode_) {
      s = python_float_format(v, 'f', 0);
      if (std::isfinite(v)) s += ".";  // the "." marks a float; "nan" and "inf" go without
    } else {
      s = python_float_format(v, 'f', kPrecision);
    }
    if (s.size() < max_width_) s.insert(0, max_width_ - s.size(), ' ');
    return s;
  }

 private:
  DType dtype_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t max_width_ = 1;
};

// Walks the row-major values of one tensor and prints them as nested lists.
template <typename V>
class Printer {
 public:
  // `values` are laid out row-major over `layout`: `shape` itself, or (summarized) the shown
  // entries only, shown_shape(shape).
  Printer(const std::vector<int64_t>& shape, const std::vector<int64_t>& layout,
          const std::vector<V>& values, bool summarize)
      : shape_(shape),
        layout_(layout),
        values_(values),
        summarize_(summarize),
        strides_(shape.size(), 1) {
    for (std::size_t d = layout.size(); d-- > 1;) strides_[d - 1] = strides_[d] * layout[d];
  }

  // get_summarized_data: the values that will be shown, in order. Only these are given to
  // the Formatter, so a huge value hidden behind "..." does not change the style.
  void collect_shown(std::vector<V>& out, std::size_t dim = 0, int64_t offset = 0) const {
    if (dim == shape_.size()) {
      out.push_back(values_[static_cast<std::size_t>(offset)]);
      return;
    }
    for (int64_t i : shown_indices(dim)) {
      if (i >= 0) collect_shown(out, dim + 1, offset + position(dim, i) * strides_[dim]);
    }
  }

  // _tensor_str_with_formatter: the bracketed text of the sub-tensor starting at `offset`
  // whose first dimension is `dim`, for a first line starting at column `indent`.
  template <typename F>
  std::string tensor_str(const F& f, std::size_t dim, int64_t offset, int64_t indent) const {
    // A 0-d tensor is its only value (_scalar_str).
    if (shape_.empty()) return f.format(values_[0]);
    // The innermost dimension is a vector.
    if (dim + 1 == shape_.size()) return vector_str(f, offset, indent);

    // Sub-tensors are separated by "," and as many newlines as they have dimensions (so
    // 3-d and higher blocks get blank lines between them), then aligned under the "[".
    std::vector<std::string> slices;
    for (int64_t i : shown_indices(dim)) {
      if (i < 0) {
        slices.push_back("...");
      } else {
        slices.push_back(
            tensor_str(f, dim + 1, offset + position(dim, i) * strides_[dim], indent + 1));
      }
    }
    std::size_t sub_dims = shape_.size() - dim - 1;
    // Built with append, not operator+ (GCC 12 -O3 warns falsely on the latter, bug 105329).
    std::string sep = ",";
    sep.append(sub_dims, '\n').append(indent + 1, ' ');
    return bracketed(join(slices, sep));
  }

 private:
  // The indices of dimension `dim` that are printed. Summarization keeps the first and last
  // kEdgeItems of a dimension longer than 2 * kEdgeItems; -1 marks the "..." between them.
  std::vector<int64_t> shown_indices(std::size_t dim) const {
    int64_t n = shape_[dim];
    std::vector<int64_t> idx;
    if (summarize_ && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  // Where index i of dimension `dim` sits in the values' layout: the last shown entries of a
  // cut dimension follow its first ones.
  int64_t position(std::size_t dim, int64_t i) const {
    return i < kEdgeItems ? i : i - (shape_[dim] - layout_[dim]);
  }

  // _vector_str: the elements of a 1-d run, as many per line as fit in the line width
  // (each counts its width plus ", "), later lines aligned under the first element.
  template <typename F>
  std::string vector_str(const F& f, int64_t offset, int64_t indent) const {
    int64_t element_length = static_cast<int64_t>(f.width()) + 2;
    double fit = std::floor(static_cast<double>(kLineWidth - indent) / element_length);
    std::size_t per_line = static_cast<std::size_t>(std::max(1.0, fit));

    std::vector<std::string> data;
    const std::size_t last = shape_.size() - 1;
    for (int64_t i : shown_indices(last)) {
      if (i < 0) {
        data.push_back(" ...");  // counts as an element when wrapping
      } else {
        data.push_back(f.format(values_[static_cast<std::size_t>(offset + position(last, i))]));
      }
    }

    std::vector<std::string> lines;
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (i % per_line == 0) {
        lines.push_back(data[i]);
      } else {
        lines.back() += ", " + data[i];
      }
    }
    std::string sep = ",\n";
    sep.append(indent + 1, ' ');
    return bracketed(join(lines, sep));
  }

  static std::string bracketed(const std::string& inner) {
    std::string out = "[";
    out.append(inner).append("]");
    return out;
  }

  static std::string join(const std::vector<std::string>& parts, const std::string& sep) {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i) out += sep;
      out += parts[i];
    }
    return out;
  }

  const std::vector<int64_t>& shape_;
  const std::vector<int64_t>& layout_;
  const std::vector<V>& values_;
  bool summarize_;
  std::vector<int64_t> strides_;
};

// _add_suffixes: ", suffix" on the current line, or ",\n" + indent + suffix when it would
// pass the line width. The arithmetic is PyTorch's own, quirks included: the first line
// length counts two more characters than the last line really has.
std::string add_suffixes(const std::string& tensor_str, const std::vector<std::string>& suffixes,
                         int64_t indent) {
  std::size_t newline = tensor_str.rfind('\n');
  int64_t rfind = newline == std::string::npos ? -1 : static_cast<int64_t>(newline);
  int64_t last_line_len = static_cast<int64_t>(tensor_str.size()) - rfind + 1;

  std::string out = tensor_str;
  for (const std::string& suffix : suffixes) {
    int64_t suffix_len = static_cast<int64_t>(suffix.size());
    if (last_line_len + suffix_len + 2 > kLineWidth) {
      out += ",\n" + std::string(static_cast<std::size_t>(indent), ' ') + suffix;
      last_line_len = indent + suffix_len;
    } else {
      out += ", " + suffix;
      last_line_len += suffix_len + 2;
    }
  }
  return out + ")";
}

}  // namespace

std::string format_shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";  // Python's one-element tuple
  return s + ")";
}

std::vector<int64_t> shown_shape(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    check(d >= 0, "format_tensor: negative dimension in shape ", shape);
    numel = mul_wrap(numel, d);
  }
  std::vector<int64_t> shown = shape;
  if (numel > kThreshold) {
    for (int64_t& d : shown) d = std::min(d, 2 * kEdgeItems);
  }
  return shown;
}

std::string format_size(const std::vector<int64_t>& shape) {
  return "torch.Size(" + shape_str(shape) + ")";
}

namespace {
template <typename V>
std::string format_any(const std::vector<int64_t>& shape, const std::vector<V>& values, DType dtype,
                       const std::vector<std::string>& suffixes) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    check(d >= 0, "format_tensor: negative dimension in shape ", shape);
    numel = mul_wrap(numel, d);
  }
  const bool summarize = numel > kThreshold;
  const std::vector<int64_t> shown = shown_shape(shape);
  int64_t shown_numel = 1;
  for (int64_t d : shown) shown_numel = mul_wrap(shown_numel, d);
  const auto given = static_cast<int64_t>(values.size());
  check(given == numel || given == shown_numel, "format_tensor: shape ", shape, " needs ", numel,
        " values (or the ", shown_numel, " shown ones), got ", values.size());
  const std::vector<int64_t>& layout = given == numel ? shape : shown;

  // _str_intern for a plain strided CPU tensor.
  const std::string prefix = "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> all_suffixes;
  std::string body;
  if (numel == 0) {
    // An empty tensor shows its shape unless it is (0,), and its dtype unless it is the
    // default dtype: with no elements there is nothing else to tell them apart.
    if (shape.size() != 1) all_suffixes.push_back("size=" + format_shape_tuple(shape));
    if (dtype != get_default_dtype()) all_suffixes.push_back("dtype=torch." + dtype_name(dtype));
    body = "[]";
  } else {
    // The default dtype, int64 and bool are recognizable from the printed values; the other
    // floating dtype is not, so it is named.
    if (is_floating(dtype) && dtype != get_default_dtype())
      all_suffixes.push_back("dtype=torch." + dtype_name(dtype));

    Printer<V> printer(shape, layout, values, summarize);
    std::vector<V> shown;
    printer.collect_shown(shown);
    if constexpr (std::is_same_v<V, int64_t>) {
      IntFormatter formatter(shown, dtype);
      body = printer.tensor_str(formatter, 0, 0, indent);
    } else {
      Formatter formatter(shown, dtype);
      body = printer.tensor_str(formatter, 0, 0, indent);
    }
  }
  all_suffixes.insert(all_suffixes.end(), suffixes.begin(), suffixes.end());
  return add_suffixes(prefix + body, all_suffixes, indent);
}
}  // namespace

std::string format_tensor(const std::vector<int64_t>& shape, const std::vector<double>& values,
                          DType dtype, const std::vector<std::string>& suffixes) {
  return format_any(shape, values, dtype, suffixes);
}

std::string format_int_tensor(const std::vector<int64_t>& shape, const std::vector<int64_t>& values,
                              DType dtype, const std::vector<std::string>& suffixes) {
  check(!is_floating(dtype), "format_tensor: integer values given for a ", dtype_name(dtype),
        " tensor");
  return format_any(shape, values, dtype, suffixes);
}

}  // namespace ember
