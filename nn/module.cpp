#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "core/base/grad_mode.h"
#include "core/graph/node.h"

namespace ember::nn {

namespace {

// The class name of a module for printing: "ember::nn::Linear" -> "Linear".
std::string class_name_without_namespaces(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 ? demangled : type.name();
  std::free(demangled);
  const std::size_t template_start = name.find('<');
  const std::size_t last_scope = name.rfind("::", template_start);
  return last_scope == std::string::npos ? name : name.substr(last_scope + 2);
}

template <typename Entry>
const Entry* find_entry(const std::vector<std::pair<std::string, Entry>>& entries,
                        const std::string& name) {
  for (const auto& [key, value] : entries) {
    if (key == name) return &value;
  }
  return nullptr;
}

// The tensors of (name, tensor) pairs, in order.
std::vector<Tensor> tensors_of(const NamedTensors& named) {
  std::vector<Tensor> out;
  for (const auto& [name, tensor] : named) out.push_back(tensor);
  return out;
}

// Whether a table of registered tensors (Module::Slots) has an entry `name`.
template <typename Slots>
bool has_slot(const Slots& table, const std::string& name) {
  for (const auto& slot : table) {
    if (slot.name == name) return true;
  }
  return false;
}

bool contains(const std::vector<const void*>& seen, const void* p) {
  return std::find(seen.begin(), seen.end(), p) != seen.end();
}

}  // namespace

Tensor Parameter(const Tensor& t, bool requires_grad) {
  check(t.defined(), "Parameter: expected a defined tensor");
  Tensor leaf = t.detach();
  leaf.requires_grad_(requires_grad);
  return leaf;
}

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

namespace {
// The submodules waiting to be destroyed by the outermost ~Module running on this thread (null
// when none runs).
thread_local std::vector<std::shared_ptr<Module>>* pending_teardown = nullptr;
}  // namespace

Module::~Module() {
  // The derived class's members are gone by now, so a submodule whose only owner is this
  // module has a use count of 1. Those are handed to the outermost ~Module on this thread,
  // which destroys them one after another; their own submodules join the same list. A nested
  // module is thus freed at the depth of one destructor call, however deep the nesting.
  std::vector<std::shared_ptr<Module>> pending;
  std::vector<std::shared_ptr<Module>>& list = pending_teardown ? *pending_teardown : pending;
  for (auto& [name, child] : submodules_) {
    if (child && child.use_count() == 1) list.push_back(std::move(child));
  }
  if (pending_teardown) return;
  pending_teardown = &pending;
  while (!pending.empty()) {
    std::shared_ptr<Module> module = std::move(pending.back());
    pending.pop_back();
    module.reset();  // may append its own submodules to `pending`
  }
  pending_teardown = nullptr;
}

Tensor Module::forward(const Tensor& /*x*/) {
  fail("Module [", type_name(), "] is missing the required \"forward\" function");
}

Tensor Module::operator()(const Tensor& x) { return call(*this, x); }

// ---- the call point of anomaly mode and the profiler ----

std::string Module::path_to(const Module* module) const {
  // Depth first, in registration order, as named_modules() lists them; a direct child is found
  // at the first level. (Only run while someone records.)
  std::vector<std::pair<const Module*, std::string>> stack{{this, ""}};
  std::vector<const void*> seen;
  while (!stack.empty()) {
    auto [m, prefix] = stack.back();
    stack.pop_back();
    if (contains(seen, m)) continue;
    seen.push_back(m);
    for (auto it = m->submodules_.rbegin(); it != m->submodules_.rend(); ++it) {
      const std::string path = prefix.empty() ? it->first : prefix + "." + it->first;
      if (it->second.get() == module) return path;
    }
    for (auto it = m->submodules_.rbegin(); it != m->submodules_.rend(); ++it) {
      if (it->second) {
        stack.emplace_back(it->second.get(), prefix.empty() ? it->first : prefix + "." + it->first);
      }
    }
  }
  return "";
}

void ForwardScope::enter(const Module& module) {
  const autograd::Scope* parent = autograd::current_module_scope();
  if (parent && parent->module == &module)
    return;  // already the innermost (operator() then forward)
  std::string path;
  if (parent) {
    const std::string below = static_cast<const Module*>(parent->module)->path_to(&module);
    if (!below.empty()) {
      path = parent->name.empty() ? below : parent->name + "." + below;
    } else {
      // Not registered below the module running: named by its class, after the parent's path.
      path = parent->name.empty() ? module.type_name() : parent->name + "." + module.type_name();
    }
  }
  autograd::detail::push_module_scope(&module, std::move(path), module.type_name());
  pushed_ = true;
  if (autograd::profiler::is_recording()) {
    event_.emplace("nn.Module: " + module.type_name(), autograd::profiler::EventKind::kModule);
  }
}

// ---- registration ----

void Module::check_new_name(const std::string& name, const char* what) const {
  check(!name.empty(), "register_", what, ": ", what, " name can't be empty string \"\"");
  check(name.find('.') == std::string::npos, "register_", what, ": ", what,
        " name can't contain \".\", got \"", name, "\"");
  const bool taken =
      has_slot(parameters_, name) || has_slot(buffers_, name) || find_entry(submodules_, name);
  check(!taken, "register_", what, ": attribute '", name, "' already exists in ", type_name());
}

namespace {

// A parameter must be a leaf (or undefined: a reserved name); it gets requires_grad.
void prepare_parameter(Tensor& tensor, const std::string& name, bool requires_grad,
                       const char* op) {
  if (!tensor.defined()) return;
  if (!tensor.is_leaf()) {
    fail(op, ": cannot register a non-leaf tensor as parameter '", name, "' (it was computed by ",
         tensor.grad_fn()->name(), "); register nn::Parameter(t) or t.detach() instead");
  }
  tensor.requires_grad_(requires_grad);
}

}  // namespace

Tensor Module::add_tensor(Slots& table, const std::string& name, Tensor* slot, bool requires_grad,
                          const char* what) {
  check_new_name(name, what);
  check(slot != nullptr, "register_", what, ": '", name, "' is a null pointer");
  if (&table == &parameters_) prepare_parameter(*slot, name, requires_grad, "register_parameter");
  table.push_back({name, slot, requires_grad});
  return *slot;
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  return add_tensor(parameters_, name, &owned_tensors_.emplace_back(std::move(tensor)),
                    requires_grad, "parameter");
}

Tensor Module::register_parameter(const std::string& name, Tensor* member, bool requires_grad) {
  return add_tensor(parameters_, name, member, requires_grad, "parameter");
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "buffer");
  Tensor out =
      add_tensor(buffers_, name, &owned_tensors_.emplace_back(std::move(tensor)), false, "buffer");
  if (!persistent) non_persistent_buffers_.push_back(name);
  return out;
}

