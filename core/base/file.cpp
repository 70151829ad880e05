// Writing a file whole or not at all: the one writer under every file Ember saves (safetensors,
// checkpoints, pages, pictures).
#include "core/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "core/base/error.h"

namespace ember {

namespace {

std::string errno_text(int error) { return std::generic_category().message(error); }

// Writes all of `bytes` to fd; false (errno set) on failure. A short write is retried, so a
// full disk ends in ENOSPC rather than a silently short file.
bool write_all(int fd, const char* bytes, std::size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, std::min<std::size_t>(size, 1u << 30));
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

}  // namespace

void detail::write_file(const std::string& path, std::string_view bytes, const char* op) {
  // An existing file that is not a regular one (a device such as /dev/null, a pipe) is written in
  // place; anything else goes to a new file beside the target, renamed over it only once every
  // byte is written, flushed to the disk and closed without error: a full disk or a crash never
  // leaves a half-written file where a good one was.
  struct stat st {};
  const bool special = ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  check(!special || !S_ISDIR(st.st_mode), op, ": cannot write '", path, "': it is a directory");
  std::string target = path;
  if (!special) {
    // Through a symbolic link: replace the file it names, not the link.
    std::error_code ec;
    const auto resolved = std::filesystem::weakly_canonical(path, ec);
    if (!ec) target = resolved.string();
  }
  static std::atomic<uint64_t> counter{0};
  const std::string temp = special ? path
                                   : target + ".tmp-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter.fetch_add(1));
  const int fd = special ? ::open(path.c_str(), O_WRONLY | O_CLOEXEC)
                         : ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    fail(op, ": cannot open '", special ? path : temp, "' for writing: ", errno_text(errno));
  }
  auto give_up = [&](const char* what, int error) {
    if (!special) ::unlink(temp.c_str());
    fail(op, ": ", what, " '", path, "' failed: ", errno_text(error),
         special ? "" : " (the file was not replaced)");
  };
  if (!write_all(fd, bytes.data(), bytes.size())) {
    const int error = errno;
    ::close(fd);
    give_up("writing", error);
  }
  // fsync: the data must be on the disk before the rename makes it the file (devices and pipes
  // may not support it: EINVAL / EROFS there mean nothing to flush).
  if (::fsync(fd) != 0 && !(special && (errno == EINVAL || errno == EROFS))) {
    const int error = errno;
    ::close(fd);
    give_up("flushing", error);
  }
  if (::close(fd) != 0) give_up("closing", errno);
  if (!special && ::rename(temp.c_str(), target.c_str()) != 0) {
    give_up("renaming the new file over", errno);
  }
}

}  // namespace ember
