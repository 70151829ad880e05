// Your own differentiable op: ember::autograd::Function<T>, with libtorch's spelling
// (torch::autograd::Function, torch/csrc/autograd/custom_function.h).
//
//   struct MySquare : autograd::Function<MySquare> {
//     static Tensor forward(AutogradContext* ctx, const Tensor& x) {
//       ctx->save_for_backward({x});
//       return x * x;
//     }
//     static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
//       Tensor x = ctx->get_saved_variables()[0];
//       return {grad_outputs[0] * 2 * x};  // d(x^2)/dx = 2x
//     }
//   };
//   Tensor y = MySquare::apply(x);  // y.grad_fn()->name() == "MySquareBackward"
//
// forward takes the context, then any arguments: tensors, vectors of tensors, numbers, strings.
// It runs in no-grad mode and returns a Tensor or a tensor_list (several outputs). backward gets
// one gradient per output (zeros where none arrived, unless ctx->set_materialize_grads(false):
// then undefined) and returns one gradient per forward argument, in order: undefined for a
// non-tensor argument and for an input that needs none. A vector of tensors counts as one
// argument per element (as in libtorch).
//
// What the struct may also declare (each optional):
//   static std::string name();  // the node's name; default: the struct's name + "Backward"
//   static constexpr const char* formula = "y = x^2:  dy/dx = 2x";  // shown by explore
//   static constexpr bool once_differentiable = true;  // backward is not written in Ember ops
//
// A backward written in Ember ops is differentiable again: under create_graph its ops record a
// graph (saved inputs and outputs keep their place in it), so gradgradcheck applies. A backward
// written with raw loops gives gradients with no graph; it declares `once_differentiable`, runs
// in no-grad mode, and differentiating its gradient again raises PyTorch's error ("trying to
// differentiate twice a function that was marked with @once_differentiable").
//
// The node is an ordinary Node of core/graph: the engine runs it, anomaly mode names it (with its
// forward's module path), the profiler times it ("MySquareBackward", and the forward as
// "MySquare"), and autograd::explore shows its name, formula and saved tensors.
//
// The checks PyTorch makes, with its messages: backward must return one gradient per forward
// argument ("function MySquareBackward returned an incorrect number of gradients (expected 1,
// got 2)"), none for a non-tensor argument, and each of a shape that sums to its input's ("Function
// MySquareBackward returned an invalid gradient at index 0 - got [3] but expected shape compatible
// with [2, 3]"); a saved tensor modified in place after forward returned raises Ember's (and
// PyTorch's) version error; an exception thrown by backward comes out as an ember::Error naming
// the node. An input that forward returns as it is comes back as a view of it: an in-place write
// to that view, or to the input while the view is used, is refused as for any view (PyTorch
// forbids both: the custom backward would not see the change).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/autograd/engine.h"  // PassDeliveries
#include "core/base/grad_mode.h"
#include "core/graph/function.h"
#include "core/graph/node.h"
#include "core/graph/profiler.h"
#include "core/tensor/tensor.h"

namespace ember::autograd {

using tensor_list = std::vector<Tensor>;
using variable_list = std::vector<Tensor>;

// A value kept in ctx->saved_data: a number, a bool, a string, a tensor or a list of ints
// (libtorch's at::IValue, reduced to what a backward needs). Asking for the wrong kind raises.
class IValue {
 public:
  IValue() = default;
  IValue(bool v) : value_(v) {}                                // NOLINT: implicit, as at::IValue
  IValue(int v) : value_(static_cast<int64_t>(v)) {}           // NOLINT
  IValue(int64_t v) : value_(v) {}                             // NOLINT
  IValue(double v) : value_(v) {}                              // NOLINT
  IValue(const char* v) : value_(std::string(v)) {}            // NOLINT
  IValue(std::string v) : value_(std::move(v)) {}              // NOLINT
  IValue(Tensor v) : value_(std::move(v)) {}                   // NOLINT
  IValue(std::vector<int64_t> v) : value_(std::move(v)) {}     // NOLINT
  IValue(const Shape& v) : value_(std::vector<int64_t>(v)) {}  // NOLINT

