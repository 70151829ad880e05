#include "core/graph/pass.h"

#include <algorithm>
#include <atomic>
#include <iterator>

namespace ember::autograd {

namespace {

thread_local uint64_t current_pass = 0;
std::atomic<uint64_t> passes_started{0};

// The passes running in any thread, for PassDeliveries to drop what ended passes left.
std::mutex running_mutex;
std::vector<uint64_t> running_passes;

bool pass_is_running(uint64_t pass) {
  std::lock_guard<std::mutex> lock(running_mutex);
  return std::find(running_passes.begin(), running_passes.end(), pass) != running_passes.end();
}

}  // namespace

uint64_t current_pass_id() { return current_pass; }

PassScope::PassScope() : outer_(std::exchange(current_pass, passes_started.fetch_add(1) + 1)) {
  std::lock_guard<std::mutex> lock(running_mutex);
  running_passes.push_back(current_pass);
}

PassScope::~PassScope() {
  {
    std::lock_guard<std::mutex> lock(running_mutex);
    running_passes.erase(std::find(running_passes.begin(), running_passes.end(), current_pass));
  }
  current_pass = outer_;
}

void PassDeliveries::deliver(std::size_t index, const Tensor& grad) {
  const uint64_t pass = current_pass;
  std::lock_guard<std::mutex> lock(mutex_);
  // What passes that have ended left (aborted before this node ran) goes first.
  std::erase_if(passes_, [&](const auto& entry) {
    return entry.first != pass && !pass_is_running(entry.first);
  });
  auto it = std::find_if(passes_.begin(), passes_.end(),
                         [&](const auto& entry) { return entry.first == pass; });
  if (it == passes_.end()) {
    passes_.emplace_back(pass, std::vector<Tensor>(outputs_));
    it = std::prev(passes_.end());
  }
  it->second[index] = grad;
}

std::vector<Tensor> PassDeliveries::take() {
  const uint64_t pass = current_pass;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Tensor> grads(outputs_);
  auto it = std::find_if(passes_.begin(), passes_.end(),
                         [&](const auto& entry) { return entry.first == pass; });
  if (it != passes_.end()) {
    grads = std::move(it->second);
    passes_.erase(it);
  }
  return grads;
}

std::vector<Tensor> OutputNode::apply(const Tensor& grad_output) {
  deliveries_->deliver(index_, grad_output);
  return {zeros({}, input_dtypes[0])};
}

}  // namespace ember::autograd
