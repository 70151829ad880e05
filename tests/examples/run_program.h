// Runs a shell command (an example program and its flags) and returns what it printed on stdout
// and stderr together; `exit_code` is its exit status, or -1 if it did not exit normally.
// Shared by the tests that run the example programs.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

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

}  // namespace ember::testing_examples
