// Memory overlap between tensors that share storage: PyTorch's rules for in-place writes.
//
// A write into a tensor with internal overlap (an expand()ed view: several elements at one
// address) would depend on the order of the writes, so it is an Error. A source that partially
// overlaps the destination (x[1:].add_(x[:-1])) is an Error where PyTorch raises (both dense,
// overlapping but not the same elements); where PyTorch cannot tell (strided or reversed
// views) Ember copies the source first, so the result is always the one of an out-of-place op.
#pragma once

#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

enum class MemOverlap {
  No,       // no element of one is an element of the other
  Full,     // the same elements at the same places (x and x, or an identical view)
  Partial,  // both dense, some elements shared: PyTorch raises
  TooHard,  // strided views whose address ranges intersect: they may share elements
};

// True when two elements of t are one memory location (exact, any strides).
bool has_internal_overlap(const Tensor& t);

// How `a` and `b` share memory (PyTorch's get_overlap_status, exact about disjoint ranges).
MemOverlap overlap_status(const Tensor& a, const Tensor& b);

// One update's tensors in a loop that updates many (an optimizer's parameters, clip_grad's
// gradients): those it writes and those it only reads.
struct UpdateTensors {
  std::vector<Tensor> written, read;
};

// True when a tensor of one update shares memory (any overlap but No) with a tensor of another,
// at least one of them written: the updates then depend on their order (PyTorch runs them one
// after another: the same gradient listed twice is scaled twice), so a parallel loop over the
// elements of all of them must run them in order instead. Only tensors on one storage are
// compared.
bool updates_overlap(const std::vector<UpdateTensors>& updates);

// Errors with PyTorch's messages, naming `op`.
void assert_no_internal_overlap(const Tensor& t, const char* op);
void assert_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op);

}  // namespace ember
