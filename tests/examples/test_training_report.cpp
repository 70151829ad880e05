// train_toy --html and train_chars --html: report.html written, its data the run's (one map set
// per evaluation), and in headless Chromium its self-check moves the step slider across every
// recorded step (tests/browser.h).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "tests/examples/run_program.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/browser.h"

namespace {

namespace fs = std::filesystem;

std::string run(const std::string& command, int& exit_code) {
  return ember::testing_examples::run_command(command, exit_code);
}

fs::path temp_dir(const char* name) {
  std::string pattern = (fs::temp_directory_path() / name).string() + "_XXXXXX";
  return mkdtemp(pattern.data()) ? fs::path(pattern) : fs::path();
}

std::string read(const fs::path& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The number of times `needle` occurs in `text`.
int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(TrainingReport, TrainToyWritesAReportWhoseSliderCoversEveryEvaluation) {
  const fs::path dir = temp_dir("ember_report_toy");
  ASSERT_FALSE(dir.empty());
  int code = -1;
  const std::string out = run(std::string("'") + EMBER_TRAIN_TOY_BINARY +
                                  "' --digits 4 --steps 30 --eval-every 10 --print-every 10 "
                                  "--html --out '" +
                                  dir.string() + "'",
                              code);
  ASSERT_EQ(code, 0) << out;
  const fs::path report = dir / "report.html";
  ASSERT_TRUE(fs::exists(report)) << out;
  // Evaluations at steps 0, 10, 20, 30: four snapshots of 2 layers x 2 heads, four samples.
  const std::string page = read(report);
  EXPECT_EQ(count(page, "\"panels\":"), 4);
  EXPECT_EQ(count(page, "\"title\":\"layer 1, head 1\""), 4);
  if (ember::test::chromium_path().empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup installs it): the browser check of "
                    "report.html is skipped, not passed";
  }
  EXPECT_EQ(ember::test::run_selftest(report.string()), "PASS 4 steps, 4 maps, 4 samples");
  fs::remove_all(dir);
}

TEST(TrainingReport, TrainCharsWritesAReportWhoseSliderCoversEveryValidation) {
  const fs::path dir = temp_dir("ember_report_chars");
  ASSERT_FALSE(dir.empty());
  int code = -1;
  const std::string out = run(std::string("'") + EMBER_TRAIN_CHARS_BINARY +
                                  "' --steps 20 --print-every 10 --sample-every 10 --context 16 "
                                  "--html --out '" +
                                  dir.string() + "'",
                              code);
  ASSERT_EQ(code, 0) << out;
  const fs::path report = dir / "report.html";
  ASSERT_TRUE(fs::exists(report)) << out;
  if (ember::test::chromium_path().empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup installs it): the browser check of "
                    "report.html is skipped, not passed";
  }
  // Validations at steps 10 and 20, 2 layers x 4 heads, samples at 10 and 20.
  EXPECT_EQ(ember::test::run_selftest(report.string()), "PASS 2 steps, 8 maps, 2 samples");
  fs::remove_all(dir);
}

}  // namespace
