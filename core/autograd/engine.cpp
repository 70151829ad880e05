// The backward engine.
//
// 1. Collect the graph reachable from the outputs' grad_fns (iterative DFS: no recursion, so a
//    100,000-node chain is fine) and count, for every node, how many edges point into it.
// 2. Seed the outputs' nodes with their gradients. A node is ready when every node that sends
//    it a gradient has run; then it runs once, with the sum of what it received.
// 3. Each gradient a node returns is summed back to its input's shape (undoing broadcasting)
//    and added into the buffer of the input's node.
// 4. Without retain_graph, each node frees its saved tensors and its output's hooks once it has
//    run.
//
// The whole pass runs in no-grad mode, except with create_graph: then it runs in grad mode, so
// every op the backward formulas (and the sums of steps 2-3) call records a graph of its own, and
// the gradients it returns can be differentiated again. Saved tensors then come back with their
// place in the graph (SavedTensors::get in core/graph/function.cpp).
#include "core/autograd/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/autograd/anomaly.h"
#include "core/autograd/explore.h"  // page::dot_quote
#include "core/autograd/log.h"
#include "core/graph/function.h"
#include "core/graph/profiler.h"
#include "core/graph/record.h"
#include "core/ops/elementwise.h"  // add: gradients arriving by several edges are summed
#include "core/ops/reduce.h"       // sum_to: a broadcast input gets its gradient summed back

namespace ember::autograd {

namespace {

// The state of one backward pass. Every node reachable from the roots gets a slot (its number in
// discovery order); per slot: the node (owned, so none dies mid-pass), how many edges into it
// have not delivered yet, the sum of the gradients that did, and whether it is queued to run.
//
// The slots are found through a small open-addressing table rather than std::unordered_map:
// a backward over a small graph (the book's attention block has ~40 nodes) would otherwise spend
// much of its time allocating and freeing map entries. Kept per pass, not in the nodes, because
// passes over graphs that share nodes (a leaf's AccumulateGrad) may run in several threads.
struct GraphTask {
  static constexpr std::size_t kInitialSlots = 64;  // grown as needed
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<int> dependencies;  // edges into the node not yet delivered
  std::vector<Tensor> buffers;    // summed incoming gradient
  std::vector<char> queued;
  // autograd::grad's inputs (null for backward), and per slot whether the node leads to one of
  // them: what the pass needs (PyTorch's exec_info), worked out when a node first asks
  // (task_should_compute_output), so a pass nobody asks pays nothing.
  const std::unordered_map<Node*, std::vector<std::size_t>>* capture = nullptr;
  std::vector<char> needed;
  std::vector<std::pair<Node*, int>> table =  // Node* -> slot; its size a power of 2
      std::vector<std::pair<Node*, int>>(kInitialSlots * 2, {nullptr, -1});

  GraphTask() {
    nodes.reserve(kInitialSlots);
    dependencies.reserve(kInitialSlots);
    buffers.reserve(kInitialSlots);
    queued.reserve(kInitialSlots);
  }

