// Logging through spdlog, off unless asked for: EMBER_LOG=debug (or trace, info, warn...).
#pragma once

#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::logging {

// Reads EMBER_LOG once and sets spdlog's level (default: warn).
void init_from_env();

// Whether debug messages are logged (EMBER_LOG=debug or trace): the engine asks once per
// backward, not once per node.
bool debug_enabled();

// Debug-level trace of one backward step: the node's name and its gradient shapes.
void backward_step(const std::string& node, const Tensor& grad_output,
                   const std::vector<Tensor>& grad_inputs);

}  // namespace ember::logging