  bool isNone() const { return value_.index() == 0; }
  bool isBool() const { return std::holds_alternative<bool>(value_); }
  bool isInt() const { return std::holds_alternative<int64_t>(value_); }
  bool isDouble() const { return std::holds_alternative<double>(value_); }
  bool isString() const { return std::holds_alternative<std::string>(value_); }
  bool isTensor() const { return std::holds_alternative<Tensor>(value_); }
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(value_); }

  bool toBool() const { return get<bool>("Bool"); }
  int64_t toInt() const { return get<int64_t>("Int"); }
  double toDouble() const { return get<double>("Double"); }
  const std::string& toStringRef() const { return get<std::string>("String"); }
  const Tensor& toTensor() const { return get<Tensor>("Tensor"); }
  const std::vector<int64_t>& toIntVector() const { return get<std::vector<int64_t>>("IntList"); }
  // "Int", "Double", ...: what it holds ("None" when empty).
  const char* tagKind() const;

 private:
  template <typename V>
  const V& get(const char* kind) const {
    if (const V* v = std::get_if<V>(&value_)) return *v;
    fail_kind(kind);
  }
  [[noreturn]] void fail_kind(const char* expected) const;
  std::variant<std::monostate, bool, int64_t, double, std::string, Tensor, std::vector<int64_t>>
      value_;
};

namespace detail {
class CustomNode;
}

// What forward leaves for backward (libtorch's torch::autograd::AutogradContext).
struct AutogradContext {
  // Anything else backward needs, by name: sizes, flags, scales (a tensor here is kept as it
  // is, with no version check: save tensors with save_for_backward). An output kept here would
  // own its own graph, a reference cycle: it is an Error.
  std::unordered_map<std::string, IValue> saved_data;

  // Keeps tensors (inputs, outputs, or intermediates) for backward; called in forward (an Error
  // elsewhere). As in libtorch, they are saved when forward returns: the version a saved tensor
  // must still have at backward is its version then, so forward may modify a tensor in place
  // (mark_dirty) after naming it here.
  void save_for_backward(const tensor_list& to_save);
  // The tensors saved, in order. Raises if one was modified in place since it was saved, or if
  // an earlier backward without retain_graph freed them.
  tensor_list get_saved_variables() const;
  // Inputs that forward modified in place (and returns): their history moves onto this node.
  void mark_dirty(const tensor_list& inputs);
  // Outputs that have no gradient (indices, masks): they do not require grad, and backward gets
  // zeros (or undefined) for them.
  void mark_non_differentiable(const tensor_list& outputs);
  // true (default): a gradient that did not arrive is passed to backward as zeros; false: as an
  // undefined tensor.
  void set_materialize_grads(bool value);
  // Whether the i-th tensor input (counting tensors only, as libtorch's edges) needs a gradient.
  // In forward: whether it requires grad. In backward, as libtorch's (grad_fn's
  // task_should_compute_output, core/autograd/engine.h): whether the running pass needs it, so
  // during autograd::grad({y}, {x0}) it is false for an input x1 that does not lead to x0, even
  // if x1 requires grad. (Python's ctx.needs_input_grad is the forward's tuple throughout.)
  bool needs_input_grad(std::size_t index) const;

 private:
  friend class detail::CustomNode;
  SavedTensors saved_;
  tensor_list to_save_;  // what forward named, until it returns (CustomNode::finish saves it)
  bool forward_done_ = false;
  std::string node_name_;  // for the errors of get_saved_variables
  bool recording_ = false;
  bool materialize_grads_ = true;
  std::vector<bool> needs_input_grad_;  // at forward
  const Node* node_ = nullptr;          // its node (needs_input_grad: is its backward running?)
  std::vector<const TensorImpl*> dirty_;
  std::vector<const TensorImpl*> non_differentiable_;
};

namespace detail {

// The node of a custom Function: backward is T::backward, wrapped with PyTorch's checks.
class CustomNode : public Node {
 public:
  using Backward = std::function<tensor_list(AutogradContext*, tensor_list)>;
  CustomNode(std::string name, std::string formula, bool once_differentiable, Backward backward);

