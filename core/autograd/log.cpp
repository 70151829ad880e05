#include "core/autograd/log.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>
#include <sstream>

namespace ember::logging {

void init_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* level = std::getenv("EMBER_LOG");
    spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
  });
}

bool debug_enabled() {
  init_from_env();
  return spdlog::should_log(spdlog::level::debug);
}

void backward_step(const std::string& node, const Tensor& grad_output,
                   const std::vector<Tensor>& grad_inputs) {
  init_from_env();
  if (!spdlog::should_log(spdlog::level::debug)) return;
  std::ostringstream ins;
  for (std::size_t i = 0; i < grad_inputs.size(); ++i) {
    ins << (i ? ", " : "")
        << (grad_inputs[i].defined() ? shape_str(grad_inputs[i].shape()) : std::string("None"));
  }
  spdlog::debug("backward {}: grad_output {} -> grad_inputs ({})", node,
                shape_str(grad_output.shape()), ins.str());
}

}  // namespace ember::logging