  // Fibonacci hashing: the middle bits of the address times 2^64 / golden ratio.
  static std::size_t hash(const Node* node) {
    const uint64_t x = static_cast<uint64_t>(reinterpret_cast<std::uintptr_t>(node));
    return static_cast<std::size_t>((x * 0x9E3779B97F4A7C15u) >> 32);
  }
  // The slot of `node`, or -1.
  int find(const Node* node) const {
    const std::size_t mask = table.size() - 1;
    for (std::size_t i = hash(node) & mask;; i = (i + 1) & mask) {
      if (table[i].first == node) return table[i].second;
      if (table[i].first == nullptr) return -1;
    }
  }
  // The slot of `node`, made if new (`added` tells which).
  int insert(const std::shared_ptr<Node>& node, bool& added) {
    if (2 * (nodes.size() + 1) > table.size()) grow();
    const std::size_t mask = table.size() - 1;
    std::size_t i = hash(node.get()) & mask;
    for (; table[i].first != nullptr; i = (i + 1) & mask) {
      if (table[i].first == node.get()) {
        added = false;
        return table[i].second;
      }
    }
    const int slot = static_cast<int>(nodes.size());
    table[i] = {node.get(), slot};
    nodes.push_back(node);
    dependencies.push_back(0);
    buffers.emplace_back();
    queued.push_back(0);
    added = true;
    return slot;
  }
  void grow() {
    std::vector<std::pair<Node*, int>> old(2 * table.size(), {nullptr, -1});
    old.swap(table);
    const std::size_t mask = table.size() - 1;
    for (const auto& [node, slot] : old) {
      if (node == nullptr) continue;
      std::size_t i = hash(node) & mask;
      while (table[i].first != nullptr) i = (i + 1) & mask;
      table[i] = {node, slot};
    }
  }
};

// Step 1: every node reachable from the roots, and how many edges reach each.
void collect(const std::vector<std::shared_ptr<Node>>& roots, GraphTask& task) {
  std::vector<int> stack;
  stack.reserve(GraphTask::kInitialSlots);
  bool added = false;
  for (const auto& r : roots) {
    if (!r) continue;
    const int slot = task.insert(r, added);
    if (added) stack.push_back(slot);
  }
  while (!stack.empty()) {
    Node* n = task.nodes[stack.back()].get();
    stack.pop_back();
    for (const auto& next : n->next_functions) {
      if (!next) continue;
      const int slot = task.insert(next, added);
      ++task.dependencies[slot];
      if (added) stack.push_back(slot);
    }
  }
}

// The nodes from which a captured node can be reached (the captured ones included).
void mark_needed(GraphTask& task) {
  const std::size_t n = task.nodes.size();
  std::vector<std::vector<int>> senders(n);  // per slot, the slots with an edge into it
  for (std::size_t s = 0; s < n; ++s) {
    for (const auto& next : task.nodes[s]->next_functions) {
      if (next) senders[task.find(next.get())].push_back(static_cast<int>(s));
    }
  }
  task.needed.assign(n, 0);
  std::vector<int> stack;
  for (const auto& [node, indices] : *task.capture) {
    const int slot = task.find(node);
    if (slot >= 0 && !task.needed[slot]) {
      task.needed[slot] = 1;
      stack.push_back(slot);
    }
  }
  while (!stack.empty()) {
    const int slot = stack.back();
    stack.pop_back();
    for (int sender : senders[slot]) {
      if (!task.needed[sender]) {
        task.needed[sender] = 1;
        stack.push_back(sender);
      }
    }
  }
}

// Whether autograd::grad runs `node`: only if one of its inputs leads to one of grad's inputs
// (PyTorch's exec_info). A node that does not (a branch to other leaves, the nodes below a
// non-leaf input) is not run, so its backward, its tensor hooks and a module's backward hooks
// on it do not run, and it keeps its saved tensors; nor are the nodes below it run. A pass
// without inputs (backward) runs every node.
bool runs_in_grad(GraphTask& task, const Node& node) {
  if (!task.capture) return true;
  if (task.needed.empty()) mark_needed(task);
  for (const auto& next : node.next_functions) {
    if (!next) continue;
    const int slot = task.find(next.get());
    if (slot >= 0 && task.needed[slot]) return true;
  }
  return false;
}

// The pass running on this thread (a backward inside a backward runs its own, then returns to
// the outer one).
thread_local GraphTask* current_task = nullptr;

void accumulate(GraphTask& task, int slot, const Tensor& grad) {
  Tensor& buffer = task.buffers[slot];
  buffer = buffer.defined() ? add(buffer, grad) : grad;
}

// The gradient of `node`'s output: its hooks may replace it; retain_grad keeps a copy.
Tensor run_output_hooks(Node* node, Tensor grad, bool observing) {
  check(!node->hooks_released,
        "Trying to backward through the graph a second time: the hooks "
        "registered on the output of ",
        node->name(),
        " were released by the first backward. "
        "Specify retain_graph=true if you need to backward through the graph a second time.");
  // A snapshot: a hook may register or remove hooks, itself included, while it runs (as in
  // PyTorch, the hooks of this tensor when the pass reached it all run).
  const std::vector<GradHookEntry> hooks = node->pre_hooks;
  for (const GradHookEntry& hook : hooks) {
    Tensor replaced = call_client(node->name(), "a hook registered on its output",
                                  [&] { return (*hook.fn)(grad); });
    if (replaced.defined()) {
      check(replaced.shape() == grad.shape(), node->name(),
            ": a hook replaced a gradient of shape ", grad.shape(), " by one of shape ",
            replaced.shape());
      check(replaced.dtype() == grad.dtype(), node->name(),
            ": hook has changed the type of value (was ", dtype_name(grad.dtype()), " got ",
            dtype_name(replaced.dtype()), ")");
      grad = replaced;
    }
  }
  auto out = node->output.lock();
  if (out && out->retains_grad && !observing) {
    out->grad = out->grad.defined() ? add(out->grad, grad) : grad.clone();
  }
  return grad;
}

// The backward passes running on this thread, each started from within the one before.
thread_local int nested_passes = 0;
constexpr int kMaxNestedPasses = 100;

// Runs the graph. With `capture`, gradients reaching those nodes are returned instead of
// accumulated, and no AccumulateGrad runs (autograd::grad). With `observer`, each node run is
// reported to it (observe_backward); null costs one test per node.
void execute(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
             bool retain_graph, bool create_graph,
             const std::unordered_map<Node*, std::vector<std::size_t>>* capture,
             std::vector<Tensor>* captured, BackwardObserver* observer = nullptr) {
  // A pass started inside a pass (a custom Function's backward or a hook calling backward() or
  // grad()) runs on this thread's stack; one that reaches its own graph again starts another
  // without end. Past kMaxNestedPasses it is an Error, long before the stack runs out.
  check(nested_passes < kMaxNestedPasses, "backward: ", kMaxNestedPasses,
        " backward passes are running nested in each other on this thread (a backward started "
        "from within a backward: a custom Function's backward or a hook calling backward() or "
        "autograd::grad()); a backward that runs its own graph again recurses without end");
  ++nested_passes;
  struct LeavePass {
    ~LeavePass() { --nested_passes; }
  } leave_pass;
  // Grad mode is on for the whole pass exactly when the gradients must have a graph.
  const bool previous_mode = GradMode::is_enabled();
  GradMode::set_enabled(create_graph);
  struct RestoreMode {
    bool mode;
    ~RestoreMode() { GradMode::set_enabled(mode); }
  } restore{previous_mode};
  GraphTask task;
  if (capture && !capture->empty()) task.capture = capture;
  const PassScope pass;
  struct RestoreTask {
    GraphTask* outer;
    ~RestoreTask() { current_task = outer; }
  } restore_task{std::exchange(current_task, &task)};
  // libtorch's _make_grads: no gradients (each output a one-element tensor), or one per output.
  check(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "backward: got ",
        outputs.size(), " tensors and ", grad_outputs.size(), " gradients");
  std::vector<std::shared_ptr<Node>> roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    check(out.defined() && out.requires_grad(), "backward: element ", i,
          " of tensors does not require grad and does not have a grad_fn");
    Tensor g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    if (!g.defined()) {
      check(out.numel() == 1,
            "backward: grad can be implicitly created only for scalar outputs "
            "(got an output of shape ",
            out.shape(), "); pass a gradient of that shape");
      g = ones_like(out);
    }
    check(g.shape() == out.shape(), "backward: gradient of shape ", g.shape(),
          " does not match output of shape ", out.shape());
    roots.push_back(gradient_edge(out));
  }
  collect(roots, task);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    Tensor g =
        i < grad_outputs.size() && grad_outputs[i].defined() ? grad_outputs[i] : ones_like(out);
    accumulate(task, task.find(roots[i].get()), g.to(out.dtype()));
  }

