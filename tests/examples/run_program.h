// Shared by the tests that run the example programs: run_command runs a shell command (an example
// program and its flags) and returns what it printed on stdout and stderr together, `exit_code`
// being its exit status, or -1 if it did not exit normally; run_interrupted the same, stopped by
// Ctrl-C once it prints a given line; run_in runs a program in a directory;
// TempDir is a fresh temporary directory, removed with everything in it at the end of its scope.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ember::testing_examples {

inline std::string run_command(const std::string& command, int& exit_code) {
  std::string output;
  exit_code = -1;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return output;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

// Runs `command` (a program and its flags) in the background with its output going to the file
// `log`, sends it SIGINT (Ctrl-C) once a line of that output starts with `line_start`, waits for
// it, and returns the output followed by "exit status N" (the program's); `exit_code` is the
// shell's.
inline std::string run_interrupted(const std::string& command, const std::string& line_start,
                                   const std::string& log, int& exit_code) {
  return run_command(command + " > '" + log + "' 2>&1 & pid=$!; until grep -q '^" + line_start +
                         "' '" + log +
                         "' || ! kill -0 $pid 2>/dev/null; do sleep 0.01; done; kill -INT $pid; "
                         "wait $pid; echo \"exit status $?\"; cat '" +
                         log + "'",
                     exit_code);
}

struct ProgramRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

inline ProgramRun run_in(const std::filesystem::path& dir, const std::string& binary) {
  ProgramRun run;
  run.output = run_command("cd '" + dir.string() + "' && '" + binary + "'", run.exit_code);
  return run;
}

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace ember::testing_examples
