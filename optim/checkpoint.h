// A training checkpoint in one safetensors file: the model's state dict, the optimizer's state
// and options, the scheduler's state and the step, so that training resumes exactly where it
// stopped (bit for bit):
//
//   optim::save_checkpoint("ckpt.safetensors", model->state_dict(), opt, &sched, step);
//   int64_t step = optim::load_checkpoint("ckpt.safetensors", model_state, opt, &sched);
//   model->load_state_dict(model_state);
//
// Layout: tensors "model.<name>" and "optimizer.state.<param index>.<key>"; metadata
// "ember.step", "ember.optimizer" and "ember.scheduler" (the classes' names: a load into another
// optimizer or scheduler is an Error), "optimizer.param_groups" and "scheduler" (JSON text).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/io/safetensors.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace ember::optim {

// scheduler may be null, an LRScheduler or a ReduceLROnPlateau. `metadata` is stored alongside
// (keys must not start with "ember.", "optimizer." or "scheduler").
void save_checkpoint(const std::string& path, const NamedTensorList& model_state,
                     const Optimizer& optimizer, const StatefulScheduler* scheduler, int64_t step,
                     const std::map<std::string, std::string>& metadata = {});

// Restores the optimizer (and scheduler, if given) and returns the step; model_state receives
// the model's tensors (load them with Module::load_state_dict).
// A load that throws changes neither the optimizer, the scheduler nor model_state.
int64_t load_checkpoint(const std::string& path, NamedTensorList& model_state, Optimizer& optimizer,
                        StatefulScheduler* scheduler = nullptr);
// The same from a file already read (parse_safetensors of the bytes, e.g. in a fuzzer).
int64_t load_checkpoint(SafetensorsFile file, NamedTensorList& model_state, Optimizer& optimizer,
                        StatefulScheduler* scheduler = nullptr);

}  // namespace ember::optim
