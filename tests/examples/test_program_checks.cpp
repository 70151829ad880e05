// The checks every example program makes before its work (examples/common/program.h), called
// directly: the room on the disk for what a run writes at its end, the text files it reads (a
// FIFO, a sparse file larger than the cap) and the output files it writes.
#include "examples/common/program.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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

// The message of the ember::Error `body` throws ("" when it throws none).
template <class Body>
std::string message_of(Body body) {
  try {
    body();
  } catch (const ember::Error& e) {
    return e.what();
  }
  return "";
}

// A fresh directory under the system's temporary one, removed at the end of the test.
struct ScratchDir {
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};

// A FIFO that no program writes to is refused at once (the open does not wait for a writer,
// which would never come), naming the flag and the file.
TEST(ProgramChecks, ATextThatIsAFifoWithoutAWriterIsRefusedNotWaitedFor) {
  const ScratchDir dir("ember_program_checks_fifo");
  const std::string fifo = (dir.path / "text.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(message_of([&] { ember::examples::read_text_file(fifo, "text"); }),
            "text: '" + fifo +
                "' is a FIFO that gave no bytes (no program writes to it), expected a text file");
}

// A regular file larger than the cap is refused from its size, before a byte is read: a sparse
// file of 100 GB (which the file system does not store) is not read 64 MiB deep first.
TEST(ProgramChecks, ATextLargerThanTheCapIsRefusedFromItsSize) {
  const ScratchDir dir("ember_program_checks_sparse");
  const std::string path = (dir.path / "huge.txt").string();
  std::ofstream(path) << "x";
  std::filesystem::resize_file(path, uint64_t{100} << 30);
  // The cap of 1 byte: a file of 2 bytes is refused as the sparse one is.
  const std::string small = (dir.path / "two.txt").string();
  std::ofstream(small) << "ab";
  EXPECT_EQ(message_of([&] { ember::examples::read_text_file(path, "text"); }),
            "text: '" + path + "' is larger than 64 MiB (the most this program reads)");
  EXPECT_NE(message_of([&] {
              ember::examples::read_text_file(small, "--reference", 1);
            }).find("--reference: '" + small + "' is larger than"),
            std::string::npos);
  EXPECT_EQ(ember::examples::read_text_file(small, "text"), "ab");
}

// An output file that is a FIFO (or a socket) would hold the run's end until a reader comes:
// refused before the run, naming the flag, the file and what is expected; /dev/null is written.
TEST(ProgramChecks, AnOutputFileThatIsAFifoIsRefusedBeforeTheRun) {
  const ScratchDir dir("ember_program_checks_out_fifo");
  const std::string out = dir.path.string();
  ASSERT_EQ(::mkfifo((dir.path / "loss.svg").c_str(), 0600), 0);
  EXPECT_EQ(message_of([&] {
              ember::examples::check_output_files(out, {"checkpoint.safetensors", "loss.svg"});
            }),
            "--out: '" + out +
                "/loss.svg' is a FIFO; the run writes its loss.svg there, expected a regular "
                "file (or none)");
  EXPECT_EQ(message_of([&] { ember::examples::check_output_files("/dev", {"null"}); }), "");
}

}  // namespace
