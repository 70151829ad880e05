// Printing tensors exactly the way PyTorch 1.13 prints them.
//
// This is a re-implementation of torch/_tensor_str.py with the default print options
// (precision 4, threshold 1000, edgeitems 3, linewidth 80, sci_mode None). It works on plain
// values, not on a Tensor, so that the Tensor class can call it with its elements gathered
// in row-major order:
//
//   format_tensor({2, 2}, {1.0, 2.0, 3.0, 4.5}, DType::Float32)
//     == "tensor([[1.0000, 2.0000],\n        [3.0000, 4.5000]])"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/dtype.h"

namespace ember {

// The repr of a tensor, e.g. "tensor([1, 2])" or "tensor(0.9544, requires_grad=True)".
//
// values: the elements in row-major logical order, as doubles (float32 values converted
//   exactly; int64 as integers; bool as 0/1). values.size() must be the product of shape, or
//   of shown_shape(shape) (the shown entries only).
// suffixes: extra "key=value" parts in order, e.g. {"grad_fn=<MmBackward0>"} or
//   {"requires_grad=True"}. The parts PyTorch derives from the data itself (size=(...) for
//   empty tensors, dtype=torch.float64, ...) are added here and come first.
std::string format_tensor(const std::vector<int64_t>& shape, const std::vector<double>& values,
                          DType dtype, const std::vector<std::string>& suffixes = {});

// The same for an integer or bool tensor, from its exact values (int64 does not fit a double).
std::string format_int_tensor(const std::vector<int64_t>& shape, const std::vector<int64_t>& values,
                              DType dtype, const std::vector<std::string>& suffixes = {});

// The shape of the entries a print shows: a tensor of more than 1000 elements is summarized,
// each dim longer than 6 cut to its first and last 3 entries; otherwise `shape` itself. The
// values given to format_tensor may be these entries only (row-major over this shape), so a
// huge tensor (an expanded view) is printed without reading every element, as PyTorch's.
std::vector<int64_t> shown_shape(const std::vector<int64_t>& shape);
// The repr of a shape: "torch.Size([2, 6, 3])", "torch.Size([])".
std::string format_size(const std::vector<int64_t>& shape);

// Python's repr of a shape as a tuple: "(2, 0, 3)", "(0,)", "()".
std::string format_shape_tuple(const std::vector<int64_t>& shape);

}  // namespace ember
