// safetensors, strictly: the header's JSON (a key repeated at any level, anything but spaces
// after the object, control characters in names), the writer (never a file the reader refuses,
// every write checked, a failed write leaves the old file) and the reader (the header before
// the data: /dev/zero, a directory, a pipe).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
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
using test::parse;
using test::read_bytes;
using test::temp_path;

const std::string kFour(4, '\0');
const std::string kEntry = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";

TEST(SafetensorsStrict, DuplicateKeysAtEveryLevelAreErrors) {
  struct Case {
    const char* what;
    std::string header;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"dtype twice (the last would win: F64 read as F32)",
       R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,4],"dtype":"F32"}})",
       "entry 'a' has the field 'dtype' twice"},
      {"shape twice", R"({"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}})",
       "entry 'a' has the field 'shape' twice"},
      {"data_offsets twice",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8],"data_offsets":[0,4]}})",
       "entry 'a' has the field 'data_offsets' twice"},
      {"metadata key twice", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}," + kEntry + "}",
       "duplicate key 'k' in __metadata__"},
      {"__metadata__ twice", "{\"__metadata__\":{},\"__metadata__\":{}," + kEntry + "}",
       "duplicate tensor name '__metadata__'"},
      {"tensor name twice", "{" + kEntry + "," + kEntry + "}", "duplicate tensor name 'a'"},
      // The same key in two different objects is not a duplicate.
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_error([&] { parse(file_with(c.header, kFour)); }, c.error);
  }
  // Keys that repeat across objects are fine: two entries both have "dtype", and a metadata key
  // may be called like a tensor.
  SafetensorsFile ok = parse(file_with(
      R"({"__metadata__":{"a":"x","dtype":"y"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      kFour + kFour));
  EXPECT_EQ(ok.tensors.size(), 2u);
  EXPECT_EQ(ok.metadata.at("dtype"), "y");
}

// A key may hold a NUL (JSON writes it \u0000): an error message shows it escaped, since what()
// would end at the NUL and drop the rest of the message.
TEST(SafetensorsStrict, AKeyWithANulIsShownEscapedInTheMessage) {
  const std::string nul_key("k\0x", 3);
  expect_error(
      [&] {
        save_safetensors({}, temp_path("nul_key.safetensors"), {{nul_key, "\xff"}});
      },
      "the metadata value of 'k\\u0000x' is not valid UTF-8");
  expect_error([&] { parse(file_with(R"({"__metadata__":{"k\u0000x":1}})")); },
               "__metadata__ value of 'k\\u0000x' must be a string");
  expect_error([&] { parse(file_with(R"({"__metadata__":{"k\u0000x":"1","k\u0000x":"2"}})")); },
               "duplicate key 'k\\u0000x' in __metadata__");
  expect_error(
      [&] {
        parse(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"d\u0000":1}})",
                        kFour));
      },
      "entry 'a' has an unknown field 'd\\u0000'");
}

TEST(SafetensorsStrict, OnlySpacesMayFollowTheHeaderObject) {
  const std::string object = "{" + kEntry + "}";
  // Spaces are the format's padding.
  EXPECT_EQ(parse(file_with(object + "        ", kFour)).tensors.size(), 1u);
  struct Case {
    const char* what;
    std::string header;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"NUL then garbage (nlohmann stops at the NUL)", object + std::string("\0garbage{{{", 11),
       "holds a NUL byte at offset 54"},
      {"NUL padding", object + std::string(3, '\0'), "holds a NUL byte"},
      {"newline", object + "\n", "followed only by spaces (0x20)"},
      {"tab then spaces", object + "\t  ", "followed only by spaces (0x20)"},
      {"a second object", object + "{}", "one JSON object followed only by spaces"},
      {"text after", object + " x}", "one JSON object followed only by spaces"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_error([&] { parse(file_with(c.header, kFour)); }, c.error);
  }
}

