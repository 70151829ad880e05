// The C++ reader of the fixture format that scripts/fixtures/fixture_io.py writes, one entry per
// line:
//
//   <name> <dtype> <shape> = all <patterns>                       a tensor, every element
//   <name> <dtype> <shape> = head <16> tail <16> fnv <hash>       a large tensor, summarised
//   <name> keys = <k1> <k2> ...                                   a list of names
//   <name> ints = <i1> <i2> ...                                   a list of integers (decimal)
//   <name> str = <text>                                           a string, escaped (below)
//
// dtype is f32, f64, i64 or b8 (also written "bool"); shape is "2x3" ("-" for a 0-d tensor);
// each pattern is an element's bit pattern in hex, row-major (8 digits for f32, 16 for f64 and
// i64, 2 for b8); the hash is FNV-1a (64 bits) of all the elements' little-endian bytes. A
// string's text is UTF-8 with a backslash written \\, a newline \n and any other control
// character \xHH, so that any text fits on one line. Lines starting with '#' and empty lines are
// comments; a line in another form is an error.
//
//   const test::Fixture& f = test::fixture_file("sampling.txt");   // read once, then cached
//   Tensor t = f.tensor("randint_0_10");                           // a fresh copy
//   f.expect_exact(actual, "randint_0_10");                        // bit for bit
//   f.expect_near(actual, "randint_0_10", 1e-6);                   // allclose
//   f.ints("verdict"); f.keys("cells"); f.text("cell_28");         // the other kinds
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember::test {

// One entry of a fixture file: a tensor (in full, or summarised by its first and last 16
// elements and the hash of all of them), a list of names, a list of integers or a string.
struct FixtureEntry {
  enum Kind { kTensor, kKeys, kInts, kText } kind = kTensor;
  std::vector<std::string> keys;  // kKeys
  std::vector<int64_t> ints;      // kInts
  std::string text;               // kText
  DType dtype = DType::Float32;
  Shape shape;
  bool full = true;
  std::vector<uint64_t> patterns;  // every element (full) or the first 16 (summarised)
  std::vector<uint64_t> tail;      // the last 16 (summarised only)
  uint64_t fnv = 0;                // FNV-1a of every element's bytes (summarised only)
};

// FNV-1a (64 bits) of n bytes, as fixture_io.fnv1a64.
inline uint64_t fnv1a64(const unsigned char* data, std::size_t n) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 0x100000001B3ULL;
  }
  return h;
}

// Every element's bit pattern (little-endian, dtype_size(dtype) bytes each), row-major.
inline std::vector<uint64_t> patterns_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(c.storage()->data()) +
                      static_cast<std::size_t>(c.offset()) * dtype_size(c.dtype());
  const std::size_t size = dtype_size(c.dtype());
  std::vector<uint64_t> out(static_cast<std::size_t>(c.numel()), 0);
  for (std::size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], bytes + i * size, size);
  return out;
}

