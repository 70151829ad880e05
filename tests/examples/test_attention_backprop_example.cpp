// examples/attention_backprop is tested by running it: it checks the gradients autograd finds
// inside MultiHeadAttention against the hand-derived formulas (5 checks, for head_dim 1 and 2)
// and runs gradcheck on every chapter module (5 more), printing "ok   " or "FAIL " for each.
// It runs in a fresh temporary directory, where it writes its .dot graphs and .svg maps.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#ifndef EMBER_BACKPROP_BINARY
#error "EMBER_BACKPROP_BINARY must be defined (the path of the attention_backprop example)"
#endif

namespace {

namespace fs = std::filesystem;

struct ProgramRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ProgramRun run_in(const fs::path& dir, const std::string& binary) {
  ProgramRun run;
  const std::string command = "cd '" + dir.string() + "' && '" + binary + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) run.output.append(buf.data(), n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A temporary directory, removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ember_backprop_XXXXXX").string();
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(BackpropExample, EveryCheckPassesAndNothingFails) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty()) << "cannot create a temporary directory";
  const ProgramRun run = run_in(dir.path(), EMBER_BACKPROP_BINARY);
  EXPECT_EQ(run.exit_code, 0) << run.output;

  const std::vector<std::string> lines = lines_of(run.output);
  auto count_lines_starting_with = [&](const std::string& prefix) {
    int count = 0;
    for (const std::string& line : lines) count += line.rfind(prefix, 0) == 0 ? 1 : 0;
    return count;
  };
  // The hand-derived formulas, once per study (head_dim 1 and head_dim 2).
  for (const char* formula :
       {"dA = dC V^T", "dV = A^T dC", "dS = A * (dA - rowsum(dA * A)) / sqrt(d)", "dQ = dS K",
        "dK = dS^T Q"}) {
    EXPECT_EQ(count_lines_starting_with(std::string("ok   ") + formula + ":"), 2) << formula << "\n"
                                                                                  << run.output;
  }
  // gradcheck of every chapter module.
  for (const char* module : {"SelfAttention_v2(", "CausalAttention(", "MultiHeadAttentionWrapper(",
                             "MultiHeadAttention(", "SelfAttention_v1("}) {
    EXPECT_EQ(count_lines_starting_with(std::string("ok   gradcheck ") + module), 1)
        << module << "\n"
        << run.output;
  }
  EXPECT_EQ(count_lines_starting_with("ok   "), 15) << run.output;
  EXPECT_EQ(count_lines_starting_with("FAIL"), 0) << run.output;

  // Its pictures and graphs went to the working directory (here, the temporary one).
  for (const char* file :
       {"attention_backprop_head_dim1.dot", "attention_backprop_head_dim2.dot",
        "attention_backprop_head_dim1_weights.svg", "attention_backprop_head_dim2_weights.svg"}) {
    EXPECT_TRUE(fs::exists(dir.path() / file)) << file;
  }
  // The attention maps are labelled with the book's tokens, one panel per head.
  std::ifstream svg(dir.path() / "attention_backprop_head_dim2_weights.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find(">journey</text>"), std::string::npos);
  EXPECT_NE(text.find(">head 0</text>"), std::string::npos);
  EXPECT_NE(text.find(">head 1</text>"), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
}

}  // namespace
