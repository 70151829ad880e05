// Flags and Flag (flags.h) over CLI11, compiled once for every example program.
#include "examples/common/flags.h"

#include <CLI/CLI.hpp>
#include <utility>

namespace ember::examples {

Flag& Flag::check(Check check) {
  option_->check(
      CLI::Validator([check = std::move(check)](std::string& text) { return check(text); }, ""));
  return *this;
}

Flag& Flag::capture_default_str() {
  option_->capture_default_str();
  return *this;
}

Flag& Flag::default_str(const std::string& text) {
  option_->default_str(text);
  return *this;
}

Flag& Flag::type_name(const std::string& name) {
  option_->type_name(name);
  return *this;
}

Flag& Flag::excludes(const Flag& other) {
  option_->excludes(other.option_);
  return *this;
}

Flags::Flags(const std::string& description) : app_(std::make_unique<CLI::App>(description)) {}

Flags::~Flags() = default;

template <class T>
Flag Flags::add_option(const std::string& name, T& value, const std::string& help) {
  return Flag(app_->add_option(name, value, help));
}

template Flag Flags::add_option(const std::string&, std::string&, const std::string&);
template Flag Flags::add_option(const std::string&, int&, const std::string&);
template Flag Flags::add_option(const std::string&, int64_t&, const std::string&);
template Flag Flags::add_option(const std::string&, uint64_t&, const std::string&);
template Flag Flags::add_option(const std::string&, double&, const std::string&);
template Flag Flags::add_option(const std::string&, std::optional<int64_t>&, const std::string&);
template Flag Flags::add_option(const std::string&, std::optional<double>&, const std::string&);

Flag Flags::add_option_function(const std::string& name,
                                std::function<void(const std::string&)> store,
                                const std::string& help) {
  return Flag(app_->add_option_function<std::string>(name, std::move(store), help));
}

Flag Flags::add_flag(const std::string& names, bool& value, const std::string& help) {
  return Flag(app_->add_flag(names, value, help));
}

std::optional<int> Flags::parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app_->exit(e);
    throw;
  }
  return std::nullopt;
}

std::string Flags::help() const { return app_->help(); }

}  // namespace ember::examples
