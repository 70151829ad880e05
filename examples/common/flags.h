// The example programs' command lines: `Flags`, a thin handle on CLI11's App whose body is
// compiled once (flags.cpp, in the examples' common library) instead of in every program: CLI11
// is header-only, and its inline functions are most of what a program including it compiles. On
// it, one-line helpers for the kinds of option the programs add (a number in a range, a
// comma-separated list), and the flags train_toy and train_chars share. Not part of the library.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "examples/common/program.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ember::examples {

// `text` read as a T the way CLI11 reads it (strtoll / strtoull / strtod), but refusing what CLI11
// would let through: an integer out of T's range (strtoll clamps it, strtoull wraps "-1"), NaN
// and infinities, and an integer that is not plain decimal digits: CLI11 reads "010" as octal 8
// and "0x10" as 16, where a user (and Python's int()) means 10.
template <class T>
bool parse_number(const std::string& text, T& value) {
  if (text.empty()) return false;
  if constexpr (std::is_integral_v<T>) {
    const std::size_t first = text[0] == '+' || text[0] == '-' ? 1 : 0;
    const std::string digits = text.substr(first);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
        (digits.size() > 1 && digits[0] == '0')) {
      return false;
    }
  }
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_floating_point_v<T>) {
    const double v = std::strtod(text.c_str(), &end);
    if (!std::isfinite(v)) return false;
    value = static_cast<T>(v);
  } else if constexpr (std::is_unsigned_v<T>) {
    if (text.find('-') != std::string::npos) return false;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (v > std::numeric_limits<T>::max()) return false;
    value = static_cast<T>(v);
  } else {
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (v < std::numeric_limits<T>::lowest() || v > std::numeric_limits<T>::max()) return false;
    value = static_cast<T>(v);
  }
  return errno != ERANGE && end == text.c_str() + text.size();
}

// A check of a flag's text: "" when it is good, else what was expected ("expected an integer in
// [1, 8], got '9'"), which becomes the flag's error.
using Check = std::function<std::string(const std::string& text)>;

// One option of a Flags (CLI11's Option): the calls the programs chain on it.
class Flag {
 public:
  explicit Flag(CLI::Option* option) : option_(option) {}
  Flag& check(Check check);                    // text that `check` refuses is an error
  Flag& capture_default_str();                 // --help shows the value it holds now
  Flag& default_str(const std::string& text);  // --help shows `text` as its default
  Flag& type_name(const std::string& name);    // --help shows `name` for its value (FILE)
  Flag& excludes(const Flag& other);           // giving both is an error

 private:
  CLI::Option* option_;
};

// A program's command line (CLI11's App): options and flags bound to the program's variables,
// then parse(). add_option is compiled for the value types the programs hold (flags.cpp).
class Flags {
 public:
  explicit Flags(const std::string& description);
  ~Flags();
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // A positional argument ("text") or an option ("--seed"), read into `value`.
  template <class T>
  Flag add_option(const std::string& name, T& value, const std::string& help);
  // An option whose text goes to `store` (after its checks).
  Flag add_option_function(const std::string& name, std::function<void(const std::string&)> store,
                           const std::string& help);
  // A flag: "--html", "!--no-save" (false when given), "--kv-cache,!--no-kv-cache".
  Flag add_flag(const std::string& names, bool& value, const std::string& help);

  // Parses the command line; --help (and its like) prints and gives the exit code 0, any other
  // error is thrown for run_main ("--steps: expected an integer in (0, 1000000000], got '0'").
  std::optional<int> parse(int argc, char** argv);
  std::string help() const;  // what --help prints

 private:
  std::unique_ptr<CLI::App> app_;
};

extern template Flag Flags::add_option(const std::string&, std::string&, const std::string&);
extern template Flag Flags::add_option(const std::string&, int&, const std::string&);
extern template Flag Flags::add_option(const std::string&, int64_t&, const std::string&);
extern template Flag Flags::add_option(const std::string&, uint64_t&, const std::string&);
extern template Flag Flags::add_option(const std::string&, double&, const std::string&);
extern template Flag Flags::add_option(const std::string&, std::optional<int64_t>&,
                                       const std::string&);