Tensor Module::register_buffer(const std::string& name, Tensor* member, bool persistent) {
  Tensor out = add_tensor(buffers_, name, member, false, "buffer");
  if (!persistent) non_persistent_buffers_.push_back(name);
  return out;
}

Module::Slot& Module::find_slot(Slots& table, const std::string& name, const char* what) {
  for (Slot& slot : table) {
    if (slot.name == name) return slot;
  }
  fail("set_", what, ": ", type_name(), " has no ", what, " named '", name, "'");
}

void Module::set_parameter(const std::string& name, const Tensor& tensor) {
  Slot& slot = find_slot(parameters_, name, "parameter");
  Tensor value = tensor;
  prepare_parameter(value, name, slot.requires_grad, "set_parameter");
  *slot.tensor = value;
}

void Module::set_buffer(const std::string& name, const Tensor& tensor) {
  *find_slot(buffers_, name, "buffer").tensor = tensor;
}

bool Module::is_ancestor_of(const Module* module) const {
  std::unordered_set<const Module*> seen;
  bool found = false;
  visit_modules("", seen, [&](const std::string&, const Module& m) { found |= &m == module; });
  return found;
}

void Module::check_acyclic(const std::string& name, const Module* module, const char* op) const {
  check(module != nullptr, op, ": module '", name, "' is null");
  check(module != this, op, ": a module cannot be its own submodule ('", name, "')");
  check(!module->is_ancestor_of(this), op, ": registering '", name, "' (a ", module->type_name(),
        ") in ", type_name(),
        " would make a cycle: that module already holds this one as a submodule");
}

void Module::add_submodule(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  check_acyclic(name, module.get(), "register_module");
  submodules_.emplace_back(name, std::move(module));
}

void Module::swap_submodule(const std::string& name, std::shared_ptr<Module> module) {
  auto it = std::find_if(submodules_.begin(), submodules_.end(),
                         [&](const auto& entry) { return entry.first == name; });
  check(it != submodules_.end(), "replace_module: ", type_name(), " has no submodule '", name, "'");
  check_acyclic(name, module.get(), "replace_module");
  it->second = std::move(module);
}

// ---- traversal ----

template <typename Visit>
void Module::visit_modules(const std::string& prefix, std::unordered_set<const Module*>& seen,
                           Visit&& visit) const {
  // A stack of modules still to visit, each with its dotted path; children are pushed in
  // reverse so that they come off in registration order.
  std::vector<std::pair<const Module*, std::string>> stack{{this, prefix}};
  while (!stack.empty()) {
    auto [module, path] = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(module).second) continue;
    visit(path, *module);
    for (auto it = module->submodules_.rbegin(); it != module->submodules_.rend(); ++it) {
      stack.emplace_back(it->second.get(), path.empty() ? it->first : path + "." + it->first);
    }
  }
}

