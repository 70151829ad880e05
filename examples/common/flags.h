// The training programs' command lines (CLI11): one-line helpers for the kinds of option they
// add, and the flags train_toy and train_chars share. Not part of the library.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/base/parallel.h"

namespace ember::examples {

// An option whose default --help shows.
template <class T>
CLI::Option* option(CLI::App& app, const std::string& name, T& value, const std::string& help) {
  return app.add_option(name, value, help)->capture_default_str();
}

// The same, for a number that must be positive.
template <class T>
CLI::Option* positive_option(CLI::App& app, const std::string& name, T& value,
                             const std::string& help) {
  return option(app, name, value, help)->check(CLI::PositiveNumber);
}

// The same, for a number that must not be negative.
template <class T>
CLI::Option* non_negative_option(CLI::App& app, const std::string& name, T& value,
                                 const std::string& help) {
  return option(app, name, value, help)->check(CLI::NonNegativeNumber);
}

// The same, for a number in [lo, hi].
template <class T, class Bound>
CLI::Option* range_option(CLI::App& app, const std::string& name, T& value, Bound lo, Bound hi,
                          const std::string& help) {
  return option(app, name, value, help)->check(CLI::Range(lo, hi));
}

// --print-every, which every training program has.
inline CLI::Option* print_every_option(CLI::App& app, int64_t& print_every) {
  return positive_option(app, "--print-every", print_every,
                         "steps between progress lines when stdout is not a terminal");
}

// The flags of train_toy and train_chars; each program sets its own defaults before add_to().
struct TrainingFlags {
  uint64_t seed = 123;
  int64_t steps = 200;
  double lr = 3e-3;
  int64_t batch = 32;
  int threads = 1;
  std::string out;
  int64_t print_every = 25;
  bool profile = false;

  // Adds --seed, --steps, --lr, --batch, --threads and --out to app; seed_help, steps_help and
  // out_help say what the program does with them.
  void add_to(CLI::App& app, const std::string& seed_help, const std::string& steps_help,
              const std::string& out_help) {
    option(app, "--seed", seed, seed_help);
    positive_option(app, "--steps", steps, steps_help);
    positive_option(app, "--lr", lr, "peak learning rate (AdamW, warmup then cosine decay)");
    positive_option(app, "--batch", batch, "sequences per step");
    positive_option(app, "--threads", threads, "threads for the kernels (ember::set_num_threads)");
    option(app, "--out", out, out_help);
  }

  // Adds --print-every (kept apart: each program puts it after its own flags).
  void add_print_every(CLI::App& app) { print_every_option(app, print_every); }

  // Adds --profile (see StepProfiler).
  void add_profile(CLI::App& app) {
    app.add_flag("--profile", profile,
                 "record steps 2-6 with autograd::profiler and print its table (sorted by self "
                 "time)");
  }

  // After parsing: the kernels' threads, and the output directory made.
  void apply() const {
    set_num_threads(threads);
    std::filesystem::create_directories(out);
  }
};

}  // namespace ember::examples