  // Each root once, even when an output is passed twice (its gradients were summed above):
  // running it a second time would count its edges twice and release a node too early.
  std::vector<int> ready;
  ready.reserve(GraphTask::kInitialSlots);
  for (const auto& r : roots) {
    const int slot = task.find(r.get());
    if (task.dependencies[slot] == 0 && !task.queued[slot]) {
      task.queued[slot] = 1;
      ready.push_back(slot);
    }
  }

  const bool log_steps = logging::debug_enabled();
  const bool anomaly = is_anomaly_enabled();  // read once per pass
  while (!ready.empty()) {
    const int slot = ready.back();
    ready.pop_back();
    Node* node = task.nodes[slot].get();
    // Undefined when no gradient reached this node; moved out, so the buffer is freed early.
    Tensor grad = std::move(task.buffers[slot]);

    if (capture) {
      auto it = capture->find(node);
      // The same input may be asked for twice (PyTorch returns its gradient twice).
      if (it != capture->end()) {
        for (std::size_t slot : it->second) (*captured)[slot] = grad;
      }
    }
    std::vector<Tensor> input_grads;
    // The profiler's hook: the node's backward, and the sums of its gradients into the buffers
    // below, timed as one event named after the node ("MmBackward0"); when nothing records, a
    // relaxed load and a branch.
    std::optional<profiler::RecordEvent> record;
    if (profiler::is_recording() && grad.defined()) [[unlikely]] {
      record.emplace(node->name(), profiler::EventKind::kBackward,
                     std::vector<Shape>{grad.shape()});
    }
    if (!grad.defined() || !runs_in_grad(task, *node)) {
      // Nothing to propagate, or nothing autograd::grad needs; still release the nodes below it.
    } else if (auto* acc = node->as_accumulate_grad()) {
      if (!capture) acc->apply(grad);
    } else {
      grad = run_output_hooks(node, grad, observer != nullptr);
      if (!anomaly) {
        input_grads = node->apply(grad);
      } else {
        // Anomaly mode: an error raised by the backward says where its forward ran, and the
        // results are checked for NaN and infinity.
        try {
          // Under create_graph the backward's own ops make nodes: they say whose backward
          // made them (a NaN in a second derivative then names both).
          RecordFunction label("backward of " + node->name());
          input_grads = node->apply(grad);
        } catch (const Error& e) {
          fail(e.what(), "\n  (in the backward of ", node->name(),
               "; forward: ", detail::describe_forward(*node), ")");
        }
        detail::check_backward_results(*node, input_grads);
      }
      if (log_steps) logging::backward_step(node->name(), grad, input_grads);
      if (!retain_graph) {
        node->release_saved();
        // The hooks go with the saved tensors (each hook's captures freed; a later
        // remove_hook of its handle does nothing).
        if (!node->pre_hooks.empty()) {
          node->pre_hooks.clear();
          node->hooks_released = true;
        }
      }
    }

    std::vector<Tensor> sent;  // what reached each input, for the observer
    if (observer) sent.resize(node->next_functions.size());
    for (std::size_t i = 0; i < node->next_functions.size(); ++i) {
      Node* next = node->next_functions[i].get();
      if (!next) continue;
      const int next_slot = task.find(next);
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor g = input_grads[i];
        // (Checked first: name() builds a std::string, needed only for a broadcast gradient.)
        if (g.shape() != node->input_shapes[i]) g = sum_to(g, node->input_shapes[i], node->name());
        if (g.dtype() != node->input_dtypes[i]) g = g.to(node->input_dtypes[i]);
        if (observer) sent[i] = g;
        accumulate(task, next_slot, g);
      }
      if (--task.dependencies[next_slot] == 0 && !task.queued[next_slot]) {
        task.queued[next_slot] = 1;
        ready.push_back(next_slot);
      }
    }
    if (observer) observer->on_node(*node, grad, sent);
  }
}

}  // namespace

