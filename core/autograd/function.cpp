// A custom Function's node: wiring its inputs and outputs into the graph, and running the user's
// backward with the checks PyTorch makes (torch/csrc/autograd/custom_function.cpp).
#include "core/autograd/function.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "core/autograd/engine.h"
#include "core/graph/record.h"
#include "core/ops/elementwise.h"  // add: an output's gradients from several uses are summed

namespace ember::autograd {

const char* IValue::tagKind() const {
  static constexpr const char* kinds[] = {"None",   "Bool",   "Int",    "Double",
                                          "String", "Tensor", "IntList"};
  return kinds[value_.index()];
}

void IValue::fail_kind(const char* expected) const {
  fail("IValue: expected ", expected, " but got ", tagKind());
}

void AutogradContext::save_for_backward(const tensor_list& to_save) {
  check(!forward_done_, node_name_,
        ": save_for_backward is called after forward returned; tensors for backward are saved "
        "in forward");
  // A second call replaces what the first named, as in libtorch.
  to_save_ = to_save;
}

tensor_list AutogradContext::get_saved_variables() const {
  tensor_list out;
  const std::size_t n = saved_.all().size();
  if (saved_.released()) saved_.get(0, node_name_);  // raises: freed by an earlier backward
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(saved_.get(i, node_name_));
  return out;
}

void AutogradContext::mark_dirty(const tensor_list& inputs) {
  for (const Tensor& t : inputs) dirty_.push_back(t.impl());
}

void AutogradContext::mark_non_differentiable(const tensor_list& outputs) {
  for (const Tensor& t : outputs) non_differentiable_.push_back(t.impl());
}

void AutogradContext::set_materialize_grads(bool value) { materialize_grads_ = value; }

namespace {
// The custom Function node whose backward runs on this thread (null outside one). Per thread, not
// in the node: passes through one shared graph may run its backward in several threads at once.
thread_local const Node* running_backward = nullptr;
}  // namespace

bool AutogradContext::needs_input_grad(std::size_t index) const {
  check(index < needs_input_grad_.size(), node_name_, ": needs_input_grad(", index,
        "): the function has ", needs_input_grad_.size(), " tensor inputs");
  // node_ is this context's node (set when the node is made)
  const bool in_backward = node_ != nullptr && running_backward == node_;
  return in_backward ? task_should_compute_output(*node_, index) : needs_input_grad_[index];
}

namespace detail {

std::string custom_function_base_name(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  // The last "::"-separated part outside template brackets and parentheses.
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    const char c = full[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && i + 1 < full.size() && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

namespace {

bool contains(const std::vector<const TensorImpl*>& list, const Tensor& t) {
  return t.defined() && std::find(list.begin(), list.end(), t.impl()) != list.end();
}

// PyTorch's is_expandable_to: a gradient of shape `grad` sums back to `shape`.
bool expandable_to(const Shape& shape, const Shape& grad) {
  if (shape.size() > grad.size()) return false;
  for (std::size_t i = 1; i <= shape.size(); ++i) {
    const int64_t s = shape[shape.size() - i];
    const int64_t g = grad[grad.size() - i];
    if (s != g && s != 1) return false;
  }
  return true;
}

}  // namespace

CustomNode::CustomNode(std::string name, std::string formula, bool once_differentiable,
                       Backward backward)
    : name_(std::move(name)),
      formula_(std::move(formula)),
      once_differentiable_(once_differentiable),
      backward_(std::move(backward)) {
  ctx_.node_name_ = name_;
  ctx_.node_ = this;
}

void CustomNode::add_argument(const Tensor& t) {
  is_tensor_argument_.push_back(true);
  inputs_.push_back(t);
}

void CustomNode::add_argument(const tensor_list& ts) {
  for (const Tensor& t : ts) add_argument(t);
}

std::string CustomNode::forward_name() const {
  std::string name = name_;
  if (name.size() > 8 && name.ends_with("Backward")) name.resize(name.size() - 8);
  return name;
}

AutogradContext* CustomNode::begin() {
  if (profiler::is_recording()) {
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs_) shapes.push_back(t.defined() ? t.shape() : Shape{});
    record_ =
        std::make_unique<profiler::RecordEvent>(forward_name(), profiler::EventKind::kOp, shapes);
  }
  bool any_requires_grad = false;
  for (const Tensor& t : inputs_) {
    if (!t.defined()) continue;
    any_requires_grad |= t.requires_grad();
    if (GradMode::is_enabled() && ember::detail::view_is_stale(t)) {
      ember::detail::fail_stale_view(t, name_.c_str());
    }
  }
  ctx_.recording_ = GradMode::is_enabled() && any_requires_grad;
  for (const Tensor& t : inputs_) {
    ctx_.needs_input_grad_.push_back(ctx_.recording_ && t.defined() && t.requires_grad());
  }
  return &ctx_;
}

void CustomNode::finish(const std::shared_ptr<CustomNode>& node, tensor_list& outputs) {
  node->record_.reset();
  AutogradContext& ctx = node->ctx_;
  ctx.forward_done_ = true;
  const tensor_list to_save = std::move(ctx.to_save_);
  ctx.to_save_.clear();
  const tensor_list inputs = std::move(node->inputs_);
  for (const TensorImpl* dirty : ctx.dirty_) {
    check(std::any_of(inputs.begin(), inputs.end(),
                      [dirty](const Tensor& in) { return in.impl() == dirty; }),
          node->name_, ": mark_dirty was given a tensor that is not an input of the Function");
    check(std::any_of(outputs.begin(), outputs.end(),
                      [dirty](const Tensor& out) { return out.impl() == dirty; }),
          "Some elements marked as dirty during the forward method were not returned as output. "
          "The inputs that are modified inplace must all be outputs of the Function (",
          node->name_, ")");
  }
  if (!ctx.recording_) {
    // Not recorded: an output that is an input returned as it is stays that tensor; a
    // non-differentiable one gets a handle that does not require grad.
    for (Tensor& out : outputs) {
      if (contains(ctx.non_differentiable_, out) && out.requires_grad()) out = out.detach();
    }
    return;
  }

  // A tensor in saved_data that becomes an output with this node as its grad_fn would hold its
  // own graph: a reference cycle that is never freed (PyTorch's garbage collector frees one made
  // by ctx.y = y; C++ has none). save_for_backward keeps outputs without owning them.
  for (const auto& [key, value] : ctx.saved_data) {
    if (!value.isTensor()) continue;
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      const Tensor& out = outputs[k];
      if (!out.defined() || !value.toTensor().is_same(out)) continue;
      const bool returned_input = std::any_of(inputs.begin(), inputs.end(),
                                              [&out](const Tensor& in) { return in.is_same(out); });
      const bool gets_history = !contains(ctx.non_differentiable_, out) &&
                                is_floating(out.dtype()) &&
                                (contains(ctx.dirty_, out) || !returned_input);
      check(!gets_history, node->name_, ": saved_data[\"", key, "\"] is output ", k,
            " of the Function, which would then own its own graph (a reference cycle: neither "
            "would ever be freed); keep it with save_for_backward");
    }
  }

  // The inputs' edges, as apply<Op> wires an op of Ember.
  ember::detail::ObjectVector<Tensor> input_handles;
  for (const Tensor& in : inputs) {
    node->next_functions.push_back(gradient_edge(in));
    node->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
    node->input_dtypes.push_back(in.defined() ? in.dtype() : kDefaultDType);
    input_handles.push_back(in);
  }

  // Each output's node: this one, or with several outputs an output node of its own.
  node->several_outputs_ = outputs.size() > 1;
  if (node->several_outputs_) node->delivered_ = std::make_unique<PassDeliveries>(outputs.size());
  std::vector<std::shared_ptr<Node>> output_nodes(outputs.size());
  const bool anomaly = is_recording(Recorder::Anomaly);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    Tensor& out = outputs[k];
    node->output_shapes_.push_back(out.defined() ? out.shape() : Shape{});
    node->output_dtypes_.push_back(out.defined() ? out.dtype() : kDefaultDType);
    if (!out.defined()) continue;
    if (contains(ctx.non_differentiable_, out) || !is_floating(out.dtype())) {
      if (out.requires_grad()) out = out.detach();
      continue;
    }
    const bool dirty = contains(ctx.dirty_, out);
    if (dirty) {
      // The input modified in place gets this node as its history (PyTorch's rebase_history).
      check(!(out.is_leaf() && out.requires_grad()),
            "a leaf Variable that requires grad is being used in an in-place operation. (",
            node->name_, " marked it dirty)");
      check(!out.impl()->is_view, node->name_,
            ": an input marked dirty is a view; modifying a view in place in a custom Function "
            "is not supported (apply it to the view's base, or work out of place)");
    } else if (std::any_of(inputs.begin(), inputs.end(),
                           [&out](const Tensor& in) { return in.is_same(out); })) {
      // An input returned as it is: a fresh handle, or the input's own history would be lost.
      // The handle is a view of the input: an in-place write to either would change the other
      // behind this node's backward, so both are refused as for any view (PyTorch forbids them).
      const TensorImpl* in = out.impl();
      const uint64_t history =
          in->is_view ? in->view_graph_version : out.storage()->graph_write_version();
      out = ember::detail::make_view(out, out.shape(), out.strides(), out.offset());
      out.impl()->is_view = true;
      out.impl()->view_graph_version = history;
    }
    std::shared_ptr<Node> target = node;
    if (node->several_outputs_) {
      target = std::make_shared<OutputNode>(
          node.get(), node->delivered_.get(), k,
          "one output of a custom Function: its gradient goes to the Function's backward");
      target->next_functions.push_back(node);
      target->input_shapes.push_back(Shape{});
      target->input_dtypes.push_back(out.dtype());
      target->output_shape = out.shape();
      if (anomaly) target->forward_context = capture_forward_context();
    }
    if (out.impl()->grad_fn) out.impl()->grad_fn->output.reset();
    out.impl()->grad_fn = target;
    out.impl()->requires_grad = true;
    target->output = out.impl_ptr();
    if (dirty) out.storage()->mark_graph_write();  // earlier views keep the old history
    if (KeepValuesGuard::is_enabled()) target->kept_value = out.detach();
    output_nodes[k] = target;
  }
  if (!node->several_outputs_ && !outputs.empty() && outputs[0].defined()) {
    node->output_shape = outputs[0].shape();
  }
  // Saved now that forward has returned (libtorch's save_variables after forward).
  ctx.saved_.save(to_save);
  if (!ctx.saved_.empty()) {
    ctx.saved_.bind_outputs(outputs, output_nodes);
    ctx.saved_.bind(node, input_handles, Tensor());
  }
  if (anomaly) node->forward_context = capture_forward_context();
}

std::vector<Tensor> CustomNode::apply(const Tensor& grad_output) {
  // The gradient of each output: the one this node received, or those its output nodes
  // delivered (then `grad_output` is only their tokens).
  tensor_list grads;
  if (several_outputs_) {
    grads = delivered_->take();
  } else {
    grads = {grad_output};
  }
  for (std::size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined() && ctx_.materialize_grads_) {
      grads[k] = zeros(output_shapes_[k], output_dtypes_[k]);
    }
  }
  // The first incoming gradient that has a graph, for check_differentiable.
  Tensor incoming;
  for (const Tensor& g : grads) {
    if (g.defined() && (!incoming.defined() || (g.requires_grad() && !incoming.requires_grad()))) {
      incoming = g;
    }
  }

