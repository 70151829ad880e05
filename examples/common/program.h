// What every example program does around its work: main's wrapper (any error becomes one line
// "<program>: <what>" on stderr and exit code 2, never an abort) and the checks of the files and
// directories a user names (a text read with a size cap, an output directory, a checkpoint), made
// before any training starts. Not part of the library.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "core/base/error.h"
#include "core/base/file.h"
#include "core/base/parallel.h"

namespace ember::examples {

// Runs `body` (main's work, returning the exit code); an ember::Error or any standard exception
// (a flag the command line refused, a filesystem_error, std::out_of_range...) that escapes it is
// printed as one line "<program>: <what>" on stderr, and the exit code is 2. So is a standard
// output that could not be written (a full disk, /dev/full, a closed descriptor): a run whose
// printed results are lost does not end with 0.
template <class Body>
int run_main(const char* program, Body&& body) noexcept {
  auto report = [program](const char* what) {
    std::string line = what;
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    const std::string prefix = std::string(program) + ": ";
    if (line.rfind(prefix, 0) == 0) line.erase(0, prefix.size());  // already named
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), line.c_str());
    return 2;
  };
  // A write past the file size limit (ulimit -f) fails with EFBIG, an error the program reports,
  // instead of ending it with SIGXFSZ half-way through a file.
  ::signal(SIGXFSZ, SIG_IGN);
  try {
    const int code = body();
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      const std::string why = errno != 0 ? std::string(": ") + std::strerror(errno) : "";
      report(("writing the standard output failed" + why).c_str());
      return code == 0 ? 2 : code;
    }
    return code;
  } catch (const std::bad_alloc&) {
    return report("out of memory (the settings ask for more than this machine has)");
  } catch (const std::exception& e) {
    return report(e.what());
  } catch (...) {
    return report("unknown error");
  }
}

// The largest thread count the programs accept (more only reaches the OpenMP runtime's limits).
inline constexpr int kMaxThreads = 256;

// The largest text the training programs read: a text is held in memory, and its ids take eight
// times as much; a device such as /dev/zero would otherwise be read forever.
inline constexpr std::uintmax_t kMaxTextBytes = 64u << 20;

// The whole file at `path` for the flag (or argument) `what`; a missing file, a directory, a file
// that cannot be read or one over `max_bytes` is an ember::Error naming it. A regular file's size
// is checked before any byte is read (a sparse file of 100 GB is refused at once); a device is
// read up to the cap, never forever; a FIFO is opened without waiting for a writer, and one that
// has none is refused, not waited for.
inline std::string read_text_file(const std::string& path, const std::string& what,
                                  std::uintmax_t max_bytes = kMaxTextBytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  // (A name too long, or under a file or a directory it may not search, is said as such.)
  check(!ec || ec == std::errc::no_such_file_or_directory, what, ": cannot read '", path,
        "': ", ec.message());
  check(std::filesystem::exists(status), what, ": cannot read '", path, "': no such file");
  check(!std::filesystem::is_directory(status), what, ": '", path,
        "' is a directory, expected a text file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  check(fd >= 0, what, ": cannot read '", path, "': ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  check(::fstat(fd, &st) == 0, what, ": cannot read '", path, "': ", std::strerror(errno));
  check(!S_ISDIR(st.st_mode), what, ": '", path, "' is a directory, expected a text file");
  const auto too_large = [&] {
    fail(what, ": '", path, "' is larger than ", max_bytes >> 20,
         " MiB (the most this program reads)");
  };
  if (S_ISREG(st.st_mode) && static_cast<std::uintmax_t>(st.st_size) > max_bytes) too_large();
  // Reads block again (a pipe waits for its writer's bytes), once the open has not waited.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    check(got >= 0, what, ": reading '", path, "' failed: ", std::strerror(errno));
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
    if (text.size() > max_bytes) too_large();
  }
  check(!text.empty() || !S_ISFIFO(st.st_mode), what, ": '", path,
        "' is a FIFO that gave no bytes (no program writes to it), expected a text file");
  return text;
}

// Makes the output directory `path` (--out) and checks that files can be written in it: a path
// naming a file, under a file or where nothing can be made is an ember::Error naming the flag.
inline void make_output_directory(const std::string& path, const std::string& flag = "--out") {
  check(!path.empty(), flag, ": expected a directory, got an empty path");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  check(!ec, flag, ": cannot make the directory '", path, "': ", ec.message());
  check(std::filesystem::is_directory(path, ec), flag, ": '", path,
        "' is a file, expected a directory");
  check(::access(path.c_str(), W_OK | X_OK) == 0, flag, ": cannot write in '", path,
        "': ", std::strerror(errno));
}

// The files a run writes in its output directory `dir` (--out), by name: one that is a directory
// could not be written at the run's end, after the training, and a FIFO or a socket would hold
// the run's end until a reader comes (or refuse it); refused before any work, an ember::Error
// naming the flag. (A missing file, a regular file or a device such as /dev/null is written.)
inline void check_output_files(const std::string& dir, const std::vector<std::string>& names,
                               const std::string& flag = "--out") {
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    check(!std::filesystem::is_directory(status), flag, ": '", path,
          "' is a directory; the run writes its ", name, " there");
    check(!std::filesystem::is_fifo(status) && !std::filesystem::is_socket(status), flag, ": '",
          path, "' is a ", std::filesystem::is_fifo(status) ? "FIFO" : "socket",
          "; the run writes its ", name, " there, expected a regular file (or none)");
  }
}