extern template Flag Flags::add_option(const std::string&, std::optional<double>&,
                                       const std::string&);

// Parses the command line (Flags::parse), the programs' one call.
inline std::optional<int> parse(Flags& app, int argc, char** argv) { return app.parse(argc, argv); }

// A check that the flag's text is a finite T in [lo, hi] (`above_lo`: in (lo, hi]); its message
// says what was expected.
template <class T>
Check number_in(T lo, T hi, bool above_lo = false) {
  std::ostringstream expected;
  expected << "expected " << (std::is_floating_point_v<T> ? "a finite number" : "an integer");
  if (std::is_integral_v<T> || hi != std::numeric_limits<T>::max()) {
    expected << " in " << (above_lo ? "(" : "[") << +lo << ", " << +hi << "]";
  } else if (lo != std::numeric_limits<T>::lowest()) {
    expected << (above_lo ? " > " : " >= ") << lo;
  }
  return [lo, hi, above_lo, expected = expected.str()](const std::string& text) {
    T v{};
    if (parse_number(text, v) && (above_lo ? v > lo : v >= lo) && v <= hi) return std::string();
    const bool leading_zero = std::is_integral_v<T> && text.size() > 1 && text[0] == '0';
    return expected + ", got '" + text + "'" +
           (leading_zero ? " (in decimal digits, without a leading 0)" : "");
  };
}

// An option whose default --help shows; a number is checked by number_in (any finite value of
// its type).
template <class T>
Flag option(Flags& app, const std::string& name, T& value, const std::string& help) {
  Flag o = app.add_option(name, value, help);
  o.capture_default_str();
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    o.check(number_in<T>(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max()));
  }
  return o;
}

// An option holding a file or directory name, or another text that must not be empty (a
// prompt): `--resume ''` is refused ("--resume: expected a file name, got ''"), not taken for the
// flag's absence (a run from scratch where a resume was asked for). `what` names what is
// expected ("a file name", "a prompt").
inline Flag text_option(Flags& app, const std::string& name, std::string& value,
                        const std::string& help, const std::string& what = "a file name") {
  Flag o = app.add_option(name, value, help);
  o.check([what](const std::string& text) {
    return text.empty() ? "expected " + what + ", got ''" : std::string();
  });
  return o;
}

// An option for a number in [lo, hi].
template <class T, class Bound>
Flag range_option(Flags& app, const std::string& name, T& value, Bound lo, Bound hi,
                  const std::string& help) {
  Flag o = app.add_option(name, value, help);
  o.capture_default_str().check(number_in<T>(static_cast<T>(lo), static_cast<T>(hi)));
  return o;
}

// The same, for a number that must be positive (at most `hi`).
template <class T>
Flag positive_option(Flags& app, const std::string& name, T& value, const std::string& help,
                     T hi = std::numeric_limits<T>::max()) {
  Flag o = app.add_option(name, value, help);
  o.capture_default_str().check(number_in<T>(T{0}, hi, /*above_lo=*/true));
  return o;
}

// The same, for a number that must not be negative (at most `hi`).
template <class T>
Flag non_negative_option(Flags& app, const std::string& name, T& value, const std::string& help,
                         T hi = std::numeric_limits<T>::max()) {
  return range_option(app, name, value, T{0}, hi, help);
}

