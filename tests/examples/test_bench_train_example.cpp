// examples/bench/bench_train --profile on a one-layer model of the small config: the JSON line of
// the timed steps on stdout, and autograd::profiler's table of one more step (PyTorch's columns,
// every forward op and backward node of the step, however cheap: a table cut to its first rows
// would drop the cheap ones at random) on stderr. Built when the benchmarks are
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

// The "losses" list of bench_train's JSON line.
std::string losses_of(const std::string& output) {
  const auto begin = output.find("\"losses\": [");
  if (begin == std::string::npos) return "";
  return output.substr(begin, output.find(']', begin) - begin);
}

// EMBER_CPU_CAPABILITY=avx2 (core/base/cpu.h) keeps the AVX2 kernels on an AVX-512 CPU: the
// GEMM says so, and the steps give the same losses as the kernels picked by default (the AVX-512
// kernels run the same FMA chains; on an AVX2-only CPU both runs are the AVX2 path).
TEST(BenchTrainExample, TheAvx2PathCanBeForcedAndGivesTheSameLosses) {
  const std::string command = std::string("'") + EMBER_BENCH_TRAIN_BINARY +
                              "' --config small --layers 2 --steps 3 --threads 2";
  int exit_code = -1;
  const std::string best = ember::testing_examples::run_command(command, exit_code);
  ASSERT_EQ(exit_code, 0) << best;
  const std::string avx2 =
      ember::testing_examples::run_command("EMBER_CPU_CAPABILITY=avx2 " + command, exit_code);
  ASSERT_EQ(exit_code, 0) << avx2;
  EXPECT_NE(avx2.find("\"gemm_isa\": \"avx2\""), std::string::npos) << avx2;
  ASSERT_FALSE(losses_of(best).empty()) << best;
  EXPECT_EQ(losses_of(best), losses_of(avx2)) << best << "\n" << avx2;
}

TEST(BenchTrainExample, AFlagWithoutItsValueIsAnError) {
  int exit_code = -1;
  const std::string output = ember::testing_examples::run_command(
      std::string("'") + EMBER_BENCH_TRAIN_BINARY + "' --steps", exit_code);
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_NE(output.find("bench_train: --steps: 1 required INT missing"), std::string::npos)
      << output;
}

}  // namespace

#endif  // EMBER_BENCH_TRAIN_BINARY
