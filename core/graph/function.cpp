// The glue between ops and the graph: grad mode, saved tensors, edges, hooks. (AccumulateGrad's
// apply, which adds into a leaf's .grad, is with the engine in core/autograd/engine.cpp.)
#include "core/graph/function.h"

#include <atomic>
#include <mutex>

#include "core/graph/graph_stats.h"

namespace ember {

namespace {
thread_local bool grad_mode_enabled = true;
}
bool GradMode::is_enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) { grad_mode_enabled = enabled; }

namespace autograd {

namespace {
thread_local bool keep_values_enabled = false;
}
bool KeepValuesGuard::is_enabled() { return keep_values_enabled; }
void KeepValuesGuard::set_enabled(bool enabled) { keep_values_enabled = enabled; }

std::string Node::forward_name() const { return detail::op_name(name()); }

namespace {
// The hooks of nodes destroyed while another node's destructor runs on this thread. A hook may own
// a tensor (a capture) whose node has hooks owning a tensor, and so on along a chain: freed in
// place, each would destroy the next from inside its destructor. The outermost destructor frees
// them one list after another instead; the nodes that frees add their own lists here.
// (Trivially destructible, so a node freed after this thread's thread_locals, by a static's
// destructor, finds it usable: the lists exist only while the outermost destructor runs.)
struct DeferredHooks {
  int depth = 0;  // node destructors running on this thread
  std::vector<std::vector<GradHookEntry>>* lists = nullptr;
};
thread_local DeferredHooks deferred_hooks;
}  // namespace

// Without this, dropping the last handle to the output of a long chain destroys its node, which
// destroys the next node from inside its destructor, and so on: one level of recursion per op.
// Instead every edge is moved to a local stack. A node popped from it that the stack owns alone
// hands its own edges to the stack before it dies (so its destructor finds none); a node still
// owned elsewhere (another edge on the stack, a tensor, another graph) just loses one owner.
// This covers chains, and DAGs where a node is used twice (y = y + y) or by many later nodes
// (residual stacks): the recursion is never deeper than one level, whatever the graph.
Node::~Node() {
  // (the nodes freed below were emptied by this loop, their hooks taken by deferred_hooks)
  if (next_functions.empty() && pre_hooks.empty()) return;
  DeferredHooks& deferred = deferred_hooks;
  const bool outermost = deferred.depth == 0;
  ++deferred.depth;
  if (!pre_hooks.empty()) {
    if (!deferred.lists) deferred.lists = new std::vector<std::vector<GradHookEntry>>();
    deferred.lists->push_back(std::move(pre_hooks));
  }
  ember::detail::ObjectVector<std::shared_ptr<Node>> stack;
  stack.reserve(32);  // one allocation for most graphs, not one per doubling
  for (auto& edge : next_functions) {
    if (edge) stack.push_back(std::move(edge));
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    if (node.use_count() == 1) {
      for (auto& edge : node->next_functions) {
        if (edge) stack.push_back(std::move(edge));
      }
    }
  }  // `node` dies (or loses an owner) at the end of each iteration, with no edges left to free
  if (outermost && deferred.lists) {
    while (!deferred.lists->empty()) {
      const std::vector<GradHookEntry> hooks = std::move(deferred.lists->back());
      deferred.lists->pop_back();
    }  // the hooks die here; the nodes they free add their own hooks to the lists
    delete deferred.lists;
    deferred.lists = nullptr;
  }
  --deferred.depth;
}

void SavedTensors::save(const std::vector<Tensor>& tensors) {
  tensors_.reserve(tensors_.size() + tensors.size());
  versions_.reserve(versions_.size() + tensors.size());
  originals_.reserve(originals_.size() + tensors.size());
  for (const Tensor& t : tensors) {
    // A detached handle: the saved tensor must not own the graph (the output saving itself
    // would be a reference cycle).
    tensors_.push_back(t.defined() ? t.detach() : Tensor());
    versions_.push_back(t.defined() ? t.storage()->version() : 0);
    originals_.push_back(t.impl());
  }
}

void SavedTensors::bind(const std::shared_ptr<Node>& node,
                        const ember::detail::ObjectVector<Tensor>& inputs, const Tensor& output) {
  for (std::size_t i = 0; i < originals_.size(); ++i) {
    const TensorImpl* original = originals_[i];
    if (original == nullptr) continue;
    if (original == output.impl()) {
      output_index_ = static_cast<int>(i);
      self_ = node;
      continue;
    }
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].impl() == original && node->next_functions[k]) {
        if (edges_.empty()) edges_.resize(originals_.size());
        edges_[i] = node->next_functions[k];
        break;
      }
    }
  }
  originals_.clear();
  originals_.shrink_to_fit();
}

