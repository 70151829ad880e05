// examples/bench/bench_train --profile on a one-layer model of the small config: the JSON line of
// the timed steps on stdout, and autograd::profiler's table of one more step (PyTorch's columns,
// the step's forward ops and backward nodes) on stderr. Built when the benchmarks are
// (EMBER_BUILD_BENCH); their figures are scripts/bench's business, not a test's.
#ifdef EMBER_BENCH_TRAIN_BINARY

#include <gtest/gtest.h>

#include <string>

#include "tests/examples/run_program.h"

namespace {

TEST(BenchTrainExample, ProfilePrintsTheTableOfOneStep) {
  int exit_code = -1;
  const std::string output =
      ember::testing_examples::run_command(std::string("'") + EMBER_BENCH_TRAIN_BINARY +
                                               "' --config small --layers 1 --steps 3 --profile",
                                           exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  EXPECT_NE(output.find("{\"impl\": \"ember\", \"config\": \"small\""), std::string::npos)
      << output;
  EXPECT_NE(output.find("autograd::profiler, step 3:"), std::string::npos) << output;
  for (const char* column : {"Name", "Self CPU %", "Self CPU", "CPU total", "# of Calls"}) {
    EXPECT_NE(output.find(column), std::string::npos) << column << "\n" << output;
  }
  for (const char* op : {"MmBackward0", "ember::embedding", "AccumulateGrad"}) {
    EXPECT_NE(output.find(op), std::string::npos) << op << "\n" << output;
  }
}

TEST(BenchTrainExample, AFlagWithoutItsValueIsAnError) {
  int exit_code = -1;
  const std::string output = ember::testing_examples::run_command(
      std::string("'") + EMBER_BENCH_TRAIN_BINARY + "' --steps", exit_code);
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_NE(output.find("--steps needs a value"), std::string::npos) << output;
}

}  // namespace

#endif  // EMBER_BENCH_TRAIN_BINARY
