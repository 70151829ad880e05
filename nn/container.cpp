#include "nn/container.h"

#include <string>

namespace ember::nn {

namespace {

// Python-style indexing into a list of n modules.
std::size_t list_index(int64_t i, std::size_t n, const char* container) {
  const auto size = static_cast<int64_t>(n);
  check(i >= -size && i < size, container, ": index ", i, " is out of range (size ", size, ")");
  return static_cast<std::size_t>(i < 0 ? i + size : i);
}

}  // namespace

// ---- ModuleList ----

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) push_back(module);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

std::shared_ptr<Module> ModuleList::operator[](int64_t i) const {
  return modules_[list_index(i, modules_.size(), "ModuleList")];
}

// ---- Sequential ----

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) push_back(module);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

std::shared_ptr<Module> Sequential::operator[](int64_t i) const {
  return modules_[list_index(i, modules_.size(), "Sequential")];
}

Tensor Sequential::forward(const Tensor& x) {
  ForwardScope scope(*this);
  Tensor out = x;
  // Through the call operator, which opens each submodule's ForwardScope (a module of your own
  // gets its path "1.0" in anomaly reports without opening one itself).
  for (const auto& module : modules_) out = (*module)(out);
  return out;
}

}  // namespace ember::nn
