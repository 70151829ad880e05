// examples/train_chars, run briefly on its default corpus: the loss falls, and a run interrupted
// at step 6 (--stop-at, or Ctrl-C) and resumed from its checkpoint prints the same losses as an
// uninterrupted run; --save-every saves at its steps.
#include "tests/examples/run_program.h"

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
  return ember::testing_examples::run_command(
      std::string("'") + EMBER_TRAIN_CHARS_BINARY + "' " + args, exit_code);
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

// Ctrl-C (SIGINT once step 3 is printed) finishes the step under way, saves and exits with 130;
// --resume continues with the same losses as an uninterrupted run. --save-every 5 of 12 steps
// saves at steps 5 and 10 (and at the end).
TEST(TrainCharsExample, CtrlCSavesAndResumesAndSaveEverySaves) {
  ember::testing_examples::TempDir dir("ember_train_chars_sigint");
  const std::string common =
      "--steps 400 --print-every 1 --sample-every 400 --context 16 --batch 8 --threads 1 ";
  int code = -1;
  const std::string whole = run(common + "--out '" + (dir.path() / "whole").string() + "'", code);
  ASSERT_EQ(code, 0) << whole;
  const std::string first = ember::testing_examples::run_interrupted(
      "'" + std::string(EMBER_TRAIN_CHARS_BINARY) + "' " + common + "--out '" +
          (dir.path() / "parts").string() + "'",
      "step 3 train loss", (dir.path() / "first.txt").string(), code);
  ASSERT_EQ(code, 0) << first;
  EXPECT_NE(first.find("exit status 130"), std::string::npos) << first;
  EXPECT_NE(first.find("interrupted (Ctrl-C) after step"), std::string::npos) << first;
  const std::string second =
      run(common + "--out '" + (dir.path() / "parts").string() + "' --resume '" +
              (dir.path() / "parts" / "checkpoint.safetensors").string() + "'",
          code);
  ASSERT_EQ(code, 0) << second;
  const std::vector<std::string> uninterrupted = loss_lines(whole);
  ASSERT_EQ(uninterrupted.size(), 400u) << whole;
  std::vector<std::string> resumed = loss_lines(first);
  ASSERT_GE(resumed.size(), 3u);
  ASSERT_LT(resumed.size(), 399u) << "the signal came after the run's end";
  for (const std::string& line : loss_lines(second)) resumed.push_back(line);
  EXPECT_EQ(resumed, uninterrupted);

  const std::string every =
      run("--steps 12 --save-every 5 --context 16 --batch 8 --threads 1 --out '" +
              (dir.path() / "every").string() + "'",
          code);
  ASSERT_EQ(code, 0) << every;
  std::vector<std::string> saved;
  std::istringstream in(every);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("saved the checkpoint", 0) == 0) saved.push_back(line);
  }
  EXPECT_EQ(saved, (std::vector<std::string>{"saved the checkpoint at step 5",
                                             "saved the checkpoint at step 10"}));
  EXPECT_EQ(whole.find("saved the checkpoint"), std::string::npos) << whole;
}

// Ctrl-C during the last step (here the only one, stopped in its sample) does not leave the run
// "interrupted": nothing is left for a resume to do, so the program does not say that --resume
// continues it (which --resume would then refuse); whatever it says, a resume it names works.
TEST(TrainCharsExample, CtrlCInTheLastStepEndsTheRunAsDone) {
  ember::testing_examples::TempDir dir("ember_train_chars_sigint_last");
  const std::string common =
      "--steps 1 --context 256 --batch 2 --print-every 1 --sample-every 1 --no-kv-cache "
      "--threads 1 --out '" +
      (dir.path() / "out").string() + "'";
  int code = -1;
  const std::string output = ember::testing_examples::run_interrupted(
      "'" + std::string(EMBER_TRAIN_CHARS_BINARY) + "' " + common, "step 1 train loss",
      (dir.path() / "log.txt").string(), code);
  ASSERT_EQ(code, 0) << output;
  EXPECT_EQ(output.find("continues the run"), std::string::npos) << output;
  EXPECT_NE(output.find("train_chars: steps 1-1"), std::string::npos) << output;
  if (output.find("continues the run") != std::string::npos) {
    const std::string resumed =
        run(common + " --resume '" + (dir.path() / "out" / "checkpoint.safetensors").string() + "'",
            code);
    EXPECT_EQ(code, 0) << resumed;
  }
}

}  // namespace