class Fixture {
 public:
  // Reads tests/fixtures/<file_name>; a line not in the format is an ember::Error.
  explicit Fixture(const std::string& file_name) : file_(file_name) {
    std::ifstream in(fixture_path(file_name));
    check(in.good(), "cannot open ", fixture_path(file_name));
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string name, dtype, shape_text, equals, kind;
      fields >> name >> dtype;
      const std::string where = file_name + ":" + std::to_string(line_number);
      if (dtype == "keys" || dtype == "ints" || dtype == "str") {
        FixtureEntry e;
        fields >> equals;
        check(equals == "=", where, ": not a fixture_io line: ", line.substr(0, 80));
        if (dtype == "keys") {
          e.kind = FixtureEntry::kKeys;
          for (std::string key; fields >> key;) e.keys.push_back(key);
        } else if (dtype == "ints") {
          e.kind = FixtureEntry::kInts;
          for (std::string word; fields >> word;) {
            std::size_t used = 0;
            e.ints.push_back(std::stoll(word, &used));
            check(used == word.size(), where, ": not an integer: ", word);
          }
        } else {
          e.kind = FixtureEntry::kText;
          // The text starts after "<name> str = " (an empty text may have lost its last space).
          const std::size_t start = name.size() + std::string(" str = ").size();
          e.text = unescape(where, start < line.size() ? line.substr(start) : "");
        }
        add(where, name, std::move(e));
        continue;
      }
      fields >> shape_text >> equals >> kind;
      check(equals == "=" && (kind == "all" || kind == "head"), where,
            ": not a fixture_io line: ", line.substr(0, 80));
      FixtureEntry e;
      e.dtype = dtype == "f32"   ? DType::Float32
                : dtype == "f64" ? DType::Float64
                : dtype == "i64" ? DType::Int64
                : dtype == "b8" || dtype == "bool"
                    ? DType::Bool
                    : throw Error(where + ": unknown dtype " + dtype);
      e.shape = parse_shape(shape_text);
      e.full = kind == "all";
      std::vector<uint64_t>* into = &e.patterns;
      for (std::string word; fields >> word;) {
        if (word == "tail") {
          into = &e.tail;
        } else if (word == "fnv") {
          fields >> word;
          e.fnv = std::stoull(word, nullptr, 16);
        } else {
          into->push_back(std::stoull(word, nullptr, 16));
        }
      }
      if (e.full) {
        check(static_cast<int64_t>(e.patterns.size()) == numel_of(e.shape), where, ": ",
              e.patterns.size(), " patterns for shape ", shape_text);
      }
      add(where, name, std::move(e));
    }
  }

  const std::string& file_name() const { return file_; }
  // Every name, in the file's order.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }

  const FixtureEntry& entry(const std::string& name) const {
    auto it = entries_.find(name);
    check(it != entries_.end(), file_, " has no entry ", name);
    return it->second;
  }

  // The list of names `name` (a keys line); the integers `name` (an ints line); the string
  // `name` (a str line).
  const std::vector<std::string>& keys(const std::string& name) const {
    const FixtureEntry& e = entry(name);
    check(e.kind == FixtureEntry::kKeys, file_, ": ", name, " is not a list of keys");
    return e.keys;
  }
  const std::vector<int64_t>& ints(const std::string& name) const {
    const FixtureEntry& e = entry(name);
    check(e.kind == FixtureEntry::kInts, file_, ": ", name, " is not a list of integers");
    return e.ints;
  }
  const std::string& text(const std::string& name) const {
    const FixtureEntry& e = entry(name);
    check(e.kind == FixtureEntry::kText, file_, ": ", name, " is not a string");
    return e.text;
  }

  // `actual` equals the tensor `name` bit for bit; is within rtol/atol of it (both below).
  void expect_exact(const Tensor& actual, const std::string& name) const;
  void expect_near(const Tensor& actual, const std::string& name, double rtol,
                   double atol = 0) const;

  // The tensor `name`, exactly as PyTorch produced it (a fresh copy: tests may write into it).
  // Summarised entries have no values: an ember::Error.
  Tensor tensor(const std::string& name) const {
    const FixtureEntry& e = entry(name);
    check(e.kind == FixtureEntry::kTensor, file_, ": ", name, " is not a tensor");
    check(e.full, file_, ": ", name, " is summarised (head, tail and hash), not stored in full");
    Tensor t = empty(e.shape, e.dtype);
    auto* bytes = static_cast<unsigned char*>(t.storage()->data());
    const std::size_t size = dtype_size(e.dtype);
    for (std::size_t i = 0; i < e.patterns.size(); ++i) {
      std::memcpy(bytes + i * size, &e.patterns[i], size);  // little-endian
    }
    return t;
  }

 private:
  // A str line's text with its escapes (\\, \n, \xHH) undone.
  static std::string unescape(const std::string& where, const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        out += s[i];
      } else if (i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
        out += s[i + 1] == 'n' ? '\n' : '\\';
        ++i;
      } else {
        check(i + 3 < s.size() && s[i + 1] == 'x', where,
              ": a backslash not followed by \\, n or xHH");
        out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16));
        i += 3;
      }
    }
    return out;
  }
  void add(const std::string& where, const std::string& name, FixtureEntry e) {
    check(entries_.emplace(name, std::move(e)).second, where, ": duplicate name ", name);
    names_.push_back(name);
  }

  std::string file_;
  std::map<std::string, FixtureEntry> entries_;
  std::vector<std::string> names_;
};