// Refuses, before any work, a run whose output could not be written at its end: the file system
// of `dir` must have `bytes` free (detail::free_bytes; one that cannot say is not checked, and the
// save itself claims its space first: core/base/file.cpp), and the process's file size limit
// (ulimit -f) must allow them. `what` names the file and `instead`
// what the user can do.
inline void check_free_space(const std::string& dir, uint64_t bytes, const std::string& what,
                             const std::string& instead) {
  const auto free = detail::free_bytes(dir);
  check(!free || bytes <= *free, what, " needs ", detail::gigabytes(bytes), " (", bytes,
        " bytes) in '", dir, "' and its file system has ", detail::gigabytes(free.value_or(0)),
        " free: ", instead);
  const auto limit = detail::file_size_limit();
  check(!limit || bytes <= *limit, what, " needs ", detail::gigabytes(bytes), " (", bytes,
        " bytes) and the file size limit (ulimit -f) is ", *limit, " bytes: raise the limit");
}

// A file the user names as input (--resume, --weights): it must exist and be a regular file.
inline void check_input_file(const std::string& path, const std::string& flag) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  // (A name too long, or under a file or a directory it may not search, is said as such.)
  check(!ec || ec == std::errc::no_such_file_or_directory, flag, ": cannot read '", path,
        "': ", ec.message());
  check(std::filesystem::exists(status), flag, ": cannot read '", path, "': no such file");
  check(std::filesystem::is_regular_file(status), flag, ": '", path,
        "' is not a regular file, expected a safetensors file");
}

// set_num_threads for --threads, refusing more than kMaxThreads.
inline void set_threads(int64_t threads, const std::string& flag = "--threads") {
  check(threads >= 1 && threads <= kMaxThreads, flag, ": expected a thread count in [1, ",
        kMaxThreads, "], got ", threads);
  set_num_threads(static_cast<int>(threads));
}

// A save that was killed leaves the temporary file of core/base/file.cpp's writer,
// "<target>.tmp-<pid>-<n>", beside `target`. This removes those of `target` whose process is gone
// and which start with the header of a safetensors file Ember wrote (8 bytes of length, then
// {"__metadata__":{ and an "ember." key: a training checkpoint); any other file is left alone.
// Returns how many it removed.
inline int remove_stale_temporaries(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(target).parent_path().empty() ? fs::path(".") : fs::path(target).parent_path();
  const std::string prefix = fs::path(target).filename().string() + ".tmp-";
  auto all_digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  auto written_by_ember = [](const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    unsigned char length[8] = {};
    if (!in.read(reinterpret_cast<char*>(length), 8)) return false;
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | length[i];
    std::string header(static_cast<std::size_t>(std::min<uint64_t>(n, 1 << 16)), '\0');
    if (!in.read(header.data(), static_cast<std::streamsize>(header.size()))) return false;
    return header.rfind("{\"__metadata__\":{", 0) == 0 &&
           header.find("\"ember.step\":") != std::string::npos;
  };
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>-<n>"
    const std::size_t dash = rest.find('-');
    if (dash == std::string::npos || !all_digits(rest.substr(0, dash)) ||
        !all_digits(rest.substr(dash + 1)) || dash > 9) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    const bool alive = pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
    std::error_code type_ec;
    if (alive || !it->is_regular_file(type_ec) || !written_by_ember(it->path())) continue;
    std::error_code remove_ec;
    if (fs::remove(it->path(), remove_ec)) ++removed;
  }
  return removed;
}

// --resume: the checkpoint's `what` ("step", "epoch") `at` must come before the run's `end` (which
// `flags` set): a run from there would train nothing and write the old state under a new label.
inline void check_resume_point(int64_t at, int64_t end, const std::string& what,
                               const std::string& flags) {
  check(at >= 0 && at < end, "--resume: the checkpoint is at ", what, " ", at,
        ", expected one before this run's last ", what, " ", end, " (", flags, ")");
}

// A checkpoint's counters (train_gpt.counters: tokens seen, the global step, epochs done): three
// values, none negative but the step (-1: none yet), all below 2^53 (so that each plus one and
// each as a double is exact).
inline void check_counters(const std::vector<int64_t>& v, const std::string& path,
                           const std::string& name) {
  constexpr int64_t kLimit = int64_t{1} << 53;
  check(v.size() == 3 || v.size() == 4, "--resume: '", path, "': ", name, " has ", v.size(),
        " values, expected 3 or 4 (tokens seen, global step, epochs done[, batches in the epoch])");
  const bool in_range = v[0] >= 0 && v[0] < kLimit && v[1] >= -1 && v[1] < kLimit && v[2] >= 0 &&
                        v[2] < kLimit && (v.size() == 3 || (v[3] >= 0 && v[3] < kLimit));
  check(in_range, "--resume: '", path, "': ", name, " holds ", v[0], ", ", v[1], ", ", v[2],
        v.size() == 4 ? ", " + std::to_string(v[3]) : std::string(),
        ", expected counts in [0, 2^53) (the step from -1)");
}

}  // namespace ember::examples
