// safetensors: round trips, files from PyTorch (tests/fixtures/dtypes_pytorch.safetensors, written
// by scripts/fixtures/gen_safetensors.py), a file for PyTorch (ember_written.safetensors, read
// back by that script) and a table of hostile files. Modules saved and loaded:
// tests/nn/test_safetensors_modules.cpp; training checkpoints: tests/optim/test_checkpoint.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/ember.h"
#include "core/io/safetensors.h"
#include "tests/core/io/safetensors_test_util.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::file_with;
using test::fixture_path;
using test::parse;
using test::read_bytes;
using test::temp_path;

const Tensor* find(const SafetensorsFile& f, const std::string& name) {
  for (const auto& [key, t] : f.tensors) {
    if (key == name) return &t;
  }
  return nullptr;
}

// The tensors ember_written.safetensors holds (the script checks the same list).
NamedTensorList ember_written_tensors() {
  Tensor w = arange(6, DType::Float32).reshape({2, 3}) / 4.0;
  return {{"weight", w},
          {"double", from_vector({0.1, -2.5}, {2}, DType::Float64)},
          {"ids", from_vector({3, -1}, {1, 2}, DType::Int64)},
          {"flags", from_vector({1, 0, 0}, {3}, DType::Bool)},
          {"transposed", w.t()}};
}

TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  NamedTensorList tensors = ember_written_tensors();
  tensors.emplace_back("scalar", scalar_tensor(2.5, DType::Float64));
  tensors.emplace_back("empty", zeros({0, 3}));
  const std::string path = temp_path("roundtrip.safetensors");
  save_safetensors(tensors, path, {{"epoch", "3"}});
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"epoch", "3"}}));
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const Tensor* got = find(f, name);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->dtype(), t.dtype());
    EXPECT_EQ(got->shape(), t.shape());
    EXPECT_TRUE(equal(*got, t));
  }
  // The file is 8 + header + data bytes, the data 8-byte aligned.
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + (24 + 16 + 16 + 3 + 24 + 8 + 0));
}

// Ember writes exactly the committed file, which the Python script reads back as the same
// tensors (scripts/fixtures/gen_safetensors.py checks it).
TEST(Safetensors, WritesTheCommittedFile) {
  const std::string bytes = serialize_safetensors(ember_written_tensors(),
                                                  {{"epoch", "3"}, {"note", "written by Ember"}});
  if (std::getenv("EMBER_WRITE_FIXTURES")) {
    std::ofstream(fixture_path("ember_written.safetensors"), std::ios::binary) << bytes;
  }
  EXPECT_EQ(bytes, read_bytes(fixture_path("ember_written.safetensors")));
}

// save_safetensors streams (the header, then each tensor from its own storage, a transposed one
// made contiguous alone): the file holds serialize_safetensors' bytes, and so the committed file's.
TEST(Safetensors, SavedFileIsTheSerializedBytes) {
  const std::map<std::string, std::string> metadata{{"epoch", "3"}, {"note", "written by Ember"}};
  const std::string path = temp_path("streamed.safetensors");
  save_safetensors(ember_written_tensors(), path, metadata);
  EXPECT_EQ(read_bytes(path), serialize_safetensors(ember_written_tensors(), metadata));
  EXPECT_EQ(read_bytes(path), read_bytes(fixture_path("ember_written.safetensors")));
}

