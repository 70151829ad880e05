// Anomaly mode: the switch, and the check the engine runs on each node's results.
#include "core/autograd/anomaly.h"

#include <cmath>
#include <sstream>

#include "core/graph/function.h"
#include "core/graph/node.h"
#include "core/graph/record.h"

namespace ember::autograd {

void set_detect_anomaly(bool enabled) { set_recording(Recorder::Anomaly, enabled); }
bool is_anomaly_enabled() { return is_recording(Recorder::Anomaly); }

DetectAnomalyGuard::DetectAnomalyGuard() : previous_(is_anomaly_enabled()) {
  set_detect_anomaly(true);
}
DetectAnomalyGuard::~DetectAnomalyGuard() { set_detect_anomaly(previous_); }

namespace {

// "nan" or "inf" for the first element of t that is not finite, or nullptr.
template <typename T>
const char* first_non_finite(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data_ptr<T>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i) {
    if (std::isnan(p[i])) return "nan";
    if (std::isinf(p[i])) return "inf";
  }
  return nullptr;
}

const char* non_finite(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32:
      return first_non_finite<float>(t);
    case DType::Float64:
      return first_non_finite<double>(t);
    default:
      return nullptr;  // integers and bools are always finite
  }
}

std::string ordinal(std::size_t i) {
  const std::size_t mod100 = i % 100;
  const char* suffix = (mod100 >= 11 && mod100 <= 13) ? "th"
                       : i % 10 == 1                  ? "st"
                       : i % 10 == 2                  ? "nd"
                       : i % 10 == 3                  ? "rd"
                                                      : "th";
  return std::to_string(i) + suffix;
}

}  // namespace

namespace detail {

std::string describe_forward(const Node& node) {
  std::ostringstream out;
  out << node.forward_name() << "(inputs of shapes ";
  for (std::size_t i = 0; i < node.input_shapes.size(); ++i) {
    out << (i ? ", " : "") << shape_str(node.input_shapes[i]);
  }
  out << ") -> " << shape_str(node.output_shape) << "\n  in: ";
  if (!node.forward_context) {
    out << "unknown (the node was made while anomaly mode was off: turn it on before the "
           "forward to see the module and labels)";
  } else {
    const std::string where = node.forward_context->describe();
    out << (where.empty() ? "no module and no label (plain code)" : where);
  }
  return out.str();
}

void check_backward_results(const Node& node, const std::vector<Tensor>& input_grads) {
  for (std::size_t i = 0; i < input_grads.size(); ++i) {
    const Tensor& g = input_grads[i];
    if (!g.defined()) continue;
    if (const char* what = non_finite(g)) {
      fail("Function '", node.name(), "' returned ", what, " values in its ", ordinal(i),
           " output (the gradient for input ", i, " of ", node.forward_name(), ", of shape ",
           g.shape(), ").\n  forward: ", describe_forward(node),
           "\n(anomaly mode: autograd::set_detect_anomaly(true) or DetectAnomalyGuard)");
    }
  }
}

}  // namespace detail

}  // namespace ember::autograd