// tests/fixtures/<file_name>, read on first use and kept (thread-safe).
inline const Fixture& fixture_file(const std::string& file_name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Fixture>> files;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = files[file_name];
  if (!slot) slot = std::make_unique<Fixture>(file_name);
  return *slot;
}

// `actual` has the fixture's dtype and shape and its elements' bit patterns: every one of them,
// or for a summarised entry the first 16, the last 16 and the hash of all. A NaN matches any
// NaN.
inline void expect_exact(const Tensor& actual, const Fixture& f, const std::string& name) {
  const FixtureEntry& e = f.entry(name);
  ASSERT_EQ(e.kind, FixtureEntry::kTensor) << f.file_name() << ": " << name << " is not a tensor";
  ASSERT_TRUE(actual.defined()) << name;
  ASSERT_EQ(actual.dtype(), e.dtype) << name;
  ASSERT_EQ(actual.shape(), e.shape) << name;
  const std::vector<uint64_t> got = patterns_of(actual);
  auto same = [&](uint64_t a, uint64_t b) {
    if (a == b) return true;
    if (e.dtype == DType::Float32) {
      return std::isnan(std::bit_cast<float>(static_cast<uint32_t>(a))) &&
             std::isnan(std::bit_cast<float>(static_cast<uint32_t>(b)));
    }
    if (e.dtype == DType::Float64) {
      return std::isnan(std::bit_cast<double>(a)) && std::isnan(std::bit_cast<double>(b));
    }
    return false;
  };
  auto compare = [&](std::size_t got_from, const std::vector<uint64_t>& expected) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(same(got[got_from + i], expected[i]))
          << f.file_name() << ": " << name << " element " << got_from + i << ": " << std::hex
          << got[got_from + i] << " vs PyTorch " << expected[i] << std::dec;
    }
  };
  if (e.full) {
    compare(0, e.patterns);
    return;
  }
  ASSERT_GE(got.size(), e.patterns.size() + e.tail.size()) << name;
  compare(0, e.patterns);
  compare(got.size() - e.tail.size(), e.tail);
  Tensor c = actual.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(c.storage()->data()) +
                      static_cast<std::size_t>(c.offset()) * dtype_size(c.dtype());
  EXPECT_EQ(fnv1a64(bytes, static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype())), e.fnv)
      << f.file_name() << ": " << name << " (hash of all the elements)";
}

// `actual` is within rtol/atol of PyTorch's tensor `name` (for results whose rounding differs).
inline void expect_near(const Tensor& actual, const Fixture& f, const std::string& name,
                        double rtol, double atol = 0) {
  Tensor expected = f.tensor(name);
  ASSERT_TRUE(actual.defined()) << name;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << name;
  ASSERT_EQ(actual.shape(), expected.shape()) << name;
  EXPECT_TRUE(allclose(actual, expected, rtol, atol, /*equal_nan=*/true))
      << f.file_name() << ": " << name << "\nactual:\n"
      << actual << "\nPyTorch:\n"
      << expected;
}

inline void Fixture::expect_exact(const Tensor& actual, const std::string& name) const {
  test::expect_exact(actual, *this, name);
}

inline void Fixture::expect_near(const Tensor& actual, const std::string& name, double rtol,
                                 double atol) const {
  test::expect_near(actual, *this, name, rtol, atol);
}

}  // namespace ember::test