TEST(Safetensors, ReadsPyTorchDtypes) {
  SafetensorsFile f = load_safetensors(fixture_path("dtypes_pytorch.safetensors"));
  EXPECT_EQ(f.metadata.at("what"), "dtypes");
  auto expect = [&](const std::string& name, DType dtype, const Shape& shape,
                    const std::vector<double>& values) {
    SCOPED_TRACE(name);
    const Tensor* t = find(f, name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype(), dtype);
    test::expect_tensor(*t, shape, values, 0.0);
  };
  expect("f32", DType::Float32, {2, 2}, {1.5, -2.25, 0.1f, 3e38f});
  expect("f64", DType::Float64, {3}, {0.1, -1e300, 5e-324});
  expect("bool", DType::Bool, {3}, {1, 0, 1});
  expect("f16", DType::Float32, {5}, {1.0, -0.5, 65504.0, 5.9604644775390625e-08, INFINITY});
  expect("bf16", DType::Float32, {4}, {1.0, -3.140625, 9.969209968386869e+37, -INFINITY});
  expect("i32", DType::Int64, {2}, {-7, 2147483647});
  expect("u8", DType::Int64, {2}, {0, 255});
  expect("scalar", DType::Float32, {}, {2.5});
  expect("empty", DType::Float32, {0, 3}, {});
  const Tensor* i64 = find(f, "i64");
  ASSERT_NE(i64, nullptr);
  EXPECT_EQ(i64->to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MAX, 0, 42}));
}

// ---- hostile files ----

TEST(Safetensors, HostileFilesAreErrors) {
  const std::string four(4, '\0');
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  std::string huge(8, '\0');
  const uint64_t big = 200ull << 20;
  std::memcpy(huge.data(), &big, 8);
  struct Case {
    const char* what;
    std::string bytes;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"empty file", "", "too short for the 8-byte header size"},
      {"truncated size", std::string(5, '\0'), "too short"},
      {"header larger than the file", file_with("{}", "", 10), "larger than the file"},
      {"header larger than 100 MB", huge + "{}", "larger than the limit"},
      {"not an object", file_with("[1, 2]"), "must be a JSON object"},
      {"invalid JSON", file_with("{\"a\": }"), "invalid JSON header"},
      {"invalid UTF-8", file_with("{\"\xff\xfe\": 1}"), "invalid JSON header"},
      {"deep nesting", file_with("{\"a\": " + deep + "}"), "nests deeper"},
      {"nested in shape",
       file_with(R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", four),
       "nests deeper"},
      {"duplicate names",
       file_with(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           four),
       "duplicate tensor name 'a'"},
      {"unknown dtype", file_with(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", four),
       "unknown dtype 'Q7'"},
      {"entry not an object", file_with(R"({"a":3})"), "entry 'a' must be an object"},
      {"missing offsets", file_with(R"({"a":{"dtype":"F32","shape":[1]}})", four),
       "needs data_offsets"},
      {"unknown field",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", four),
       "unknown field 'x'"},
      {"negative dim",
       file_with(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four),
       "must be a non-negative integer"},
      {"float offset",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}})", four),
       "must be a non-negative integer"},
      {"offsets out of range",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", four),
       "out of range"},
      {"offsets reversed",
       file_with(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", four),
       "out of range"},
      {"size mismatch",
       file_with(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,4]}})", four),
       "needs 8 bytes, data_offsets give 4"},
      {"huge shape",
       file_with(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})",
                 four),
       "has too many elements"},
      {"overlapping",
       file_with(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           std::string(8, '\0')),
       "ranges overlap or leave a hole"},
      {"hole",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
       "ranges overlap or leave a hole"},
      {"trailing bytes",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, '\0')),
       "the tensors cover 4 bytes of data, the file has 8"},
      {"bool byte 2",
       file_with(R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x02"),
       "expected 0 or 1"},
      {"metadata not strings", file_with(R"({"__metadata__":{"a":1}})"), "must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_error([&] { parse(c.bytes); }, c.error);
  }
  // A truncated copy of a valid file, at every length.
  const std::string good = serialize_safetensors(ember_written_tensors(), {{"a", "b"}});
  for (std::size_t len = 0; len < good.size(); ++len) {
    EXPECT_NE(test::error_of([&] { parse(good.substr(0, len)); }), "") << "length " << len;
  }
  expect_error([] { load_safetensors("/nonexistent/x.safetensors"); }, "cannot open");
  expect_error(
      [] {
        save_safetensors({{"a", Tensor()}}, temp_path("u.safetensors"));
      },
      "undefined");
  expect_error(
      [] {
        save_safetensors({{"a", ones({1})}, {"a", ones({1})}}, temp_path("d.safetensors"));
      },
      "duplicate tensor name 'a'");
}

}  // namespace
}  // namespace ember
