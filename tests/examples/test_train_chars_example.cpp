// examples/train_chars, run briefly on its default corpus: the loss falls, and a run interrupted
// at step 6 and resumed from its checkpoint prints the same losses as an uninterrupted run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#ifndef EMBER_TRAIN_CHARS_BINARY
#error "EMBER_TRAIN_CHARS_BINARY must be defined (the path of the train_chars example)"
#endif

namespace {

namespace fs = std::filesystem;

std::string run(const std::string& args, int& exit_code) {
  std::string output;
  const std::string command = std::string("'") + EMBER_TRAIN_CHARS_BINARY + "' " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return output;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

// The "step N train loss X validation loss Y" lines, in order.
std::vector<std::string> loss_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.find(" train loss ") != std::string::npos && line.rfind("step ", 0) == 0) {
      lines.push_back(line);
    }
  }
  return lines;
}

TEST(TrainCharsExample, LossFallsAndResumeGivesTheSameLosses) {
  std::string pattern = (fs::temp_directory_path() / "ember_train_chars_XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  const std::string common =
      "--steps 12 --print-every 3 --sample-every 12 --context 16 "
      "--batch 8 --threads 1 ";
  int code = -1;
  const std::string whole = run(common + "--out '" + (dir / "whole").string() + "'", code);
  ASSERT_EQ(code, 0) << whole;
  const std::string first =
      run(common + "--stop-at 6 --out '" + (dir / "parts").string() + "'", code);
  ASSERT_EQ(code, 0) << first;
  const std::string second = run(common + "--out '" + (dir / "parts").string() + "' --resume '" +
                                     (dir / "parts" / "checkpoint.safetensors").string() + "'",
                                 code);
  ASSERT_EQ(code, 0) << second;

  const std::vector<std::string> uninterrupted = loss_lines(whole);
  ASSERT_EQ(uninterrupted.size(), 4u) << whole;
  std::vector<std::string> resumed = loss_lines(first);
  for (const std::string& line : loss_lines(second)) resumed.push_back(line);
  EXPECT_EQ(resumed, uninterrupted) << first << "\n" << second;
  EXPECT_NE(second.find("resumed from"), std::string::npos) << second;

  // The loss falls from about ln(vocabulary) = ln(31) = 3.4.
  double loss_first = 0, loss_last = 0;
  ASSERT_EQ(std::sscanf(uninterrupted.front().c_str(), "step %*d train loss %lf", &loss_first), 1);
  ASSERT_EQ(std::sscanf(uninterrupted.back().c_str(), "step %*d train loss %lf", &loss_last), 1);
  EXPECT_LT(loss_last, loss_first - 0.3) << whole;
  EXPECT_NE(whole.find("sample (temperature"), std::string::npos) << whole;
  EXPECT_TRUE(fs::exists(dir / "whole" / "loss.svg"));
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
