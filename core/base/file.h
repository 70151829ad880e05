// Writing a file whole or not at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember::detail {

// A file written through a temporary file beside `path`: write() appends bytes as they come (a
// checkpoint streams its tensors, never holding a second copy of them), commit() flushes the data
// to the disk (fsync), renames the temporary file over `path` and flushes the directory, so that
// the new name survives a crash. Every failure is an ember::Error starting with `op` and leaves a
// file that was at `path` as it was; a file not committed (an exception on the way) is removed by
// the destructor. An existing device or pipe (/dev/null) is written in place;
// a FIFO that no program reads is an error, not a wait for a reader.
class AtomicFile {
 public:
  AtomicFile(const std::string& path, const char* op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Before the first write: claims `bytes` of the disk for the file, or gives up at once (an
  // ember::Error naming the size and the space free, or the file size limit) when its file
  // system or the process's limit (ulimit -f) cannot hold them, so that a save too big for the
  // disk fails before writing, not after gigabytes. A file system
  // that cannot reserve space (or a device) is written as before, its writes checked.
  void reserve(uint64_t bytes);
  void write(std::string_view bytes);
  void commit();

 private:
  [[noreturn]] void give_up(const char* what, int error);
  std::string path_, target_, temp_;  // as given, with links resolved, the file being written
  const char* op_;
  bool special_ = false;  // a device or a pipe, written in place
  int fd_ = -1;
};

// The bytes free on the file system holding `path` (an existing file or directory): what an
// ordinary process may still use, as df shows it. nullopt when the file system cannot say (an
// error, or no blocks reported: some virtual and network file systems do not know their size).
std::optional<uint64_t> free_bytes(const std::string& path);

// The largest file this process may write (RLIMIT_FSIZE, what `ulimit -f` sets); nullopt when
// there is no limit.
std::optional<uint64_t> file_size_limit();

// "1.95 GB": a size for people, in decimal units as df -H prints them.
std::string gigabytes(uint64_t bytes);

// `bytes` to `path` whole or not at all (an AtomicFile). Under save_safetensors, pages and
// pictures.
void write_file(const std::string& path, std::string_view bytes, const char* op);

}  // namespace ember::detail
