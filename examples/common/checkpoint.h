// The training programs' checkpoint (train_gpt, train_chars): one safetensors file with what
// optim::save_checkpoint keeps (the model's state dict, the optimizer's state, the learning-rate
// schedule's and the step) and, beside the model's tensors, the program's own: tensors named
// "<program>.<what>" that hold its counters, its loss history or the global generator's state,
// so that --resume continues where the run stopped and prints what an uninterrupted run prints.
// The run's settings (the flags that change what it computes, and its text) are in the metadata,
// "<program>.settings": a resume with other settings is refused, not continued as another run.
// Not part of the library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/base/generator.h"
#include "core/io/safetensors.h"
#include "core/tensor/tensor.h"
#include "nn/module.h"
#include "optim/checkpoint.h"

namespace ember::examples {

// A run's settings that a resume must share, flag by flag: {"--lr", "0.0004"}, {"text", ...}
// (text_fingerprint). Values hold no newline.
using RunSettings = std::vector<std::pair<std::string, std::string>>;

// A text for RunSettings: its size and its 64-bit FNV-1a hash, "20479 bytes, fnv1a 9f0c...": the
// same text under another name resumes, another text does not.
inline std::string text_fingerprint(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::to_string(text.size()) + " bytes, fnv1a " + hex;
}

// The metadata key of a program's settings: "train_gpt.settings".
inline std::string settings_key(const std::string& program) { return program + ".settings"; }

// Writes `path`: the model's state dict followed by `own` (the program's tensors), the optimizer,
// the scheduler (may be null), the step and the run's settings (metadata "<program>.settings",
// one "flag value" a line).
inline void save_checkpoint(const std::string& path, const nn::Module& model,
                            const optim::Optimizer& optimizer,
                            const optim::StatefulScheduler* scheduler, int64_t step,
                            const std::string& program, const RunSettings& settings,
                            const NamedTensorList& own = {}) {
  NamedTensorList state;
  for (const auto& [name, t] : model.state_dict()) state.emplace_back(name, t);
  state.insert(state.end(), own.begin(), own.end());
  std::string lines;
  for (const auto& [flag, value] : settings) lines += flag + " " + value + "\n";
  optim::save_checkpoint(path, state, optimizer, scheduler, step, {{settings_key(program), lines}});
}

// --resume: the settings the checkpoint at `path` records (its metadata) must be `settings`, flag
// by flag; an ember::Error names each flag that differs with both values, or says that the file
// records none (not a checkpoint of `program`, or one from before it recorded them).
inline void check_settings(const std::map<std::string, std::string>& metadata,
                           const std::string& program, const RunSettings& settings,
                           const std::string& path) {
  const std::string key = settings_key(program);
  const auto it = metadata.find(key);
  check(it != metadata.end(), "--resume: '", path, "' records no settings of a ", program,
        " run (no '", key, "' metadata): not a checkpoint of ", program,
        ", or one written before it recorded them");
  std::map<std::string, std::string> saved;
  std::istringstream in(it->second);
  for (std::string line; std::getline(in, line);) {
    const std::size_t space = line.find(' ');
    check(space != std::string::npos && space > 0, "--resume: '", path, "': malformed '", key,
          "' line '", line, "', expected 'flag value'");
    saved[line.substr(0, space)] = line.substr(space + 1);
  }
  std::string differences;
  for (const auto& [flag, value] : settings) {
    const auto found = saved.find(flag);
    const std::string was = found == saved.end() ? "(not recorded)" : found->second;
    if (was != value) {
      differences +=
          (differences.empty() ? "" : ", ") + flag + " " + was + " (this run: " + value + ")";
    }
    if (found != saved.end()) saved.erase(found);
  }
  for (const auto& [flag, value] : saved) {
    differences +=
        (differences.empty() ? "" : ", ") + flag + " " + value + " (unknown to " + program + ")";
  }
  check(differences.empty(), "--resume: '", path,
        "' continues a run with other settings: ", differences,
        "; a resume needs the settings of the run it continues");
}

// --resume: every number of a checkpoint is finite (NaN or an infinity in a weight, a moment of
// AdamW or a loss would train NaNs for the rest of the run), and AdamW's second moments
// ("exp_avg_sq", "max_exp_avg_sq") are not negative (their square root is taken); an ember::Error
// names the tensor and the value otherwise.
inline void check_numbers(const SafetensorsFile& file, const std::string& path) {
  for (const auto& [name, t] : file.tensors) {
    if (!is_floating(t.dtype())) continue;
    const bool second_moment = name.ends_with("exp_avg_sq");  // and max_exp_avg_sq
    auto scan = [&](const auto* v, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(v[i]);
        if (!std::isfinite(x)) {
          fail("--resume: '", path, "': '", name, "' holds ", x, " (element ", i,
               "): a run that diverged, or a damaged file");
        }
        if (second_moment && x < 0) {
          fail("--resume: '", path, "': '", name, "' holds ", x, " (element ", i,
               "), expected a second moment >= 0");
        }
      }
    };
    const Tensor values = t.contiguous();
    if (values.dtype() == DType::Float32) {
      scan(values.data_ptr<float>(), values.numel());
    } else {
      scan(values.data_ptr<double>(), values.numel());
    }
  }
}

// What load_checkpoint gives back beside the model and optimizer it restores.
struct Checkpoint {
  std::string path;
  int64_t step = 0;                   // the optimizer steps taken
  std::map<std::string, Tensor> own;  // the program's tensors, by name