// The items of a comma-separated list ("1,2" -> "1", "2"; "1,,2" keeps the empty item, which
// the item's check then refuses).
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  for (std::string::size_type start = 0;;) {
    const std::string::size_type comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

// An option holding a comma-separated list (--threads 1,2), given once: `parse` reads one item
// (bool parse(const std::string&, T&)), and an item it refuses makes the flag an error whose
// message says `expected` and names the item. `default_text` is the list --help shows.
template <class T, class Parse>
Flag list_option(Flags& app, const std::string& name, std::vector<T>& values, Parse parse,
                 const std::string& expected, const std::string& default_text,
                 const std::string& help) {
  Flag o = app.add_option_function(
      name,
      [&values, parse](const std::string& text) {
        values.clear();
        for (const std::string& item : split_list(text)) {
          T value{};
          parse(item, value);  // checked by the check below
          values.push_back(value);
        }
      },
      help);
  o.check([parse, expected](const std::string& text) {
     for (const std::string& item : split_list(text)) {
       T value{};
       if (parse(item, value)) continue;
       return expected + ", got '" + item + "'" + (item == text ? "" : " in '" + text + "'");
     }
     return std::string();
   })
      .default_str(default_text)
      .type_name("LIST");
  return o;
}

// The same, for a list of numbers in [lo, hi].
template <class T, class Bound>
Flag number_list_option(Flags& app, const std::string& name, std::vector<T>& values, Bound lo,
                        Bound hi, const std::string& help) {
  const T low = static_cast<T>(lo), high = static_cast<T>(hi);
  std::ostringstream expected, default_text;
  expected << "expected a comma-separated list of "
           << (std::is_floating_point_v<T> ? "finite numbers" : "integers") << " in [" << +low
           << ", " << +high << "]";
  for (std::size_t i = 0; i < values.size(); ++i) default_text << (i ? "," : "") << +values[i];
  return list_option(
      app, name, values,
      [low, high](const std::string& item, T& value) {
        return parse_number(item, value) && value >= low && value <= high;
      },
      expected.str(), default_text.str(), help);
}

// --temperature of a program that samples: 0 (greedy) or a number in [1e-6, 1e6]. The logits are
// float32 and divided by it: a temperature that float32 holds as 0, as a subnormal or as inf, or
// one so small that the quotients overflow, turns the probabilities into NaN, and the run would
// stop at its first sample (after training) with multinomial's error instead of the flag's.
inline constexpr double kMinTemperature = 1e-6, kMaxTemperature = 1e6;
inline Flag temperature_option(Flags& app, double& temperature, const std::string& help) {
  Flag o = app.add_option("--temperature", temperature, help);
  o.capture_default_str().check([](const std::string& text) {
    double t = 0;
    if (parse_number(text, t) && (t == 0 || (t >= kMinTemperature && t <= kMaxTemperature))) {
      return std::string();
    }
    std::ostringstream expected;
    expected << "expected a finite number, 0 (greedy) or in [" << kMinTemperature << ", "
             << kMaxTemperature << "], got '" << text << "'";
    return expected.str();
  });
  return o;
}

// Upper bounds of the training programs' counts: large enough for any run, small enough that
// nothing computed from them overflows (steps x batch x context tokens, epochs x batches).
inline constexpr int64_t kMaxSteps = 1000000000;
inline constexpr int64_t kMaxBatch = 1 << 20;

// --print-every, which every training program has.
inline Flag print_every_option(Flags& app, int64_t& print_every) {
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
  void add_to(Flags& app, const std::string& seed_help, const std::string& steps_help,
              const std::string& out_help) {
    option(app, "--seed", seed, seed_help);
    positive_option(app, "--steps", steps, steps_help, kMaxSteps);
    positive_option(app, "--lr", lr, "peak learning rate (AdamW, warmup then cosine decay)");
    positive_option(app, "--batch", batch, "sequences per step", kMaxBatch);
    positive_option(app, "--threads", threads, "threads for the kernels (ember::set_num_threads)",
                    kMaxThreads);
    option(app, "--out", out, out_help);
  }

  // Adds --print-every (kept apart: each program puts it after its own flags).
  void add_print_every(Flags& app) { print_every_option(app, print_every); }

  // Adds --profile (see StepProfiler).
  void add_profile(Flags& app) {
    app.add_flag("--profile", profile,
                 "record steps 2-6 with autograd::profiler and print its table (sorted by self "
                 "time)");
  }

  // After parsing: the kernels' threads, and the output directory made (refused when it cannot
  // be), with the temporary files of an interrupted save of `checkpoint` (a file name in it)
  // removed.
  void apply(const std::string& checkpoint = "") const {
    set_threads(threads);
    make_output_directory(out);
    if (!checkpoint.empty()) remove_stale_temporaries(out + "/" + checkpoint);
  }
};

}  // namespace ember::examples