bool task_should_compute_output(const Node& node, std::size_t edge) {
  check(edge < node.next_functions.size(), node.name(), ": task_should_compute_output(", edge,
        "): the node has ", node.next_functions.size(), " inputs");
  Node* next = node.next_functions[edge].get();
  if (next == nullptr) return false;
  GraphTask* task = current_task;
  if (task == nullptr || task->capture == nullptr) return true;
  if (task->needed.empty()) mark_needed(*task);
  const int slot = task->find(next);
  return slot >= 0 && task->needed[slot];
}

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              std::optional<bool> retain_graph, bool create_graph) {
  execute(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, nullptr,
          nullptr);
}

void observe_backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                      BackwardObserver& observer) {
  // An empty capture: no AccumulateGrad runs, so no leaf's .grad changes.
  const std::unordered_map<Node*, std::vector<std::size_t>> capture;
  std::vector<Tensor> captured;
  execute(outputs, grad_outputs, /*retain_graph=*/true, /*create_graph=*/false, &capture, &captured,
          &observer);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  std::unordered_map<Node*, std::vector<std::size_t>> capture;
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad: input ", i,
          " does not require grad");
    auto edge = gradient_edge(inputs[i]);
    keep_alive.push_back(edge);
    capture[edge.get()].push_back(i);
  }
  std::vector<Tensor> captured(inputs.size());
  execute(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, &capture,
          &captured);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check(captured[i].defined() || allow_unused, "autograd::grad: input ", i,
          " was not used in the graph (pass allow_unused=true to get an undefined gradient)");
    if (captured[i].defined() && captured[i].shape() != inputs[i].shape()) {
      std::optional<NoGradGuard> no_grad;
      if (!create_graph) no_grad.emplace();
      captured[i] = sum_to(captured[i], inputs[i].shape(), "autograd::grad");
    }
  }
  return captured;
}

