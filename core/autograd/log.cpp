#include "core/autograd/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

namespace ember::logging {

std::optional<spdlog::level::level_enum> parse_level(std::string_view value) {
  std::string name;
  for (char c : value) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "warn" || name == "warning") return spdlog::level::warn;
  if (name == "err" || name == "error") return spdlog::level::err;
  for (int level = spdlog::level::trace; level <= spdlog::level::off; ++level) {
    const auto l = static_cast<spdlog::level::level_enum>(level);
    const auto text = spdlog::level::to_string_view(l);
    if (name == std::string_view(text.data(), text.size())) return l;
  }
  return std::nullopt;
}

bool log_to_stderr() {
  const auto current = spdlog::default_logger();
  if (current == nullptr || !current->name().empty() || current->sinks().size() != 1) return false;
  if (!std::dynamic_pointer_cast<spdlog::sinks::stdout_color_sink_mt>(current->sinks()[0])) {
    return false;  // a logger the program installed
  }
  auto logger =
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_level(current->level());
  logger->flush_on(current->flush_level());
  spdlog::set_default_logger(std::move(logger));
  return true;
}

namespace {
// Before main, while no thread logs (spdlog's default logger must not be replaced while another
// thread logs through it): every program linked with Ember logs to stderr from its first line.
[[maybe_unused]] const bool logs_on_stderr = log_to_stderr();
}  // namespace

void init_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* value = std::getenv("EMBER_LOG");
    if (value == nullptr || *value == '\0') return;  // the program's level stays
    if (const auto level = parse_level(value)) {
      spdlog::set_level(*level);
    } else {
      spdlog::warn(
          "EMBER_LOG={}: not a logging level (expected trace, debug, info, warn, error, critical "
          "or off); the level stays {}",
          value, spdlog::level::to_string_view(spdlog::get_level()));
    }
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
