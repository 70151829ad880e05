// The training programs' checkpoint (train_gpt, train_chars): one safetensors file with what
// optim::save_checkpoint keeps (the model's state dict, the optimizer's state, the learning-rate
// schedule's and the step) and, beside the model's tensors, the program's own: tensors named
// "<program>.<what>" that hold its counters, its loss history or the global generator's state,
// so that --resume continues where the run stopped and prints what an uninterrupted run prints.
// Not part of the library.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base/generator.h"
#include "core/io/safetensors.h"
#include "core/tensor/tensor.h"
#include "nn/module.h"
#include "optim/checkpoint.h"

namespace ember::examples {

// Writes `path`: the model's state dict followed by `own` (the program's tensors), the optimizer,
// the scheduler (may be null) and the step.
inline void save_checkpoint(const std::string& path, const nn::Module& model,
                            const optim::Optimizer& optimizer,
                            const optim::StatefulScheduler* scheduler, int64_t step,
                            const NamedTensorList& own = {}) {
  NamedTensorList state;
  for (const auto& [name, t] : model.state_dict()) state.emplace_back(name, t);
  state.insert(state.end(), own.begin(), own.end());
  optim::save_checkpoint(path, state, optimizer, scheduler, step);
}

// What load_checkpoint gives back beside the model and optimizer it restores.
struct Checkpoint {
  int64_t step = 0;
  std::map<std::string, Tensor> own;  // the program's tensors, by name
};

// Reads what save_checkpoint wrote: restores the optimizer, the scheduler (may be null) and the
// model; the tensors whose names start with `own_prefix` ("train_gpt.") are the program's and
// are returned, not loaded into the model.
inline Checkpoint load_checkpoint(const std::string& path, nn::Module& model,
                                  optim::Optimizer& optimizer, optim::StatefulScheduler* scheduler,
                                  const std::string& own_prefix = "") {
  NamedTensorList state;
  Checkpoint c;
  c.step = optim::load_checkpoint(path, state, optimizer, scheduler);
  NamedTensorList model_state;
  for (auto& [name, t] : state) {
    if (!own_prefix.empty() && name.rfind(own_prefix, 0) == 0) {
      c.own.emplace(name, t);
    } else {
      model_state.emplace_back(name, t);
    }
  }
  model.load_state_dict(model_state);
  return c;
}

// The global generator's state as an int64 tensor, and back: a resumed run draws what the
// uninterrupted one would have drawn.
inline Tensor generator_state() {
  const std::vector<int64_t> state = default_generator().get_state();
  return from_vector(state, {static_cast<int64_t>(state.size())});
}
inline void set_generator_state(const Tensor& state) {
  default_generator().set_state(state.contiguous().to_vector<int64_t>());
}

// Lists of the same length as one float64 tensor [length, number of lists] (row i holds each
// list's i-th value), and back (the rows appended to the lists).
inline Tensor lists_tensor(const std::vector<const std::vector<double>*>& lists) {
  const std::size_t length = lists.empty() ? 0 : lists.front()->size();
  std::vector<double> rows;
  for (std::size_t i = 0; i < length; ++i) {
    for (const std::vector<double>* list : lists) rows.push_back(list->at(i));
  }
  return from_vector(rows, {static_cast<int64_t>(length), static_cast<int64_t>(lists.size())},
                     DType::Float64);
}
inline void append_lists(const Tensor& t, const std::vector<std::vector<double>*>& lists) {
  const std::vector<double> rows = t.contiguous().to_vector<double>();
  const std::size_t k = lists.size();
  if (k == 0) return;
  for (std::size_t i = 0; i + k <= rows.size(); i += k) {
    for (std::size_t j = 0; j < k; ++j) lists[j]->push_back(rows[i + j]);
  }
}

}  // namespace ember::examples