  std::string name() const override { return name_; }
  // The struct's name ("MySquare"), or name() without its "Backward" when T::name() gives one.
  std::string forward_name() const override;
  const char* formula() const override { return formula_.c_str(); }
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release_saved() override;
  std::vector<Tensor> saved_tensors() const override { return ctx_.saved_.all(); }
  bool saved_released() const override { return ctx_.saved_.released(); }

  // Function<T>::apply's steps, around T::forward.
  void add_argument(const Tensor& t);
  void add_argument(const tensor_list& ts);
  void add_non_tensor_argument() { is_tensor_argument_.push_back(false); }
  // Starts the profiler's event; wires the inputs when the call is recorded. Returns the ctx.
  AutogradContext* begin();
  // After forward: wires the outputs into the graph (or, unrecorded, leaves them as they are).
  static void finish(const std::shared_ptr<CustomNode>& node, tensor_list& outputs);

 private:
  std::string name_, formula_;
  bool once_differentiable_;
  Backward backward_;
  AutogradContext ctx_;
  tensor_list inputs_;                    // the tensor inputs, until finish
  std::vector<bool> is_tensor_argument_;  // per forward argument
  std::vector<Shape> output_shapes_;      // for materialized zero gradients
  std::vector<DType> output_dtypes_;
  bool several_outputs_ = false;
  // Per output, the gradients its output node delivered in each running backward pass (several
  // outputs only).
  std::unique_ptr<PassDeliveries> delivered_;
  std::unique_ptr<profiler::RecordEvent> record_;  // the forward's profiler event, until finish
};

// "MySquare" for struct MySquare (namespaces and enclosing scopes dropped).
std::string custom_function_base_name(const char* mangled);

template <typename T>
std::string custom_node_name() {
  if constexpr (requires { T::name(); }) {
    return std::string(T::name());
  } else {
    return custom_function_base_name(typeid(T).name()) + "Backward";
  }
}
template <typename T>
std::string custom_formula() {
  if constexpr (requires { T::formula; }) {
    return std::string(T::formula);
  } else {
    return "";
  }
}
template <typename T>
constexpr bool custom_once_differentiable() {
  if constexpr (requires { T::once_differentiable; }) {
    return T::once_differentiable;
  } else {
    return false;
  }
}

template <typename A>
void add_argument(CustomNode& node, const A& arg) {
  using D = std::decay_t<A>;
  if constexpr (std::is_same_v<D, Tensor> || std::is_same_v<D, tensor_list>) {
    node.add_argument(arg);
  } else {
    node.add_non_tensor_argument();
  }
}

}  // namespace detail

template <class T>
struct Function {
  // Runs T::forward on the arguments and, when a tensor argument requires grad (in grad mode),
  // records one node whose backward is T::backward. Returns what forward returns.
  template <typename... Args>
  static auto apply(Args&&... args) {
    using Output =
        decltype(T::forward(std::declval<AutogradContext*>(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Output, Tensor> || std::is_same_v<Output, tensor_list>,
                  "a custom Function's forward returns a Tensor or a tensor_list");
    auto node = std::make_shared<detail::CustomNode>(
        detail::custom_node_name<T>(), detail::custom_formula<T>(),
        detail::custom_once_differentiable<T>(),
        [](AutogradContext* ctx, tensor_list grads) { return T::backward(ctx, std::move(grads)); });
    (detail::add_argument(*node, args), ...);
    AutogradContext* ctx = node->begin();
    tensor_list outputs;
    // An exception that is not an ember::Error (std::out_of_range, a thrown string) comes out
    // as one naming the Function.
    call_client(node->forward_name(), "the forward of the custom Function", [&] {
      NoGradGuard no_grad;
      if constexpr (std::is_same_v<Output, Tensor>) {
        outputs.push_back(T::forward(ctx, std::forward<Args>(args)...));
      } else {
        outputs = T::forward(ctx, std::forward<Args>(args)...);
      }
    });
    detail::CustomNode::finish(node, outputs);
    if constexpr (std::is_same_v<Output, Tensor>) {
      return outputs[0];
    } else {
      return outputs;
    }
  }
};

}  // namespace ember::autograd