// The entries of `table` (parameters_ or buffers_) of this module, or of every module below it
// too, each tensor once, under its dotted name; undefined entries are skipped.
NamedTensors Module::named_tensors(Slots Module::*table, bool recurse) const {
  NamedTensors out;
  std::unordered_set<const void*> seen_tensors;
  auto collect = [&](const std::string& prefix, const Module& module) {
    for (const Slot& slot : module.*table) {
      const Tensor& tensor = *slot.tensor;
      if (!tensor.defined() || !seen_tensors.insert(tensor.impl()).second) continue;
      out.insert(prefix.empty() ? slot.name : prefix + "." + slot.name, tensor);
    }
  };
  if (!recurse) {
    collect("", *this);
    return out;
  }
  std::unordered_set<const Module*> seen_modules;
  visit_modules("", seen_modules, collect);
  return out;
}

NamedTensors Module::named_parameters(bool recurse) const {
  return named_tensors(&Module::parameters_, recurse);
}

NamedTensors Module::named_buffers(bool recurse) const {
  return named_tensors(&Module::buffers_, recurse);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return tensors_of(named_parameters(recurse));
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  return tensors_of(named_buffers(recurse));
}

NamedModules Module::named_children() const {
  NamedModules out;
  std::vector<const void*> seen;
  for (const auto& [name, child] : submodules_) {
    if (contains(seen, child.get())) continue;
    seen.push_back(child.get());
    out.insert(name, child);
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, child] : named_children()) out.push_back(child);
  return out;
}

NamedModules Module::named_modules() {
  // This module's own pointer: shared if it is owned by a shared_ptr, otherwise (a module on
  // the stack) a non-owning one.
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  NamedModules out = {{"", self}};
  std::unordered_set<const Module*> seen = {this};
  for (const auto& [name, child] : submodules_) {
    child->visit_modules(name, seen, [&](const std::string& prefix, const Module& module) {
      // Every module below this one is held by its parent's shared_ptr.
      out.insert(prefix, std::const_pointer_cast<Module>(module.shared_from_this()));
    });
  }
  return out;
}

// ---- modes and gradients ----

