// Logging through spdlog, on stderr, off unless asked for: EMBER_LOG=debug (or trace, info,
// warn...).
#pragma once

#include <spdlog/common.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::logging {

// spdlog's default logger writes to stdout, where a program's output goes (the text
// train_gpt --generate prints, a table a pipeline reads): Ember's messages and its warnings
// belong on stderr. Replaces spdlog's own default logger, untouched, with the same logger on
// stderr (same name, level and flush level); returns whether it did. A default logger the
// program installed is left as it is. Ember calls it once before main (while no thread logs);
// a program that sets spdlog's default logger back to stdout gets what it asked for.
bool log_to_stderr();

// Reads EMBER_LOG once (at the first backward) and, when it is set, sets spdlog's level to it.
// Unset, spdlog's level stays what the program made it (spdlog's default is info; Ember logs
// its trace at debug, and warnings). A value that is no level leaves the level as it is, with a
// warning that says so.
void init_from_env();

// EMBER_LOG's value as spdlog's level, in any case: trace, debug, info, warn or warning, err or
// error, critical, off; nullopt for anything else (spdlog's own from_str gives off for it).
std::optional<spdlog::level::level_enum> parse_level(std::string_view value);

// Whether debug messages are logged (EMBER_LOG=debug or trace): the engine asks once per
// backward, not once per node.
bool debug_enabled();

// Debug-level trace of one backward step: the node's name and its gradient shapes.
void backward_step(const std::string& node, const Tensor& grad_output,
                   const std::vector<Tensor>& grad_inputs);

}  // namespace ember::logging
