// examples/second_order is tested by running it: the Hessian it prints is PyTorch's
// (tests/fixtures/second_order.txt, to the 5 printed digits) and agrees with
// autograd::functional::hessian; Newton's step lands where PyTorch's does and beats the gradient
// step; the gradient penalty is PyTorch's; anomaly mode names the node, the module and the label;
// the heatmap is written, labelled. It runs in a fresh temporary directory.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "tests/examples/run_program.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures.h"

#ifndef EMBER_SECOND_ORDER_BINARY
#error "EMBER_SECOND_ORDER_BINARY must be defined (the path of the second_order example)"
#endif

namespace {

namespace fs = std::filesystem;

using ember::testing_examples::ProgramRun;
using ember::testing_examples::run_in;
using ember::testing_examples::TempDir;

// The numbers on the first line that starts with `prefix` (after the prefix).
std::vector<double> numbers_after(const std::string& output, const std::string& prefix) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::vector<double> out;
    std::istringstream rest(line.substr(prefix.size()));
    for (std::string word; rest >> word;) {
      try {
        std::size_t used = 0;
        const double v = std::stod(word, &used);
        if (used > 0) out.push_back(v);
      } catch (const std::exception&) {
      }
    }
    return out;
  }
  return {};
}

TEST(SecondOrderExample, HessianNewtonPenaltyAndAnomalyAsPyTorch) {
  TempDir dir("ember_second_order");
  ASSERT_FALSE(dir.path().empty()) << "cannot create a temporary directory";
  const ProgramRun run = run_in(dir.path(), EMBER_SECOND_ORDER_BINARY);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const ember::test::Fixture& fx = ember::test::fixture_file("second_order.txt");

  // 1. The Hessian w.r.t. W_query, row by row, to its 5 printed digits.
  const std::vector<double> h = fx.tensor("mha/hessian").to_vector<double>();
  const char* rows[] = {"  Wq[0,0]", "  Wq[0,1]", "  Wq[0,2]",
                        "  Wq[1,0]", "  Wq[1,1]", "  Wq[1,2]"};
  for (int i = 0; i < 6; ++i) {
    const std::vector<double> printed = numbers_after(run.output, rows[i]);
    ASSERT_EQ(printed.size(), 6u) << rows[i] << "\n" << run.output;
    for (int j = 0; j < 6; ++j) {  // printed with 5 significant digits
      EXPECT_NEAR(printed[j], h[i * 6 + j], 6e-5 * std::abs(h[i * 6 + j])) << rows[i] << " " << j;
    }
  }
  const std::vector<double> agree =
      numbers_after(run.output, "functional::hessian vs row by row: max |diff| =");
  ASSERT_EQ(agree.size(), 2u) << run.output;
  EXPECT_LT(agree[0], 1e-12);  // the two ways
  EXPECT_LT(agree[1], 1e-12);  // symmetric
  EXPECT_NEAR(numbers_after(run.output, "loss =")[0], fx.tensor("mha/loss").item(), 1e-6);

  // 2. PyTorch 1.13's losses for the same steps (torch.linalg.solve for Newton).
  const std::vector<double> step1 = numbers_after(run.output, "1      ");
  const std::vector<double> step3 = numbers_after(run.output, "3      ");
  ASSERT_EQ(step1.size(), 2u) << run.output;
  ASSERT_EQ(step3.size(), 2u) << run.output;
  EXPECT_NEAR(step1[0], 1.7590380299, 1e-9);  // gradient step, lr 1
  EXPECT_NEAR(step1[1], 1.4032934055, 1e-9);  // Newton step
  EXPECT_NEAR(step3[0], 1.7053631245, 1e-9);
  EXPECT_NEAR(step3[1], 1.3951456547, 1e-9);  // Newton has converged
  EXPECT_LT(numbers_after(run.output, "hvp(f, w0, 1) vs hessian(f, w0) @ 1: max |diff| =")[0],
            1e-12);

  // 3. The gradient penalty, as PyTorch's (printed to 10 decimals).
  const std::vector<double> penalty = numbers_after(run.output, "loss = 0.5279779612, penalty =");
  ASSERT_EQ(penalty.size(), 1u) << run.output;
  EXPECT_NEAR(penalty[0], fx.tensor("penalty/penalty").item(), 1e-10);

  // 4. Anomaly mode: silent NaN first, then the error naming node, module and label.
  EXPECT_NE(run.output.find("nan (no error)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("caught: Function 'SqrtBackward0' returned inf values in its 0th "
                            "output"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("in: module 1 (PairDistance), label \"distance between the two batch "
                            "rows\""),
            std::string::npos)
      << run.output;

  // The heatmap: labelled axes and colour scale.
  std::ifstream svg(dir.path() / "hessian_wq.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find(">Wq[1,2]</text>"), std::string::npos);
  EXPECT_NE(text.find(">second derivative (x 1e-6)</text>"), std::string::npos);
}

}  // namespace
