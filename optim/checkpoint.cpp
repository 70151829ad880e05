// Training checkpoints on top of the safetensors reader/writer.
#include "optim/checkpoint.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/base/error.h"

namespace ember::optim {

namespace {
using json = nlohmann::json;
const std::string kModel = "model.", kState = "optimizer.state.";

// JSON has no inf or nan (nlohmann would write null, and ReduceLROnPlateau's best starts at
// inf): such numbers are stored as the strings "inf", "-inf" and "nan".
json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
double number(const json& j) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf" || s == "-inf")
      return s == "inf" ? std::numeric_limits<double>::infinity()
                        : -std::numeric_limits<double>::infinity();
  }
  return j.get<double>();  // anything else that is not a number: json::type_error
}
json numbers(const std::map<std::string, std::vector<double>>& values) {
  json out = json::object();
  for (const auto& [key, list] : values) {
    json a = json::array();
    for (double v : list) a.push_back(number(v));
    out[key] = a;
  }
  return out;
}
SchedulerState numbers(const json& j) {
  check(j.is_object(), "load_checkpoint: the scheduler state is not a JSON object");
  SchedulerState out;
  for (const auto& [key, list] : j.items()) {
    check(list.is_array(), "load_checkpoint: scheduler state '", key, "' is not a list");
    auto& values = out[key];
    for (const json& v : list) values.push_back(number(v));
  }
  return out;
}
}  // namespace

void save_checkpoint(const std::string& path, const NamedTensorList& model_state,
                     const Optimizer& optimizer, const StatefulScheduler* scheduler, int64_t step,
                     const std::map<std::string, std::string>& metadata) {
  NamedTensorList tensors;
  for (const auto& [name, t] : model_state) tensors.emplace_back(kModel + name, t);
  const OptimizerStateDict state = optimizer.state_dict_shared();  // streamed, not copied
  for (const auto& [index, entries] : state.state) {
    for (const auto& [key, t] : entries) {
      tensors.emplace_back(kState + std::to_string(index) + "." + key, t);
    }
  }
  json groups = json::array();
  for (const auto& g : state.param_groups) {
    json options = json::object();
    for (const auto& [key, v] : g.options) {
      // A group's extra entries are named by the user: a name that is not UTF-8 is an Error
      // here, not the JSON writer's own exception.
      try {
        (void)json(key).dump();
      } catch (const json::exception&) {
        fail("save_checkpoint: the option name '", detail::printable(key), "' of param group ",
             groups.size(), " is not valid UTF-8");
      }
      options[key] = number(v);
    }
    groups.push_back({{"options", options}, {"params", g.params}});
  }
  std::map<std::string, std::string> meta = metadata;
  for (const auto& [key, value] : metadata) {
    check(key.rfind("ember.", 0) != 0 && key.rfind("optimizer.", 0) != 0 &&
              key.rfind("scheduler", 0) != 0,
          "save_checkpoint: metadata key '", detail::printable(key), "' is reserved");
  }
  meta["ember.step"] = std::to_string(step);
  meta["ember.optimizer"] = optimizer.name();
  meta["optimizer.param_groups"] = groups.dump();
  if (scheduler) {
    if (!scheduler->name().empty()) meta["ember.scheduler"] = scheduler->name();
    meta["scheduler"] = numbers(scheduler->state_dict()).dump();
  }
  save_safetensors(tensors, path, meta);
}

int64_t load_checkpoint(const std::string& path, NamedTensorList& model_state, Optimizer& optimizer,
                        StatefulScheduler* scheduler) {
  SafetensorsFile file = load_safetensors(path);
  try {
    return load_checkpoint(std::move(file), model_state, optimizer, scheduler);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (file '" + path + "')");
  }
}

int64_t load_checkpoint(SafetensorsFile file, NamedTensorList& model_state, Optimizer& optimizer,
                        StatefulScheduler* scheduler) {
  const char* op = "load_checkpoint";
  const std::string path = "the checkpoint";
  auto meta = [&](const std::string& key) {
    auto it = file.metadata.find(key);
    check(it != file.metadata.end(), op, ": ", path, " has no '", key,
          "' metadata (not a training checkpoint)");
    return it->second;
  };
  check(meta("ember.optimizer") == optimizer.name(), op, ": the checkpoint holds the state of a ",
        detail::printable(meta("ember.optimizer")), " optimizer, not of ", optimizer.name());
  OptimizerStateDict state;
  NamedTensorList model;
  for (auto& [name, t] : file.tensors) {
    if (name.rfind(kModel, 0) == 0) {
      model.emplace_back(name.substr(kModel.size()), t);
    } else if (name.rfind(kState, 0) == 0) {
      const std::string rest = name.substr(kState.size());
      const std::size_t dot = rest.find('.');
      check(dot != std::string::npos && dot > 0 && rest.find_first_not_of("0123456789") == dot &&
                dot < 18,
            op, ": bad optimizer state name '", name, "'");
      state.state[std::stoll(rest.substr(0, dot))][rest.substr(dot + 1)] = t;
    } else {
      fail(op, ": unexpected tensor '", name, "' in a training checkpoint");
    }
  }
  // The step: a whole decimal number, all of it ("1e5" or "12abc" are not steps).
  const std::string step_text = meta("ember.step");
  int64_t step = 0;
  const auto [end, error] =
      std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
  check(error == std::errc() && end == step_text.data() + step_text.size() && !step_text.empty(),
        op, ": the step '", detail::printable(step_text), "' in ", path, " is not a whole number");
  // The scheduler's type, where the checkpoint records it: another scheduler's numbers (a
  // StepLR's last_lr in an ExponentialLR, say) would load without complaint and give other lrs.
  if (const auto it = file.metadata.find("ember.scheduler");
      scheduler != nullptr && !scheduler->name().empty() && it != file.metadata.end()) {
    check(it->second == scheduler->name(), op, ": the checkpoint holds the state of a ",
          detail::printable(it->second), " scheduler, not of ", scheduler->name());
  }
  SchedulerState sched_state;
  try {
    const json groups = json::parse(meta("optimizer.param_groups"));
    check(groups.is_array(), op, ": optimizer.param_groups in ", path, " is not a JSON list");
    for (const json& g : groups) {
      OptimizerStateDict::Group group;
      check(g.is_object() && g.at("options").is_object() && g.at("params").is_array(), op,
            ": a parameter group in ", path, " is not {\"options\": {...}, \"params\": [...]}");
      for (const auto& [key, v] : g.at("options").items()) group.options[key] = number(v);
      for (const json& index : g.at("params")) {
        // (nlohmann would cast a float such as 1e300 to an integer: undefined behaviour.)
        check(index.is_number_integer(), op, ": a parameter index in ", path,
              " is not an integer: ", index.dump());
        group.params.push_back(index.get<int64_t>());
      }
      state.param_groups.push_back(std::move(group));
    }
    if (scheduler) {
      sched_state = numbers(json::parse(meta("scheduler")));
    }
  } catch (const json::exception& e) {
    fail(op, ": malformed optimizer or scheduler state in ", path, ": ", e.what());
  }
  // The optimizer first, then the scheduler: if the scheduler's state is refused, the optimizer
  // is put back as it was (a failed load changes nothing).
  const OptimizerStateDict before = optimizer.state_dict();
  optimizer.load_state_dict(state);
  if (scheduler) {
    try {
      scheduler->load_state_dict(sched_state);
    } catch (...) {
      optimizer.load_state_dict(before);
      throw;
    }
  }
  model_state = std::move(model);
  return step;
}

}  // namespace ember::optim
