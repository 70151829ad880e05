// Reads tests/fixtures/adversarial.txt (scripts/fixtures/gen_adversarial.py): PyTorch's tensors
// by name, exactly (bit patterns of f32, f64, i64 and bool elements).
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/tensor.h"
#include "tests/test_helpers.h"

namespace ember::test {

inline const std::map<std::string, Tensor>& adversarial_fixture() {
  static const std::map<std::string, Tensor> tensors = [] {
    std::map<std::string, Tensor> out;
    std::ifstream in(fixture_path("adversarial.txt"));
    EXPECT_TRUE(in.good()) << "cannot open " << fixture_path("adversarial.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string name, dtype, shape_text, eq, all;
      fields >> name >> dtype >> shape_text >> eq >> all;
      const Shape shape = parse_shape(shape_text);
      const DType d = dtype == "f32"   ? DType::Float32
                      : dtype == "f64" ? DType::Float64
                      : dtype == "i64" ? DType::Int64
                                       : DType::Bool;
      Tensor t = empty(shape, d);
      auto* bytes = static_cast<unsigned char*>(t.storage()->data());
      const std::size_t size = dtype_size(d);
      std::string word;
      for (int64_t i = 0; i < t.numel(); ++i) {
        fields >> word;
        const uint64_t bits = std::stoull(word, nullptr, 16);
        std::memcpy(bytes + static_cast<std::size_t>(i) * size, &bits, size);  // little-endian
      }
      out[name] = t;
    }
    return out;
  }();
  return tensors;
}

// The fixture tensor `name` (a fresh copy, so tests may write into it).
inline Tensor fixture(const std::string& name) {
  const auto& all = adversarial_fixture();
  auto it = all.find(name);
  if (it == all.end()) {
    ADD_FAILURE() << "no tensor " << name << " in adversarial.txt";
    return Tensor();
  }
  return it->second.clone();
}

// `actual` equals PyTorch's tensor `name` bit for bit (same dtype and shape; NaNs match NaNs).
inline void expect_exact(const Tensor& actual, const std::string& name) {
  Tensor expected = fixture(name);
  ASSERT_TRUE(actual.defined()) << name;
  ASSERT_TRUE(expected.defined()) << name;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << name;
  ASSERT_EQ(actual.shape(), expected.shape()) << name;
  if (!is_floating(actual.dtype())) {
    EXPECT_EQ(actual.to_vector<int64_t>(), expected.to_vector<int64_t>()) << name;
    return;
  }
  auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(e[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << name << " element " << i << ": " << a[i];
    } else {
      EXPECT_EQ(std::bit_cast<uint64_t>(a[i]), std::bit_cast<uint64_t>(e[i]))
          << name << " element " << i << ": " << a[i] << " vs PyTorch " << e[i];
    }
  }
}

// `actual` is within rtol of PyTorch's tensor `name` (for results whose rounding differs).
inline void expect_near_fixture(const Tensor& actual, const std::string& name, double rtol,
                                double atol = 0) {
  Tensor expected = fixture(name);
  ASSERT_TRUE(actual.defined()) << name;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << name;
  ASSERT_EQ(actual.shape(), expected.shape()) << name;
  EXPECT_TRUE(allclose(actual, expected, rtol, atol, /*equal_nan=*/true))
      << name << "\nactual:\n"
      << actual << "\nPyTorch:\n"
      << expected;
}

}  // namespace ember::test
