// The checks every example program makes before its work (examples/common/program.h), called
// directly: here, the room on the disk for what a run writes at its end.
#include "examples/common/program.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/base/error.h"

namespace {

std::string error_of(uint64_t bytes, const std::string& dir) {
  try {
    ember::examples::check_free_space(dir, bytes, "train_gpt: the checkpoint",
                                      "choose another --out, or pass --no-save");
  } catch (const ember::Error& e) {
    return e.what();
  }
  return "";
}

// 2^62 bytes (4.6 EB) fit on no disk: refused, naming the size, the directory, the space free
// and what to do; one byte fits.
TEST(ProgramChecks, ACheckpointTheDiskCannotHoldIsRefusedBeforeTheRun) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string error = error_of(uint64_t{1} << 62, dir);
  EXPECT_EQ(error.rfind("train_gpt: the checkpoint needs 4611686018.43 GB (4611686018427387904 "
                        "bytes) in '" +
                            dir + "' and its file system has ",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find(" GB free: choose another --out, or pass --no-save"), std::string::npos)
      << error;
  EXPECT_EQ(error_of(1, dir), "");
}

}  // namespace