void SavedTensors::bind_outputs(const std::vector<Tensor>& outputs,
                                const std::vector<std::shared_ptr<Node>>& nodes) {
  for (std::size_t i = 0; i < originals_.size(); ++i) {
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      if (originals_[i] != nullptr && outputs[k].defined() && originals_[i] == outputs[k].impl() &&
          nodes[k]) {
        if (output_nodes_.empty()) output_nodes_.resize(originals_.size());
        output_nodes_[i] = nodes[k];
        originals_[i] = nullptr;  // found: bind leaves it alone
      }
    }
  }
}

Tensor SavedTensors::get(std::size_t i, const std::string& node_name) const {
  check(!released_, node_name,
        ": trying to backward through the graph a second time; saved tensors were freed "
        "(specify retain_graph=true on the first backward)");
  const Tensor& t = tensors_.at(i);
  if (t.defined() && t.storage()->version() != versions_[i]) {
    fail(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [",
        dtype_name(t.dtype()), " ", t.shape(), "], which is output ", i, " of ", node_name,
        ", is at version ", t.storage()->version(), "; expected version ", versions_[i],
        " instead.");
  }
  if (!GradMode::is_enabled() || !t.defined()) return t;
  // Inside a create_graph backward: the saved input or output with its place in the graph.
  std::shared_ptr<Node> edge;
  if (static_cast<int>(i) == output_index_) {
    edge = self_.lock();
  } else if (i < output_nodes_.size() && !output_nodes_[i].expired()) {
    edge = output_nodes_[i].lock();
  } else if (i < edges_.size()) {
    edge = edges_[i];
  }
  if (!edge) return t;
  // A fresh handle on the same elements whose gradient flows to `edge` (a leaf's
  // AccumulateGrad, or the node that made the tensor).
  Tensor handle(std::make_shared<TensorImpl>(*t.impl()));
  handle.impl()->grad_fn = std::move(edge);
  handle.impl()->requires_grad = true;
  return handle;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  // A leaf: share one AccumulateGrad per leaf, held weakly by the leaf (no cycle). Graphs built
  // in two threads may share a leaf: the look-up and the creation happen under one lock, so
  // both get the same node (whose own lock then serializes their accumulation into the leaf).
  static std::mutex accumulator_mutex;
  std::lock_guard<std::mutex> lock(accumulator_mutex);
  TensorImpl* impl = t.impl();
  if (auto existing = impl->grad_accumulator.lock()) return existing;
  auto acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
  acc->output_shape = t.shape();
  impl->grad_accumulator = acc;
  return acc;
}

namespace detail {

std::string op_name(const std::string& node_name) {
  std::string base = node_name;
  for (const char* suffix : {"Backwards", "Backward"}) {
    auto at = base.rfind(suffix);
    if (at != std::string::npos && at > 0) {
      base.erase(at);
      break;
    }
  }
  std::string out;
  for (std::size_t i = 0; i < base.size(); ++i) {
    char c = base[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0) out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

void fail_undefined_input(const char* node_name) {
  ember::detail::fail_undefined(op_name(node_name).c_str());
}

void fail_stale_input(const char* node_name, const Tensor& t) {
  ember::detail::fail_stale_view(t, op_name(node_name).c_str());
}

void fail_out_of_memory(const char* node_name, const std::vector<Shape>& shapes) {
  std::string inputs;
  for (const Shape& shape : shapes) inputs += (inputs.empty() ? "" : ", ") + shape_str(shape);
  // The op the user called (OpScope, as size errors name it), then the one that ran out.
  const std::string op = op_name(node_name);
  fail(OpScope::name_or(op.c_str()), ": not enough memory (", op, " of inputs of shapes ", inputs,
       ")");
}

namespace {
// The grad_fn of a gradient computed without a graph under create_graph: it raises when run.
class NotImplementedNode : public Node {
 public:
  NotImplementedNode(const std::string& op, bool once_differentiable)
      : op_(op), once_differentiable_(once_differentiable) {}
  std::string name() const override { return "NotImplemented"; }
  std::vector<Tensor> apply(const Tensor&) override {
    if (once_differentiable_) {
      fail(
          "trying to differentiate twice a function that was marked with "
          "@once_differentiable: ",
          op_,
          " declares `once_differentiable = true` (its backward is not written in Ember ops), "
          "so the gradient that a create_graph backward recorded through it cannot be "
          "differentiated again");
    }
    fail("the derivative for '", op_name(op_), "' is not implemented: ", op_,
         " computes its gradient with a raw kernel, so the gradient that a create_graph "
         "backward recorded through it cannot be differentiated again");
  }

 private:
  std::string op_;
  bool once_differentiable_;
};
}  // namespace

void check_differentiable(const std::string& op, std::vector<Tensor>& grads,
                          const Tensor& grad_output, const Node& node, bool always,
                          bool once_differentiable) {
  if (!always && !(grad_output.defined() && grad_output.requires_grad())) return;
  for (Tensor& g : grads) {
    if (!g.defined() || g.requires_grad() || g.numel() == 0) continue;
    auto error = std::make_shared<NotImplementedNode>(op, once_differentiable);
    if (grad_output.defined() && grad_output.requires_grad()) {
      error->next_functions.push_back(gradient_edge(grad_output));
      error->input_shapes.push_back(grad_output.shape());
      error->input_dtypes.push_back(grad_output.dtype());
    }
    for (std::size_t i = 0; i < node.next_functions.size(); ++i) {
      error->next_functions.push_back(node.next_functions[i]);
      error->input_shapes.push_back(node.input_shapes[i]);
      error->input_dtypes.push_back(node.input_dtypes[i]);
    }
    Tensor handle(std::make_shared<TensorImpl>(*g.impl()));
    handle.impl()->grad_fn = error;
    handle.impl()->requires_grad = true;
    error->output_shape = handle.shape();
    g = handle;
  }
}

std::atomic<int64_t> g_nodes_recorded{0};  // nodes_recorded() (graph_stats.h)

void connect(const std::shared_ptr<Node>& node, const ember::detail::ObjectVector<Tensor>& inputs,
             Tensor& output) {
  g_nodes_recorded.fetch_add(1, std::memory_order_relaxed);
  node->next_functions.reserve(inputs.size());
  node->input_shapes.reserve(inputs.size());
  node->input_dtypes.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    node->next_functions.push_back(gradient_edge(in));
    node->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
    node->input_dtypes.push_back(in.defined() ? in.dtype() : kDefaultDType);
  }
  // The output must be a fresh handle: an op that returned one of its inputs would otherwise
  // overwrite that input's history.
  for (const Tensor& in : inputs) {
    if (in.defined() && output.is_same(in)) {
      output = ember::detail::make_view(in, in.shape(), in.strides(), in.offset());
    }
  }
  output.impl()->grad_fn = node;
  output.impl()->requires_grad = true;
  node->output = output.impl_ptr();
  node->output_shape = output.shape();
}

}  // namespace detail

int64_t nodes_recorded() { return detail::g_nodes_recorded.load(std::memory_order_relaxed); }

}  // namespace autograd

// A hook on a leaf runs in its AccumulateGrad; on any other tensor, before its node runs.
unsigned Tensor::register_hook(GradHook hook) const {
  detail::check_defined(*this, "register_hook");
  check(requires_grad(),
        "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  check(static_cast<bool>(hook), "register_hook: the hook is an empty function");
  const unsigned handle = impl_->hooks_registered++;
  auto fn = std::make_shared<const GradHook>(std::move(hook));
  if (is_leaf()) {
    impl_->hooks.push_back({handle, std::move(fn)});
  } else {
    impl_->grad_fn->pre_hooks.push_back({handle, std::move(fn)});
    impl_->hook_nodes.emplace_back(handle, impl_->grad_fn);
  }
  return handle;
}

void Tensor::remove_hook(unsigned handle) const {
  detail::check_defined(*this, "remove_hook");
  check(handle < impl_->hooks_registered, "remove_hook: invalid handle ", handle,
        ": no hook was registered with it on this tensor (it has had ", impl_->hooks_registered,
        ")");
  // The entry goes; a backward running it holds its own reference to the function.
  const auto erase = [handle](std::vector<GradHookEntry>& hooks) {
    std::erase_if(hooks, [handle](const GradHookEntry& e) { return e.handle == handle; });
  };
  erase(impl_->hooks);
  for (auto it = impl_->hook_nodes.begin(); it != impl_->hook_nodes.end(); ++it) {
    if (it->first != handle) continue;
    if (const std::shared_ptr<autograd::Node> node = it->second.lock()) erase(node->pre_hooks);
    impl_->hook_nodes.erase(it);
    break;
  }
  // Removed before, or released by a backward: nothing left to do.
}

}  // namespace ember
