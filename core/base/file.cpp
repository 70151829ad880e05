// Writing a file whole or not at all: the one writer under every file Ember saves (safetensors,
// checkpoints, pages, pictures), streamed or from one string.
#include "core/base/file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
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

std::optional<uint64_t> detail::free_bytes(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0 || fs.f_frsize == 0 || fs.f_blocks == 0) return {};
  const uint64_t blocks = fs.f_bavail;
  return blocks > UINT64_MAX / fs.f_frsize ? UINT64_MAX : blocks * fs.f_frsize;
}

std::optional<uint64_t> detail::file_size_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
  return static_cast<uint64_t>(limit.rlim_cur);
}

std::string detail::gigabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return text;
}

detail::AtomicFile::AtomicFile(const std::string& path, const char* op)
    : path_(path), target_(path), op_(op) {
  // An existing file that is not a regular one (a device such as /dev/null, a pipe) is written in
  // place; anything else goes to a new file beside the target, renamed over it only once every
  // byte is written, flushed to the disk and closed without error: a full disk or a crash never
  // leaves a half-written file where a good one was.
  struct stat st {};
  special_ = ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  check(!special_ || !S_ISDIR(st.st_mode), op, ": cannot write '", path, "': it is a directory");
  if (!special_) {
    // Through a symbolic link: replace the file it names, not the link.
    std::error_code ec;
    const auto resolved = std::filesystem::weakly_canonical(path, ec);
    if (!ec) target_ = resolved.string();
  }
  static std::atomic<uint64_t> counter{0};
  temp_ = special_ ? path
                   : target_ + ".tmp-" + std::to_string(::getpid()) + "-" +
                         std::to_string(counter.fetch_add(1));
  // A FIFO is opened without waiting for a reader: one that has none is an error (ENXIO), not
  // a wait without end; the writes then block as usual.
  const bool fifo = special_ && S_ISFIFO(st.st_mode);
  fd_ = special_ ? ::open(path.c_str(), O_WRONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0))
                 : ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0 && fifo && errno == ENXIO) {
    fail(op, ": cannot write '", path, "': it is a FIFO that no program reads");
  }
  if (fd_ < 0) fail(op, ": cannot open '", temp_, "' for writing: ", errno_text(errno));
  if (fifo) ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  // The file it replaces keeps its permissions (a private file stays private): the new file
  // gets the old one's read, write and execute bits, not the umask's.
  struct stat old {};
  if (!special_ && ::stat(target_.c_str(), &old) == 0 && S_ISREG(old.st_mode) &&
      ::fchmod(fd_, old.st_mode & 0777) != 0) {
    give_up("setting the permissions of", errno);
  }
}

detail::AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;  // committed, or given up
  ::close(fd_);
  if (!special_) ::unlink(temp_.c_str());
}

void detail::AtomicFile::give_up(const char* what, int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!special_) ::unlink(temp_.c_str());
  fail(op_, ": ", what, " '", path_, "' failed: ", errno_text(error),
       special_ ? "" : " (the file was not replaced)");
}

void detail::AtomicFile::reserve(uint64_t bytes) {
  check(fd_ >= 0, op_, ": '", path_, "' is already committed");
  if (special_ || bytes == 0) return;
  // The space free (free_bytes, read at the new file): a file larger than that is refused,
  // whatever the file system would do below.
  if (const auto free = free_bytes(temp_); free && bytes > *free) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_.c_str());
    fail(op_, ": writing '", path_, "' needs ", bytes, " bytes (", gigabytes(bytes),
         "); its file system has ", *free, " bytes free (", gigabytes(*free),
         ") (the file was not replaced)");
  }
  // The process's file size limit (ulimit -f, RLIMIT_FSIZE): a write past it would end the
  // process with SIGXFSZ (or fail with EFBIG where the signal is ignored), half-way through.
  if (const auto limit = file_size_limit(); limit && bytes > *limit) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_.c_str());
    fail(op_, ": writing '", path_, "' needs ", bytes, " bytes (", gigabytes(bytes),
         "); the process's file size limit (ulimit -f) is ", *limit,
         " bytes (the file was not replaced)");
  }
#ifdef __linux__
  // The blocks themselves, claimed without changing the file's size (the writes fill them): the
  // space cannot go to another process between this check and the last write.
  if (bytes <= static_cast<uint64_t>(INT64_MAX) &&
      ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) != 0 &&
      (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) {
    give_up("reserving space for", errno);
  }
#endif
}

void detail::AtomicFile::write(std::string_view bytes) {
  check(fd_ >= 0, op_, ": '", path_, "' is already committed");
  if (!write_all(fd_, bytes.data(), bytes.size())) give_up("writing", errno);
}

void detail::AtomicFile::commit() {
  check(fd_ >= 0, op_, ": '", path_, "' is already committed");
  // fsync: the data must be on the disk before the rename makes it the file (devices and pipes
  // may not support it: EINVAL / EROFS there mean nothing to flush).
  if (::fsync(fd_) != 0 && !(special_ && (errno == EINVAL || errno == EROFS))) {
    give_up("flushing", errno);
  }
  const int fd = fd_;
  fd_ = -1;  // closed below, whatever close says
  if (::close(fd) != 0) give_up("closing", errno);
  if (special_) return;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) give_up("renaming the new file over", errno);
  // The rename is an entry of the directory: flushed too, or a crash could bring back the old
  // file (a file system that cannot flush a directory says EINVAL: nothing to do there).
  const std::string dir = std::filesystem::path(target_).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail(op_, ": cannot open the directory of '", path_, "': ", errno_text(errno));
  const bool flushed = ::fsync(dir_fd) == 0 || errno == EINVAL;
  const int error = errno;
  ::close(dir_fd);
  check(flushed, op_, ": flushing the directory of '", path_, "' failed: ", errno_text(error),
        " (the new file is in place)");
}

void detail::write_file(const std::string& path, std::string_view bytes, const char* op) {
  AtomicFile file(path, op);
  file.reserve(bytes.size());
  file.write(bytes);
  file.commit();
}

}  // namespace ember
