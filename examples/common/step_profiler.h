// --profile of the training programs (examples/train_toy.cpp, examples/train_chars.cpp) and of
// examples/bench/bench_train.cpp: autograd::profiler records a few steps of the loop and the
// program prints the table of key_averages() sorted by self time, as a learner would print
// prof.key_averages().table(sort_by="self_cpu_time_total"). Not part of the library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "core/graph/profiler.h"

namespace ember::examples {

// Records the steps after `first_step` (which is left out as a warm-up: its first allocations
// are not the loop's), up to five and at most to `last_step`; rows is the table's length.
class StepProfiler {
 public:
  StepProfiler(bool on, int64_t first_step, int64_t last_step, int64_t rows = 25)
      : on_(on), first_(first_step + 1), last_(std::min(first_step + 5, last_step)), rows_(rows) {}

  void before_step(int64_t step) {
    if (on_ && step == first_) profile_.emplace();
  }

  // After the last recorded step: the table, under a line naming the steps; before it, nothing.
  std::optional<std::string> after_step(int64_t step) {
    if (!profile_ || step != last_) return std::nullopt;
    profile_->stop();
    const std::string steps = first_ == last_
                                  ? "step " + std::to_string(first_)
                                  : "steps " + std::to_string(first_) + "-" + std::to_string(last_);
    std::string text = "autograd::profiler, " + steps + ":\n" +
                       profile_->key_averages().table("self_cpu_time_total", rows_);
    profile_.reset();
    return text;
  }

 private:
  bool on_;
  int64_t first_, last_, rows_;
  std::optional<autograd::profiler::Profile> profile_;
};

}  // namespace ember::examples
