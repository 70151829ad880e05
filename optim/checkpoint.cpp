// Training checkpoints on top of the safetensors reader/writer.
#include "optim/checkpoint.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ember::optim {

namespace {
using json = nlohmann::json;
const std::string kModel = "model.", kState = "optimizer.state.";
}  // namespace

void save_checkpoint(const std::string& path, const NamedTensorList& model_state,
                     const Optimizer& optimizer, const LRScheduler* scheduler, int64_t step,
                     const std::map<std::string, std::string>& metadata) {
  NamedTensorList tensors;
  for (const auto& [name, t] : model_state) tensors.emplace_back(kModel + name, t);
  const OptimizerStateDict state = optimizer.state_dict();
  for (const auto& [index, entries] : state.state) {
    for (const auto& [key, t] : entries) {
      tensors.emplace_back(kState + std::to_string(index) + "." + key, t);
    }
  }
  json groups = json::array();
  for (const auto& g : state.param_groups)
    groups.push_back({{"options", g.options}, {"params", g.params}});
  std::map<std::string, std::string> meta = metadata;
  for (const auto& [key, value] : metadata) {
    check(key.rfind("ember.", 0) != 0 && key.rfind("optimizer.", 0) != 0 &&
              key.rfind("scheduler", 0) != 0,
          "save_checkpoint: metadata key '", key, "' is reserved");
  }
  meta["ember.step"] = std::to_string(step);
  meta["ember.optimizer"] = optimizer.name();
  meta["optimizer.param_groups"] = groups.dump();
  if (scheduler) meta["scheduler"] = json(scheduler->state_dict()).dump();
  save_safetensors(tensors, path, meta);
}

int64_t load_checkpoint(const std::string& path, NamedTensorList& model_state, Optimizer& optimizer,
                        LRScheduler* scheduler) {
  const char* op = "load_checkpoint";
  SafetensorsFile file = load_safetensors(path);
  auto meta = [&](const std::string& key) {
    auto it = file.metadata.find(key);
    check(it != file.metadata.end(), op, ": '", path, "' has no '", key,
          "' metadata (not a training checkpoint)");
    return it->second;
  };
  check(meta("ember.optimizer") == optimizer.name(), op, ": the checkpoint holds the state of a ",
        meta("ember.optimizer"), " optimizer, not of ", optimizer.name());
  OptimizerStateDict state;
  model_state.clear();
  for (auto& [name, t] : file.tensors) {
    if (name.rfind(kModel, 0) == 0) {
      model_state.emplace_back(name.substr(kModel.size()), t);
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
  int64_t step = 0;
  SchedulerState sched_state;
  try {
    step = std::stoll(meta("ember.step"));
    for (const json& g : json::parse(meta("optimizer.param_groups"))) {
      OptimizerStateDict::Group group;
      group.options = g.at("options").get<std::map<std::string, double>>();
      group.params = g.at("params").get<std::vector<int64_t>>();
      state.param_groups.push_back(std::move(group));
    }
    if (scheduler) {
      sched_state = json::parse(meta("scheduler")).get<SchedulerState>();
    }
  } catch (const json::exception& e) {
    fail(op, ": malformed optimizer or scheduler state in '", path, "': ", e.what());
  } catch (const std::logic_error& e) {
    fail(op, ": malformed step in '", path, "': ", e.what());
  }
  optimizer.load_state_dict(state);
  if (scheduler) scheduler->load_state_dict(sched_state);
  return step;
}

}  // namespace ember::optim