  // The program's tensor `name`, which the checkpoint must hold, of `dtype` and of `rank`
  // dimensions; an ember::Error naming it otherwise.
  const Tensor& need(const std::string& name, DType dtype, int64_t rank) const {
    const auto it = own.find(name);
    check(it != own.end(), "--resume: '", path, "' has no tensor '", name, "'");
    check(it->second.dtype() == dtype && it->second.dim() == rank, "--resume: '", path, "': '",
          name, "' is ", dtype_name(it->second.dtype()), " of shape ", it->second.shape(),
          ", expected ", dtype_name(dtype), " of ", rank, " dimension(s)");
    return it->second;
  }
  // The program's tensors must all be among `known`: an ember::Error names one that is not.
  void check_known(const std::vector<std::string>& known) const {
    for (const auto& [name, t] : own) {
      check(std::find(known.begin(), known.end(), name) != known.end(), "--resume: '", path,
            "' has a tensor '", name, "' this program does not write");
    }
  }
};

// Reads what save_checkpoint wrote, once its settings are `settings` (check_settings) and its
// numbers finite (check_numbers): restores the optimizer, the scheduler (may be null) and the
// model; the tensors whose names start with "<program>." are the program's and are returned, not
// loaded into the model. The model's buffers must be those it computes, the optimizer's options
// (and a scheduler's base rates) those the program gave it, and the optimizer's state must have
// counted the checkpoint's step for every parameter (none before the first step).
inline Checkpoint load_checkpoint(const std::string& path, nn::Module& model,
                                  optim::Optimizer& optimizer, optim::StatefulScheduler* scheduler,
                                  const std::string& program, const RunSettings& settings) {
  SafetensorsFile file = load_safetensors(path);
  check_settings(file.metadata, program, settings, path);
  check_numbers(file, path);
  // Each tensor of the model and of the optimizer's state has the dtype the program writes: its
  // own tensor's, its parameter's ("step" aside, a float the optimizer checks).
  std::map<std::string, DType> dtypes;
  for (const auto& [name, t] : model.state_dict()) dtypes["model." + name] = t.dtype();
  const std::vector<Tensor> parameters = model.parameters();
  for (const auto& [name, t] : file.tensors) {
    DType expected_dtype = t.dtype();
    if (const auto it = dtypes.find(name); it != dtypes.end()) expected_dtype = it->second;
    const std::string state = "optimizer.state.";
    if (name.rfind(state, 0) == 0 && !name.ends_with(".step")) {
      const std::size_t index = std::strtoull(name.c_str() + state.size(), nullptr, 10);
      if (index < parameters.size()) expected_dtype = parameters[index].dtype();
    }
    check(t.dtype() == expected_dtype, "--resume: '", path, "': '", name, "' is ",
          dtype_name(t.dtype()), ", expected ", dtype_name(expected_dtype));
  }
  // The options the program gave its optimizer (from its flags), group by group, and its
  // learning rates (a scheduler's base_lrs).
  auto options_of = [&optimizer] {
    std::vector<std::map<std::string, double>> options;
    for (const optim::ParamGroup& g : optimizer.param_groups()) {
      options.push_back(g.options ? g.options->to_map() : optimizer.defaults().to_map());
    }
    return options;
  };
  const std::vector<std::map<std::string, double>> expected = options_of();
  const auto base_lrs = [scheduler] {
    const optim::SchedulerState state = scheduler->state_dict();
    const auto it = state.find("base_lrs");
    return it == state.end() ? std::vector<double>() : it->second;
  };
  const std::vector<double> expected_base_lrs = scheduler ? base_lrs() : std::vector<double>();
  NamedTensorList state;
  Checkpoint c;
  c.path = path;
  try {
    c.step = optim::load_checkpoint(std::move(file), state, optimizer, scheduler);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (file '" + path + "')");
  }
  const std::string own_prefix = program + ".";
  NamedTensorList model_state;
  for (auto& [name, t] : state) {
    if (name.rfind(own_prefix, 0) == 0) {
      c.own.emplace(name, t);
    } else {
      model_state.emplace_back(name, t);
    }
  }
  // The model's buffers (GPTModel's causal masks) follow from its settings: the checkpoint's
  // must be the ones the model computed.
  std::vector<std::pair<std::string, Tensor>> computed;
  for (const auto& [name, b] : model.named_buffers()) computed.emplace_back(name, b.clone());
  model.load_state_dict(model_state);
  const nn::NamedTensors loaded = model.named_buffers();
  for (const auto& [name, b] : computed) {
    check(equal(loaded[name], b), "--resume: '", path, "': the buffer '", name,
          "' is not the one the model computes from its settings");
  }
  // The optimizer's options are the settings' (its lr, under a scheduler, the schedule's: the
  // scheduler's base rates are the settings').
  const std::vector<std::map<std::string, double>> loaded_options = options_of();
  for (std::size_t g = 0; g < expected.size(); ++g) {
    for (const auto& [key, value] : expected[g]) {
      if (key == "lr" && scheduler) continue;
      const double got = loaded_options[g].at(key);
      check(got == value, "--resume: '", path, "': the checkpoint's optimizer has ", key, " ", got,
            ", this run's ", value);
    }
  }
  check(!scheduler || base_lrs() == expected_base_lrs, "--resume: '", path,
        "': the learning-rate schedule's base rates are not this run's --lr");
  check(c.step >= 0, "--resume: '", path, "': the step ", c.step, " is negative");
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const optim::ParamState& p = optimizer.state(parameters[i]);
    const auto step = p.find("step");
    const double counted = step == p.end() ? 0.0 : step->second.item();
    check(counted == static_cast<double>(c.step), "--resume: '", path,
          "': the optimizer's state of parameter ", i, " counts ", counted,
          " steps, the checkpoint's step is ", c.step);
  }
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