std::string to_dot(const Tensor& t) {
  ember::detail::check_defined(t, "to_dot");
  std::ostringstream dot;
  dot << "digraph autograd {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n";
  dot << "  out [label=\"output " << shape_str(t.shape()) << "\", style=filled, "
      << "fillcolor=lightblue];\n";
  auto root = gradient_edge(t);
  if (root) {
    std::unordered_map<Node*, int> ids;
    std::vector<Node*> stack{root.get()};
    ids[root.get()] = 0;
    dot << "  out -> n0;\n";
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      // A custom Function names its node: the name is quoted for DOT (autograd::page::dot_quote).
      std::string label = n->name();
      if (auto* acc = n->as_accumulate_grad()) {
        label += "\nleaf " + shape_str(acc->output_shape);
      } else {
        label += "\nout " + shape_str(n->output_shape);
      }
      dot << "  n" << ids[n] << " [label=" << page::dot_quote(label) << "];\n";
      for (std::size_t i = 0; i < n->next_functions.size(); ++i) {
        Node* next = n->next_functions[i].get();
        if (!next) continue;
        auto [it, fresh] = ids.emplace(next, static_cast<int>(ids.size()));
        if (fresh) stack.push_back(next);
        dot << "  n" << ids[n] << " -> n" << it->second << " [label=\""
            << shape_str(n->input_shapes[i]) << "\"];\n";
      }
    }
  }
  dot << "}\n";
  return dot.str();
}

// A leaf's gradient: its hooks run, then the gradient is stored (the first) or added.
std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  // Backward passes of graphs sharing this leaf may run in several threads: one at a time here.
  std::lock_guard<std::mutex> lock(mutex_);
  const std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf) return {};  // the leaf is gone: nobody can read its gradient
  // A leaf that stopped requiring grad after the graph was built (requires_grad_(false), a
  // frozen parameter) gets no gradient and runs no hooks, as in PyTorch's AccumulateGrad.
  if (!leaf->requires_grad) return {};
  Tensor grad = grad_output;
  const std::vector<GradHookEntry> hooks = leaf->hooks;  // a snapshot, as in run_output_hooks
  for (const GradHookEntry& hook : hooks) {
    Tensor replaced = call_client("AccumulateGrad", "a hook registered on a leaf",
                                  [&] { return (*hook.fn)(grad); });
    if (replaced.defined()) {
      check(replaced.shape() == grad.shape(),
            "AccumulateGrad: a hook replaced a gradient of shape ", grad.shape(),
            " by one of shape ", replaced.shape());
      check(replaced.dtype() == grad.dtype(),
            "AccumulateGrad: hook has changed the type of value (was ", dtype_name(grad.dtype()),
            " got ", dtype_name(replaced.dtype()), ")");
      grad = replaced;
    }
  }
  // The gradient is taken over, not copied, where nobody else can see it (as PyTorch's
  // AccumulateGrad steals it): no graph is being built (create_graph), no other handle or view
  // shares it (the engine's handle and `grad` are the only references; a gradient an AddBackward
  // hands to two leaves is shared and copied), and it is laid out as the leaf (contiguous). A
  // copy of every parameter's gradient was 650 MB per step of GPT-124M.
  const bool steal = !GradMode::is_enabled() &&
                     grad.impl_ptr().use_count() <= (grad.is_same(grad_output) ? 2 : 1) &&
                     grad.storage().use_count() == 1 && grad.is_contiguous() &&
                     !grad.requires_grad() && Tensor(leaf).is_contiguous();
  // In the engine's grad mode: under create_graph the clone and the add are recorded, so the
  // leaf's .grad has a grad_fn (as PyTorch's x.grad after backward(create_graph=True)).
  if (!leaf->grad.defined()) {
    // The leaf owns its gradient; later adds must not alias.
    leaf->grad = steal ? grad : grad.clone();
  } else if (!GradMode::is_enabled()) {
    // In place, as PyTorch's `variable_grad += new_grad`: the .grad tensor keeps its identity,
    // so a handle to it taken earlier, or a .grad that is a view of a larger buffer (set by
    // set_grad), sees the sum.
    leaf->grad.add_(grad);
  } else {
    // Under create_graph the sum is a new tensor with a graph of its own, as in PyTorch.
    leaf->grad = add(leaf->grad, grad);
  }
  return {};
}

}  // namespace ember::autograd

namespace ember {

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  detail::check_defined(*this, "backward");
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace ember
