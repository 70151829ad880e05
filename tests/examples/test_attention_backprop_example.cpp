// examples/attention_backprop is tested by running it: it checks the gradients autograd finds
// inside MultiHeadAttention against the hand-derived formulas (5 checks, for head_dim 1 and 2)
// and runs gradcheck on every chapter module (5 more), printing "ok   " or "FAIL " for each.
// It runs in a fresh temporary directory, where it writes its .dot graphs and .svg maps.
#include <gtest/gtest.h>

#include "tests/examples/run_program.h"

#include <sys/wait.h>
#include "tests/browser.h"

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

using ember::testing_examples::ProgramRun;
using ember::testing_examples::run_in;
using ember::testing_examples::TempDir;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(BackpropExample, EveryCheckPassesAndNothingFails) {
  TempDir dir("ember_backprop");
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

  // The explorer page of the chapter's MultiHeadAttention, checked in the browser: every node
  // clicked, the backward played to the end, the leaves' gradients equal autograd::grad's.
  ASSERT_TRUE(fs::exists(dir.path() / "attention_backprop_head_dim2.html"));
  if (ember::test::chromium_path().empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup installs it): the browser check of "
                    "attention_backprop_head_dim2.html is skipped, not passed";
  }
  const std::string result =
      ember::test::run_selftest((dir.path() / "attention_backprop_head_dim2.html").string());
  EXPECT_EQ(result.rfind("PASS ", 0), 0u) << result;
  EXPECT_NE(result.find("6 leaf gradients"), std::string::npos) << result;  // input, 5 params
}

}  // namespace