TEST(SafetensorsStrict, TensorNamesAreValidUtf8WithoutControlCharacters) {
  auto header_named = [](const std::string& json_name) {
    return "{\"" + json_name + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  };
  struct Case {
    const char* what;
    std::string name;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"escaped NUL", "a\\u0000b", "holds the control character U+0000 at offset 1"},
      {"escaped newline", "a\\nb", "holds the control character U+000A"},
      {"escaped DEL", "\\u007f", "holds the control character U+007F"},
      {"C1 control", "x\\u0085", "holds the control character U+0085"},
      {"raw invalid UTF-8", "a\xff", "invalid JSON header"},
      {"empty name", "", "a tensor name is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_error([&] { parse(file_with(header_named(c.name), kFour)); }, c.error);
  }
  // Non-ASCII names are fine.
  SafetensorsFile ok = parse(file_with(header_named("poids.\xc3\xa9t\xc3\xa9"), kFour));
  EXPECT_EQ(ok.tensors[0].first, "poids.\xc3\xa9t\xc3\xa9");

  // The writer refuses the same names, and text that is not UTF-8 (the JSON writer would throw
  // its own exception type).
  expect_error(
      [] {
        serialize_safetensors({{std::string("a\0b", 3), ones({1})}});
      },
      "holds the control character U+0000");
  expect_error([] { serialize_safetensors({{"a\tb", ones({1})}}); }, "U+0009");
  expect_error([] { serialize_safetensors({{"\xc3", ones({1})}}); }, "is not valid UTF-8");
  expect_error(
      [] {
        serialize_safetensors({{"a", ones({1})}}, {{"k", "\xed\xa0\x80"}});
      },
      "the metadata value of 'k' is not valid UTF-8");
  expect_error(
      [] {
        serialize_safetensors({{"a", ones({1})}}, {{"\xff", "v"}});
      },
      "the metadata key");
  // Metadata values may hold newlines (they are text, not names).
  EXPECT_EQ(
      parse(serialize_safetensors({{"a", ones({1})}}, {{"k", "line\nline"}})).metadata.at("k"),
      "line\nline");
}

TEST(SafetensorsStrict, WriterRefusesAHeaderTheReaderWouldRefuse) {
  // A 101 MB header: the file would be unreadable by Ember and by the Rust crate.
  const std::string big(101u << 20, 'x');
  expect_error(
      [&] {
        serialize_safetensors({{"a", ones({1})}}, {{"k", big}});
      },
      "more than the format's limit of 104857600");
}

TEST(SafetensorsStrict, WritingToAFullDeviceIsAnError) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  expect_error(
      [] {
        save_safetensors({{"a", ones({1000})}}, "/dev/full");
      },
      "save_safetensors: writing '/dev/full' failed: No space left on device");
  // /dev/full is written in place, never replaced by a regular file.
  struct stat st {};
  ASSERT_EQ(stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(SafetensorsStrict, AFailedWriteLeavesTheOldFile) {
  // A file size limit (ulimit -f) too small for the file: the save is refused before its first
  // byte, as one too big for the disk is (without the check, a write would fail part-way with
  // EFBIG, or SIGXFSZ would end the process).
  const std::string dir = temp_path("strict_failed_write");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.safetensors";
  save_safetensors({{"good", full({4}, 7.0)}}, path);
  const std::string good = read_bytes(path);

  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old), 0);
  struct rlimit limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &limit), 0);
  struct rlimit small = limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string error = test::error_of([&] {
    save_safetensors({{"big", ones({100000})}}, path);
  });
  setrlimit(RLIMIT_FSIZE, &limit);
  sigaction(SIGXFSZ, &old, nullptr);

  EXPECT_NE(error.find("save_safetensors: writing '" + path + "' needs 400"), std::string::npos)
      << error;
  EXPECT_NE(error.find("; the process's file size limit (ulimit -f) is 4096 bytes"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("the file was not replaced"), std::string::npos) << error;
  EXPECT_EQ(read_bytes(path), good);
  // No temporary file is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
  EXPECT_EQ(load_safetensors(path).tensors[0].second.to_vector<double>()[0], 7.0);
}

