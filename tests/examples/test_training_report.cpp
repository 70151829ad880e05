// train_toy --html and train_chars --html: report.html written, its data the run's (one map set
// per evaluation), and in headless Chromium its self-check moves the step slider across every
// recorded step, finds the gradient-flow curves of every block and each chart's legend in its
// curves' colours (tests/browser.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "tests/browser.h"
#include "tests/examples/run_program.h"

namespace {

namespace fs = std::filesystem;
using ember::testing_examples::TempDir;

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

// Each test runs one program with --html and checks the report.html it writes.
class TrainingReport : public ::testing::Test {
 protected:
  // Runs `binary flags --html --out DIR` with DIR a fresh directory named after `prefix` (removed
  // at the end of the test): the program must exit with 0 and write DIR/report.html, whose text
  // is then page_.
  void run_with_html(const char* prefix, const char* binary, const std::string& flags) {
    dir_.emplace(prefix);
    ASSERT_FALSE(dir_->path().empty());
    int code = -1;
    const std::string out = ember::testing_examples::run_command(
        std::string("'") + binary + "' " + flags + " --html --out '" + dir_->path().string() + "'",
        code);
    ASSERT_EQ(code, 0) << out;
    report_ = dir_->path() / "report.html";
    ASSERT_TRUE(fs::exists(report_)) << out;
    page_ = read(report_);
  }

  // In headless Chromium the page's self-check moves the step slider across every recorded step
  // and reports `expected`; without Chromium the test is skipped, not passed.
  void expect_selftest(const std::string& expected) {
    if (ember::test::chromium_path().empty()) {
      GTEST_SKIP() << "chromium is not installed (scripts/setup installs it): the browser check of "
                      "report.html is skipped, not passed";
    }
    EXPECT_EQ(ember::test::run_selftest(report_.string()), expected);
  }

  std::optional<TempDir> dir_;
  fs::path report_;
  std::string page_;
};

TEST_F(TrainingReport, TrainToyWritesAReportWhoseSliderCoversEveryEvaluation) {
  ASSERT_NO_FATAL_FAILURE(run_with_html("ember_report_toy", EMBER_TRAIN_TOY_BINARY,
                                        "--digits 4 --steps 30 --eval-every 10 --print-every 10"));
  // Evaluations at steps 0, 10, 20, 30: four snapshots of 2 layers x 2 heads, four samples.
  EXPECT_EQ(count(page_, "\"panels\":"), 4);
  EXPECT_EQ(count(page_, "\"title\":\"layer 1, head 1\""), 4);
  // The gradient flow: both blocks, read by their backward hooks at each of the 30 steps; in
  // the browser, every curve drawn and every legend entry in its curve's colour.
  EXPECT_EQ(count(page_, "\"blocks\":[\"trf_blocks.0\",\"trf_blocks.1\"]"), 1);
  expect_selftest("PASS 4 steps, 4 maps, 4 samples, gradient flow of 2 blocks over 30 steps");
}

TEST_F(TrainingReport, TrainCharsWritesAReportWhoseSliderCoversEveryValidation) {
  ASSERT_NO_FATAL_FAILURE(
      run_with_html("ember_report_chars", EMBER_TRAIN_CHARS_BINARY,
                    "--steps 20 --print-every 10 --sample-every 10 --context 16"));
  // Validations at steps 10 and 20, 2 layers x 4 heads, samples at 10 and 20.
  expect_selftest("PASS 2 steps, 8 maps, 2 samples, gradient flow of 2 blocks over 20 steps");
}

}  // namespace
