// Helpers shared by the safetensors tests (tests/core/io/test_safetensors.cpp and
// test_safetensors_strict.cpp): a file's bytes, parsing bytes in memory, and
// building a file around a header of one's choosing. Header-only; a test file brings in what it
// uses with `using test::file_with;` and the like.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/io/safetensors.h"
#include "tests/test_helpers.h"

namespace ember::test {

// The whole file at `path` ("" when it cannot be read).
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// parse_safetensors over the bytes of a string.
inline SafetensorsFile parse(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// A safetensors file: the header's size (little-endian u64, plus `size_delta` to make it lie),
// `header`, then `data`.
inline std::string file_with(const std::string& header, const std::string& data = "",
                             int64_t size_delta = 0) {
  std::string out(8, '\0');
  const uint64_t n = header.size() + static_cast<uint64_t>(size_delta);
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

}  // namespace ember::test