// A file larger than the disk's free space (4 PiB of data, one float expanded) is refused before
// its first byte: the error names the size and the space free, the old file stays, and no
// temporary file is left. (Without the check, the writer would fill the disk, or fail on making
// the tensor contiguous: the test would still fail.)
TEST(SafetensorsStrict, AFileTheDiskCannotHoldIsRefusedBeforeWriting) {
  const std::string dir = temp_path("strict_too_big");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.safetensors";
  save_safetensors({{"good", full({4}, 7.0)}}, path);
  const std::string good = read_bytes(path);

  const int64_t n = int64_t{1} << 50;
  const std::string error = test::error_of([&] {
    save_safetensors({{"huge", ones({1}).expand({n})}}, path);
  });
  // 4 * 2^50 bytes of data and the header's few dozen.
  EXPECT_NE(error.find("save_safetensors: writing '" + path + "' needs 45035996273705"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(" bytes (4503599.63 GB); its file system has "), std::string::npos) << error;
  EXPECT_NE(error.find("bytes free"), std::string::npos) << error;
  EXPECT_NE(error.find("(the file was not replaced)"), std::string::npos) << error;
  EXPECT_EQ(read_bytes(path), good);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
}

// Data past byte 2^64 (2^62 float64 values: 2^65 bytes) cannot have offsets in the header: an
// error, not offsets that wrap around.
TEST(SafetensorsStrict, DataPastByte2To64IsAnError) {
  const Tensor t = zeros({1}, DType::Float64).expand({int64_t{1} << 62});
  expect_error(
      [&] {
        serialize_safetensors({{"t", t}});
      },
      "save_safetensors: tensor 't' of shape [4611686018427387904] would end past byte "
      "2^64 of the data");
  expect_error(
      [&] {
        save_safetensors({{"a", ones({2})}, {"t", t}}, "/dev/null");
      },
      "would end past byte 2^64");
}

TEST(SafetensorsStrict, WritesThroughASymlinkReplaceTheTarget) {
  const std::string dir = temp_path("strict_symlink");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  save_safetensors({{"a", ones({1})}}, dir + "/real.safetensors");
  std::filesystem::create_symlink("real.safetensors", dir + "/link.safetensors");
  save_safetensors({{"b", full({2}, 3.0)}}, dir + "/link.safetensors");
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.safetensors"));
  EXPECT_EQ(load_safetensors(dir + "/real.safetensors").tensors[0].first, "b");
  expect_error([&] { save_safetensors({{"a", ones({1})}}, dir); }, "it is a directory");
  expect_error(
      [&] {
        save_safetensors({{"a", ones({1})}}, dir + "/missing/x.safetensors");
      },
      "cannot open");
}

// The new file replaces the old one with its permissions: a checkpoint kept private (0600) stays
// private, whatever the process's umask would give a new file.
TEST(SafetensorsStrict, AReplacedFileKeepsItsPermissions) {
  const std::string path = temp_path("strict_mode.safetensors");
  std::filesystem::remove(path);
  save_safetensors({{"a", ones({1})}}, path);
  for (const mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0444}}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    save_safetensors({{"b", ones({2})}}, path);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
    EXPECT_EQ(load_safetensors(path).tensors[0].first, "b");
    ASSERT_EQ(chmod(path.c_str(), 0644), 0);
    save_safetensors({{"a", ones({1})}}, path);
  }
}

TEST(SafetensorsStrict, ReaderChecksTheHeaderBeforeTheData) {
  // /dev/zero: an endless stream, refused after its first 8 bytes (a header size of 0).
  if (access("/dev/zero", R_OK) == 0) {
    expect_error([] { load_safetensors("/dev/zero"); },
                 "the header must be a JSON object starting with '{'");
  }
  expect_error([] { load_safetensors(::testing::TempDir()); }, "is a directory");
  // A header larger than the file, before anything else is read.
  const std::string path = temp_path("strict_short.safetensors");
  {
    std::string bytes(8, '\0');
    const uint64_t n = 1000;
    std::memcpy(bytes.data(), &n, 8);
    std::ofstream(path, std::ios::binary) << bytes << "{}";
  }
  expect_error([&] { load_safetensors(path); }, "header size 1000 is larger than the file");
  // A file with more data than its header covers.
  const std::string extra = temp_path("strict_extra.safetensors");
  std::ofstream(extra, std::ios::binary) << serialize_safetensors({{"a", ones({1})}}) << "xyz";
  expect_error([&] { load_safetensors(extra); }, "the file has 7");
}

TEST(SafetensorsStrict, ReadsFromAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string bytes = serialize_safetensors({{"a", full({3}, 2.0)}}, {{"k", "v"}});
  ASSERT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fds[1]);
  SafetensorsFile file = load_safetensors("/dev/fd/" + std::to_string(fds[0]));
  close(fds[0]);
  EXPECT_EQ(file.metadata.at("k"), "v");
  test::expect_values(file.tensors.at(0).second, {2, 2, 2});
}

// A FIFO that no program opens at its other end: a save is refused (no reader) and a load reads
// it as empty (no writer), each an error naming the file, never a wait without end.
TEST(SafetensorsStrict, AFifoWithNoProgramAtItsOtherEndIsAnErrorNotAWait) {
  const std::string path = temp_path("strict_lonely.fifo");
  std::filesystem::remove(path);
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  expect_error(
      [&] {
        save_safetensors({{"a", ones({1})}}, path);
      },
      "save_safetensors: cannot write '" + path + "': it is a FIFO that no program reads");
  expect_error([&] { load_safetensors(path); },
               "file of 0 bytes is too short for the 8-byte header size (file '" + path + "')");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ember