Module& Module::train(bool on) {
  std::unordered_set<const Module*> seen;
  visit_modules("", seen, [&](const std::string&, const Module& module) {
    const_cast<Module&>(module).training_ = on;
  });
  return *this;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

namespace {

// PyTorch's `t.data = data`: the tensor object t (every handle to it) now holds data's values.
void replace_data(const Tensor& t, const Tensor& data) {
  TensorImpl* impl = t.impl();
  impl->storage = data.storage();
  impl->shape = data.shape();
  impl->strides = data.strides();
  impl->offset = data.offset();
  impl->dtype = data.dtype();
}

}  // namespace

Module& Module::to(DType dtype) {
  check(is_floating(dtype), "Module::to: only floating point dtypes are supported, got ",
        dtype_name(dtype));
  NoGradGuard no_grad;
  std::vector<Tensor> tensors = parameters();
  for (const Tensor& b : buffers()) tensors.push_back(b);
  for (Tensor& t : tensors) {
    if (!is_floating(t.dtype())) continue;
    replace_data(t, t.to(dtype));
    if (t.grad().defined()) t.set_grad(t.grad().to(dtype));
  }
  return *this;
}

// ---- state dict ----

void Module::append_state(const std::string& prefix, StateDict& out) const {
  // Pre-order, every occurrence of a shared module under each of its names (as PyTorch's
  // state_dict); iterative, as visit_modules.
  std::vector<std::pair<const Module*, std::string>> stack{{this, prefix}};
  while (!stack.empty()) {
    auto [module, path] = std::move(stack.back());
    stack.pop_back();
    for (const Slot& slot : module->parameters_) {
      if (slot.tensor->defined()) out.insert(path + slot.name, slot.tensor->detach());
    }
    for (const Slot& slot : module->buffers_) {
      const auto& non_persistent = module->non_persistent_buffers_;
      const bool persistent = std::find(non_persistent.begin(), non_persistent.end(), slot.name) ==
                              non_persistent.end();
      if (slot.tensor->defined() && persistent) {
        out.insert(path + slot.name, slot.tensor->detach());
      }
    }
    for (auto it = module->submodules_.rbegin(); it != module->submodules_.rend(); ++it) {
      stack.emplace_back(it->second.get(), path + it->first + ".");
    }
  }
}

StateDict Module::state_dict() const {
  StateDict out;
  append_state("", out);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  LoadResult result;
  std::vector<std::string> size_mismatches;
  for (const auto& [key, target] : own) {
    const Tensor* source = state.find(key);
    if (!source) {
      result.missing_keys.push_back(key);
    } else if (!source->defined()) {
      fail("load_state_dict: expected a defined tensor for \"", key, "\", got an undefined one");
    } else if (source->shape() != target.shape()) {
      size_mismatches.push_back("size mismatch for " + key + ": copying a param with shape " +
                                shape_str(source->shape()) +
                                " from checkpoint, the shape in current model is " +
                                shape_str(target.shape()) + ".");
    }
  }
  for (const auto& [key, source] : state) {
    if (!own.contains(key)) result.unexpected_keys.push_back(key);
  }

  // PyTorch's message: missing keys, then unexpected keys (both only when strict), then sizes.
  auto quoted_list = [](const std::vector<std::string>& keys) {
    std::string text;
    for (const std::string& key : keys) text += (text.empty() ? "\"" : ", \"") + key + "\"";
    return text;
  };
  std::vector<std::string> errors;
  if (strict && !result.missing_keys.empty()) {
    errors.push_back("Missing key(s) in state_dict: " + quoted_list(result.missing_keys) + ". ");
  }
  if (strict && !result.unexpected_keys.empty()) {
    errors.push_back("Unexpected key(s) in state_dict: " + quoted_list(result.unexpected_keys) +
                     ". ");
  }
  errors.insert(errors.end(), size_mismatches.begin(), size_mismatches.end());
  if (!errors.empty()) {
    std::string message = "Error(s) in loading state_dict for " + type_name() + ":";
    for (const std::string& error : errors) message += "\n\t" + error;
    throw Error(message);
  }

  // A copy that fails (a source overlapping its destination in part, a destination whose
  // elements share memory) is reported under its key, after the other keys are copied, as
  // PyTorch's "While copying the parameter named ..." error.
  NoGradGuard no_grad;
  std::vector<std::string> copy_errors;
  for (const auto& [key, target] : own) {
    if (const Tensor* source = state.find(key)) {
      Tensor destination = target;
      try {
        destination.copy_(*source);
      } catch (const Error& e) {
        copy_errors.push_back("While copying the parameter named \"" + key +
                              "\", whose dimensions in the model are " + shape_str(target.shape()) +
                              " and whose dimensions in the checkpoint are " +
                              shape_str(source->shape()) + ", an exception occurred : ('" +
                              e.what() + "',).");
      }
    }
  }
  if (!copy_errors.empty()) {
    std::string message = "Error(s) in loading state_dict for " + type_name() + ":";
    for (const std::string& error : copy_errors) message += "\n\t" + error;
    throw Error(message);
  }
  return result;
}

// ---- printing ----

std::string Module::type_name() const {
  return type_name_.empty() ? class_name_without_namespaces(typeid(*this)) : type_name_;
}

// PyTorch's Module.__repr__: "Name(extra)" on one line when there is one line of extra_repr and
// no submodules; otherwise the extra_repr lines and "(name): <submodule repr>" lines, each on a
// line of its own indented by two spaces. Written depth first with an explicit stack (a module
// nested 10,000 deep prints without a frame per level): a module whose text starts at
// indentation k writes its own lines at k + 2 and its closing parenthesis at k.
std::string Module::to_string() const {
  struct Open {
    const Module* module;
    std::size_t indent;
    std::size_t next_child;
  };
  std::string text;
  std::vector<Open> stack;
  auto new_line = [&](std::size_t indent) {
    text.push_back('\n');
    text.append(indent, ' ');
  };
  // Writes the module's name and extra_repr; a module with submodules stays open on the stack.
  auto begin = [&](const Module* module, std::size_t indent) {
    std::vector<std::string> extra;
    std::istringstream in(module->extra_repr());
    for (std::string line; std::getline(in, line);) extra.push_back(line);
    text.append(module->type_name());
    text.push_back('(');
    if (module->submodules_.empty() && extra.size() == 1) {
      text.append(extra[0]);
      text.push_back(')');
      return;
    }
    for (const std::string& line : extra) {
      new_line(indent + 2);
      text.append(line);
    }
    if (!module->submodules_.empty()) {
      stack.push_back({module, indent, 0});
      return;
    }
    if (!extra.empty()) new_line(indent);
    text.push_back(')');
  };
  begin(this, 0);
  while (!stack.empty()) {
    Open& open = stack.back();
    if (open.next_child == open.module->submodules_.size()) {
      new_line(open.indent);
      text.push_back(')');
      stack.pop_back();
      continue;
    }
    const auto& [name, child] = open.module->submodules_[open.next_child++];
    const std::size_t indent = open.indent + 2;
    new_line(indent);
    text.push_back('(');
    text.append(name);
    text.append("): ");
    begin(child.get(), indent);  // may grow the stack: `open` is not used after this
  }
  return text;
}

std::ostream& operator<<(std::ostream& os, const Module& module) {
  return os << module.to_string();
}

}  // namespace ember::nn
