// Reads tests/fixtures/sampling.txt (scripts/fixtures/gen_sampling.py): one PyTorch result per
// line, "<case> <dtype> <shape> = all <hex bit patterns>".
#pragma once

#include <bit>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/options.h"
#include "core/tensor.h"
#include "test_helpers.h"

namespace ember::test {

// The tensor of case `name`, exactly as PyTorch produced it.
inline Tensor sampling_fixture(const std::string& name) {
  static const std::map<std::string, Tensor> cases = [] {
    std::map<std::string, Tensor> out;
    std::ifstream in(fixture_path("sampling.txt"));
    check(in.good(), "cannot open ", fixture_path("sampling.txt"));
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string key, dtype, shape_text, equals, all;
      fields >> key >> dtype >> shape_text >> equals >> all;
      const Shape shape = parse_shape(shape_text);
      std::vector<std::string> words;
      for (std::string w; fields >> w;) words.push_back(w);
      if (dtype == "i64") {
        std::vector<int64_t> v;
        for (const auto& w : words) v.push_back(static_cast<int64_t>(std::stoull(w, nullptr, 16)));
        out.emplace(key, from_vector(v, shape));
      } else if (dtype == "f32") {
        std::vector<float> v;
        for (const auto& w : words) {
          v.push_back(std::bit_cast<float>(static_cast<uint32_t>(std::stoul(w, nullptr, 16))));
        }
        out.emplace(key, from_vector(v, shape));
      } else {
        check(dtype == "f64", "sampling.txt: unknown dtype ", dtype);
        std::vector<double> v;
        for (const auto& w : words) v.push_back(std::bit_cast<double>(std::stoull(w, nullptr, 16)));
        out.emplace(key, from_vector(v, shape, kFloat64));
      }
    }
    return out;
  }();
  auto it = cases.find(name);
  check(it != cases.end(), "sampling.txt has no case ", name);
  return it->second;
}

}  // namespace ember::test
