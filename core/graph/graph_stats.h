// How many graph nodes the ops have recorded: a forward under NoGradGuard (an evaluation, a
// generation step) records none. Tests check it (tests/nn/test_generation.cpp).
#pragma once

#include <cstdint>

namespace ember::autograd {

// The op nodes connected into a graph since the program started, in all threads.
int64_t nodes_recorded();

}  // namespace ember::autograd