  tensor_list result;
  {
    // A backward that is not written in ops records nothing, as PyTorch's @once_differentiable.
    std::optional<NoGradGuard> no_grad;
    if (once_differentiable_) no_grad.emplace();
    // needs_input_grad asks the running pass (restored on the way out, an exception included).
    struct Running {
      const Node* outer;
      ~Running() { running_backward = outer; }
    } running{std::exchange(running_backward, this)};
    try {
      result = backward_(&ctx_, grads);
    } catch (const Error& e) {
      if (std::string(e.what()).find(name_) != std::string::npos) throw;
      fail(name_, ": ", e.what());
    } catch (...) {
      rethrow_as_error(name_ + ": the backward of the custom Function");
    }
  }

  // One gradient per forward argument (PyTorch allows extra undefined ones at the end).
  const std::size_t arguments = is_tensor_argument_.size();
  if (result.size() > arguments &&
      std::all_of(result.begin() + static_cast<std::ptrdiff_t>(arguments), result.end(),
                  [](const Tensor& g) { return !g.defined(); })) {
    result.resize(arguments);
  }
  check(result.size() == arguments, "function ", name_,
        " returned an incorrect number of gradients (expected ", arguments, ", got ", result.size(),
        ")");
  std::vector<Tensor> input_grads;
  input_grads.reserve(next_functions.size());
  for (std::size_t i = 0; i < arguments; ++i) {
    if (!is_tensor_argument_[i]) {
      check(!result[i].defined(), "function ", name_,
            " returned a gradient different that is defined at position ", i + 1,
            ", but the corresponding forward input was not a Variable");
      continue;
    }
    const std::size_t index = input_grads.size();
    Tensor& g = result[i];
    if (g.defined() && next_functions[index]) {
      check(expandable_to(input_shapes[index], g.shape()), "Function ", name_,
            " returned an invalid gradient at index ", index, " - got ", g.shape(),
            " but expected shape compatible with ", input_shapes[index]);
    }
    input_grads.push_back(next_functions[index] ? g : Tensor());
  }
  if (GradMode::is_enabled()) {
    // Under create_graph: a gradient with no graph gets a node that raises if differentiated.
    check_differentiable(name_, input_grads, incoming, *this, once_differentiable_,
                         once_differentiable_);
  }
  return input_grads;
}

void CustomNode::release_saved() {
  if (!ctx_.saved_.empty()) ctx_.saved_.release();
}

}  // namespace detail
}  // namespace ember::autograd
