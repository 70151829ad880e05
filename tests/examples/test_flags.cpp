// The comma-separated list options of examples/common/flags.h (bench_gemm's --threads 1,2 and
// --shapes), parsed in-process: every item is checked, an empty item is refused rather than
// skipped, the flag is given at most once, and --help shows the default list.
#include "examples/common/flags.h"

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace {

// Parses `args` (after the program's name) into `threads`; returns the parser's error, or "".
std::string parse_threads(std::vector<std::string> args, std::vector<int>& threads) {
  ember::examples::Flags app{"test"};
  ember::examples::number_list_option(app, "--threads", threads, 1, 256, "thread counts");
  std::vector<char*> argv = {const_cast<char*>("test")};
  for (std::string& arg : args) argv.push_back(arg.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ExampleFlags, AListOptionKeepsItsDefaultOrTakesEveryItem) {
  std::vector<int> threads = {1, 2};
  EXPECT_EQ(parse_threads({}, threads), "");
  EXPECT_EQ(threads, (std::vector<int>{1, 2}));
  EXPECT_EQ(parse_threads({"--threads", "4,1,256"}, threads), "");
  EXPECT_EQ(threads, (std::vector<int>{4, 1, 256}));
  EXPECT_EQ(parse_threads({"--threads=3"}, threads), "");
  EXPECT_EQ(threads, (std::vector<int>{3}));
}

TEST(ExampleFlags, AListOptionRefusesAnyBadItemAndNamesIt) {
  const std::string expected =
      "--threads: expected a comma-separated list of integers in [1, 256], got ";
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"0", expected + "'0'"},
           {"1,0", expected + "'0' in '1,0'"},
           {"1,,2", expected + "'' in '1,,2'"},
           {"1,", expected + "'' in '1,'"},
           {"", expected + "''"},
           {"1,257", expected + "'257' in '1,257'"},
           {"2,x", expected + "'x' in '2,x'"},
           {"1.5", expected + "'1.5'"},
           {"99999999999999999999", expected + "'99999999999999999999'"},
       }) {
    std::vector<int> threads = {1, 2};
    EXPECT_EQ(parse_threads({"--threads", text}, threads), message) << text;
    EXPECT_EQ(threads, (std::vector<int>{1, 2})) << text;
  }
  std::vector<int> threads = {1, 2};
  EXPECT_NE(parse_threads({"--threads", "1", "--threads", "2"}, threads), "");
  EXPECT_NE(parse_threads({"--threads", "1", "2"}, threads), "");
}

// A number flag's value is what its digits say in decimal: CLI11 alone reads "010" as octal 8 and
// "0x10" as 16 (a run of 8 steps for --steps 010); such texts are refused, the value kept.
TEST(ExampleFlags, AnIntegerIsPlainDecimalDigits) {
  auto parse_steps = [](const std::string& text, int64_t& steps) {
    ember::examples::Flags app{"test"};
    ember::examples::positive_option(app, "--steps", steps, "steps", int64_t{1000});
    std::string flag = "--steps", value = text;
    std::vector<char*> argv = {const_cast<char*>("test"), flag.data(), value.data()};
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string expected = "--steps: expected an integer in (0, 1000], got ";
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"010", expected + "'010' (in decimal digits, without a leading 0)"},
           {"0x10", expected + "'0x10' (in decimal digits, without a leading 0)"},
           {"007", expected + "'007' (in decimal digits, without a leading 0)"},
           {" 3", expected + "' 3'"},
           {"1e2", expected + "'1e2'"},
       }) {
    int64_t steps = 5;
    EXPECT_EQ(parse_steps(text, steps), message) << text;
    EXPECT_EQ(steps, 5) << text;
  }
  for (const auto& [text, value] : std::vector<std::pair<std::string, int64_t>>{
           {"10", 10}, {"+10", 10}, {"1000", 1000}, {"1", 1}}) {
    int64_t steps = 5;
    EXPECT_EQ(parse_steps(text, steps), "") << text;
    EXPECT_EQ(steps, value) << text;
  }
  int64_t value = -1;
  EXPECT_TRUE(ember::examples::parse_number("0", value));
  EXPECT_EQ(value, 0);
  EXPECT_FALSE(ember::examples::parse_number("-010", value));
  uint64_t seed = 0;
  EXPECT_FALSE(ember::examples::parse_number("0777", seed));
  EXPECT_TRUE(ember::examples::parse_number("777", seed));
  EXPECT_EQ(seed, 777u);
}

TEST(ExampleFlags, HelpShowsTheDefaultList) {
  ember::examples::Flags app{"test"};
  std::vector<int> threads = {1, 2};
  ember::examples::number_list_option(app, "--threads", threads, 1, 256, "thread counts");
  EXPECT_NE(app.help().find("--threads LIST=1,2"), std::string::npos) << app.help();
}

}  // namespace
