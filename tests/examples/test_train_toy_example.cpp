// examples/train_toy, run for a few seconds on a small task (4 digits, 60 steps): the held-out
// loss must fall and the held-out accuracy rise, and the pictures must be written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#ifndef EMBER_TRAIN_TOY_BINARY
#error "EMBER_TRAIN_TOY_BINARY must be defined (the path of the train_toy example)"
#endif

namespace {

namespace fs = std::filesystem;

std::string run(const std::string& command, int& exit_code) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return output;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

TEST(TrainToyExample, LossFallsAndAccuracyRises) {
  std::string dir_pattern = (fs::temp_directory_path() / "ember_train_toy_XXXXXX").string();
  ASSERT_NE(mkdtemp(dir_pattern.data()), nullptr);
  const fs::path dir = dir_pattern;
  int exit_code = -1;
  const std::string output = run(std::string("'") + EMBER_TRAIN_TOY_BINARY +
                                     "' --digits 4 --steps 60 --eval-every 20 --print-every 20 "
                                     "--threads 1 --out '" +
                                     dir.string() + "'",
                                 exit_code);
  ASSERT_EQ(exit_code, 0) << output;

  // "step     0 | held-out loss 2.573, token accuracy 8.35%"
  double loss0 = 0, acc0 = 0;
  const auto first = output.find("step     0 | held-out loss ");
  ASSERT_NE(first, std::string::npos) << output;
  ASSERT_EQ(std::sscanf(output.c_str() + first, "step 0 | held-out loss %lf, token accuracy %lf%%",
                        &loss0, &acc0),
            2)
      << output;
  // "... held-out: loss 0.0785, exact-token accuracy 100.00%, whole sequences ..."
  double loss1 = 0, acc1 = 0;
  const auto last = output.find("held-out: loss ");
  ASSERT_NE(last, std::string::npos) << output;
  ASSERT_EQ(std::sscanf(output.c_str() + last, "held-out: loss %lf, exact-token accuracy %lf%%",
                        &loss1, &acc1),
            2)
      << output;
  EXPECT_GT(loss0, 2.0) << output;         // about ln(11) = 2.4 before training
  EXPECT_LT(loss1, loss0 / 4) << output;   // falls
  EXPECT_LT(acc0, 30.0) << output;         // chance is 10%
  EXPECT_GT(acc1, acc0 + 40.0) << output;  // rises
  EXPECT_NE(output.find("Held-out examples (input -> generated output):"), std::string::npos);
  // The checkpoint, reloaded into a fresh model, predicts the same.
  EXPECT_NE(output.find("into a new model: the same predictions"), std::string::npos) << output;
  for (const char* file : {"loss.svg", "attention.svg", "model.safetensors"}) {
    EXPECT_TRUE(fs::exists(dir / file)) << file;
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
