// The thread's stack of labels and module scopes, and the contexts graph nodes keep of it.
#include "core/graph/record.h"

#include "core/graph/profiler.h"

#include <utility>

namespace ember::autograd {

namespace detail {
std::atomic<unsigned> recorders{0};
}

void set_recording(Recorder who, bool on) {
  const unsigned bit = static_cast<unsigned>(who);
  if (on) {
    detail::recorders.fetch_or(bit, std::memory_order_relaxed);
  } else {
    detail::recorders.fetch_and(~bit, std::memory_order_relaxed);
  }
}

namespace {

struct ThreadScopes {
  std::vector<Scope> scopes;
  // The context of the current scopes, made on the first capture after they changed (the
  // nodes of one module's forward share one).
  std::shared_ptr<const ForwardContext> context;
};

ThreadScopes& thread_scopes() {
  thread_local ThreadScopes state;
  return state;
}

}  // namespace

const std::vector<Scope>& current_scopes() { return thread_scopes().scopes; }

const Scope* current_module_scope() {
  const auto& scopes = thread_scopes().scopes;
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    if (it->kind == Scope::Kind::Module) return &*it;
  }
  return nullptr;
}

std::string ForwardContext::describe() const {
  std::string out;
  if (in_module) {
    out = module_path.empty() ? "the outermost module (" + module_type + ")"
                              : "module " + module_path + " (" + module_type + ")";
  }
  for (const std::string& label : labels) {
    if (!out.empty()) out += ", ";
    out += "label \"" + label + "\"";
  }
  return out;
}

std::shared_ptr<const ForwardContext> capture_forward_context() {
  ThreadScopes& state = thread_scopes();
  if (!state.context) {
    auto context = std::make_shared<ForwardContext>();
    for (const Scope& s : state.scopes) {
      if (s.kind == Scope::Kind::Label) {
        context->labels.push_back(s.name);
      } else {
        context->in_module = true;
        context->module_path = s.name;
        context->module_type = s.module_type;
      }
    }
    state.context = std::move(context);
  }
  return state.context;
}

RecordFunction::RecordFunction(const std::string& label) {
  if (is_recording()) push(label);
}

RecordFunction::RecordFunction(const char* label) {
  if (is_recording()) push(label);  // (no std::string made when no one records)
}

void RecordFunction::push(std::string label) {
  // The profiler's event first: its own label is not among those open around it.
  if (is_recording(Recorder::Profiler)) {
    event_ = std::make_unique<profiler::RecordEvent>(label, profiler::EventKind::kUser);
  }
  ThreadScopes& state = thread_scopes();
  state.scopes.push_back(Scope{Scope::Kind::Label, std::move(label), "", nullptr});
  state.context.reset();
  pushed_ = true;
}

RecordFunction::~RecordFunction() {
  if (pushed_) detail::pop_scope();
  event_.reset();  // (closed after the scope, in the reverse order they opened)
}

namespace detail {

void push_module_scope(const void* module, std::string path, std::string type) {
  ThreadScopes& state = thread_scopes();
  state.scopes.push_back(Scope{Scope::Kind::Module, std::move(path), std::move(type), module});
  state.context.reset();
}

void pop_scope() {
  ThreadScopes& state = thread_scopes();
  if (!state.scopes.empty()) state.scopes.pop_back();
  state.context.reset();
}

}  // namespace detail

}  // namespace ember::autograd
