// The settings of the pages of examples/web/ (JSON text, from the page or from the native
// program's command line), read strictly, so that the page and its native program refuse the
// same inputs with the same ember::Error: text that is not a JSON object, an unknown key, a value
// of the wrong type, a fractional count, a number out of its range or outside float32's, nested
// lists of the wrong shape, nesting deeper than a setting can be. No setting is ever rounded,
// clamped or ignored: the computation is the one the settings say, or none.
//
// And what the pages' C functions share: a C++ exception never leaves them (it becomes
// {"error": ...}), and their JSON never holds a byte that is not UTF-8.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/ember.h"

namespace ember::web {

// Settings nest at most this deep (attention_live's weights: an object of lists of lists).
inline constexpr int kMaxSettingsDepth = 6;

// A JSON value as a message shows it: short, and with any byte that is not UTF-8 replaced.
inline std::string shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

class Settings {
 public:
  // `text`: a JSON object whose keys are among `known` (an empty text: no settings).
  Settings(const char* text, std::vector<std::string> known) : known_(std::move(known)) {
    check(text != nullptr, "settings: no text (a null pointer)");
    const std::string source(text);
    if (source.empty()) {
      json_ = nlohmann::json::object();
    } else {
      try {
        json_ = nlohmann::json::parse(
            source, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
              check(depth <= kMaxSettingsDepth, "settings: nested deeper than ", kMaxSettingsDepth,
                    " levels");
              return true;
            });
      } catch (const nlohmann::json::exception& e) {
        std::string what = e.what();
        const auto bracket = what.find("] ");  // "[json.exception.parse_error.101] "
        fail("settings: not valid JSON (",
             bracket == std::string::npos ? what : what.substr(bracket + 2), ")");
      }
    }
    check(json_.is_object(), "settings: expected a JSON object {\"key\": value, ...}, got ",
          shown(json_));
    for (const auto& item : json_.items()) {
      bool ok = false;
      for (const std::string& k : known_) ok = ok || k == item.key();
      if (!ok) {
        std::ostringstream names;
        for (std::size_t i = 0; i < known_.size(); ++i) names << (i ? ", " : "") << known_[i];
        fail("settings: unknown key ", shown(item.key()), " (known: ", names.str(), ")");
      }
    }
  }

  bool has(const std::string& key) const { return json_.contains(key); }
  const nlohmann::json& operator[](const std::string& key) const { return json_.at(key); }

  // An integer in [lo, hi] (2 and 2.0 are; 2.5, "2", true are not).
  int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = json_.at(key);
    check(v.is_number(), "settings: \"", key, "\" must be an integer in [", lo, ", ", hi, "], got ",
          shown(v));
    // (Integers compared as integers: 2^53 + 1 is not 2^53; floats as floats, then converted.)
    bool ok = false;
    if (v.is_number_unsigned()) {
      ok = hi >= 0 && v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
           static_cast<int64_t>(v.get<uint64_t>()) >= lo;
    } else if (v.is_number_integer()) {
      ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    } else {
      const double d = v.get<double>();
      ok = std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
           d <= static_cast<double>(hi) && std::fabs(d) < 9.2e18;
    }
    check(ok, "settings: \"", key, "\" must be an integer in [", lo, ", ", hi, "], got ", shown(v));
    return v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
  }

  // A finite number in [lo, hi].
  double number(const std::string& key, double fallback, double lo, double hi) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = json_.at(key);
    const double d = v.is_number() ? v.get<double>() : std::nan("");
    check(std::isfinite(d) && d >= lo && d <= hi, "settings: \"", key,
          "\" must be a finite number in [", lo, ", ", hi, "], got ", shown(v));
    return d;
  }

  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = json_.at(key);
    check(v.is_boolean(), "settings: \"", key, "\" must be true or false, got ", shown(v));
    return v.get<bool>();
  }

 private:
  std::vector<std::string> known_;
  nlohmann::json json_;
};

// A float32 tensor of `shape` from nested JSON lists of exactly that shape (a [6, 3] is six lists
// of three numbers, not three lists of six), each a finite number within float32's range. `what`
// names the setting in messages ("inputs").
inline Tensor tensor_from_json(const nlohmann::json& nested, const Shape& shape,
                               const std::string& what) {
  std::vector<double> flat;
  std::function<void(const nlohmann::json&, std::size_t, const std::string&)> walk =
      [&](const nlohmann::json& j, std::size_t dim, const std::string& at) {
        if (dim == shape.size()) {
          const double d = j.is_number() ? j.get<double>() : std::nan("");
          check(std::isfinite(d) && std::fabs(d) <= std::numeric_limits<float>::max(),
                "settings: ", at, " must be a finite number within float32's range (|x| <= ",
                std::numeric_limits<float>::max(), "), got ", shown(j));
          flat.push_back(d);
          return;
        }
        check(j.is_array() && static_cast<int64_t>(j.size()) == shape[dim], "settings: ", at,
              " must be a list of ", shape[dim], " ", dim + 1 == shape.size() ? "numbers" : "lists",
              " (", what, " has shape ", shape, "), got ", shown(j));
        for (std::size_t i = 0; i < j.size(); ++i)
          walk(j[i], dim + 1, at + "[" + std::to_string(i) + "]");
      };
  walk(nested, 0, what);
  return from_vector(flat, shape);
}

// A number for the pages' JSON: NaN and the infinities as the strings "nan", "inf" and "-inf"
// (JSON has no literal for them; autograd::explore_data writes them so too), never as null.
template <typename Json>
Json number_json(double x) {
  if (std::isnan(x)) return Json("nan");
  if (std::isinf(x)) return Json(x > 0 ? "inf" : "-inf");
  return Json(x);
}

// The JSON text a page's C function returns: `work()`'s JSON, or {"error": what} for any
// exception (an ember::Error, nlohmann's, std::bad_alloc, or one of another type), with any
// byte that is not UTF-8 replaced (the visitor's text can hold such bytes).
template <typename Work>
std::string answer_or_error(Work work) {
  using J = nlohmann::ordered_json;
  try {
    return work().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return J{{"error", e.what()}}.dump(-1, ' ', false, J::error_handler_t::replace);
  } catch (...) {
    return R"({"error": "an exception of unknown type"})";
  }
}

}  // namespace ember::web
