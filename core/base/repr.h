// Python's repr of a float, used where Ember prints what PyTorch prints (module reprs, test
// reports): 0.5 -> "0.5", 0.0 -> "0.0", 1e-5 -> "1e-05", 1.3e-06 -> "1.3e-06".
#pragma once

#include <string>

namespace ember {

std::string float_repr(double value);

}  // namespace ember
