// GoogleTest assertions for Ember tensors, for users' tests (and Ember's own):
//
//   #include <ember/core/testing_gtest.h>
//   EXPECT_TENSOR_CLOSE(y, expected);                   // torch.testing's default tolerances
//   EXPECT_TENSOR_CLOSE_TOL(y, expected, 1e-4, 1e-6);   // rtol, atol
//   EXPECT_GRADCHECK(fn, {x, w});                       // autograd::gradcheck in float64
//   EXPECT_GRADGRADCHECK(fn, {x, w});                   // autograd::gradgradcheck (2nd order)
//   (ASSERT_ forms too.)
//
// A failure prints torch.testing.assert_close's report (how many elements differ, the greatest
// absolute and relative differences and where) or gradcheck's (the worst element, with its
// numerical and analytic values). Link GoogleTest yourself (GTest::gtest_main); Ember's
// libraries do not need it.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/testing.h"

namespace ember::testing {

// EXPECT_PRED_FORMAT2's predicate: actual and expected are close.
struct TensorClose {
  CloseOptions options;
  ::testing::AssertionResult operator()(const char* actual_text, const char* expected_text,
                                        const Tensor& actual, const Tensor& expected) const {
    std::optional<std::string> report = close_report(actual, expected, options);
    if (!report) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << actual_text << " is not close to " << expected_text << ":\n"
           << *report;
  }
};

inline TensorClose tensor_close(std::optional<double> rtol = std::nullopt,
                                std::optional<double> atol = std::nullopt) {
  CloseOptions options;
  options.rtol = rtol;
  options.atol = atol;
  return {options};
}

// EXPECT_PRED_FORMAT2's predicate: gradcheck passes.
inline ::testing::AssertionResult gradcheck_passes(
    const char* fn_text, const char* inputs_text,
    const std::function<Tensor(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs) {
  autograd::GradcheckResult result = autograd::gradcheck(fn, inputs);
  if (result.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "gradcheck(" << fn_text << ", " << inputs_text << ") failed:\n"
         << result.report;
}

// EXPECT_PRED_FORMAT2's predicate: gradgradcheck passes.
inline ::testing::AssertionResult gradgradcheck_passes(
    const char* fn_text, const char* inputs_text,
    const std::function<Tensor(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs) {
  autograd::GradcheckResult result = autograd::gradgradcheck(fn, inputs);
  if (result.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "gradgradcheck(" << fn_text << ", " << inputs_text << ") failed:\n"
         << result.report;
}

}  // namespace ember::testing

#define EXPECT_TENSOR_CLOSE(actual, expected) \
  EXPECT_PRED_FORMAT2(::ember::testing::tensor_close(), actual, expected)
#define ASSERT_TENSOR_CLOSE(actual, expected) \
  ASSERT_PRED_FORMAT2(::ember::testing::tensor_close(), actual, expected)
#define EXPECT_TENSOR_CLOSE_TOL(actual, expected, rtol, atol) \
  EXPECT_PRED_FORMAT2(::ember::testing::tensor_close(rtol, atol), actual, expected)
#define ASSERT_TENSOR_CLOSE_TOL(actual, expected, rtol, atol) \
  ASSERT_PRED_FORMAT2(::ember::testing::tensor_close(rtol, atol), actual, expected)
// inputs may be a braced list: EXPECT_GRADCHECK(fn, (std::vector<Tensor>{x, w})) or a variable.
#define EXPECT_GRADCHECK(fn, ...)                             \
  EXPECT_PRED_FORMAT2(::ember::testing::gradcheck_passes, fn, \
                      (std::vector<::ember::Tensor>(__VA_ARGS__)))
#define ASSERT_GRADCHECK(fn, ...)                             \
  ASSERT_PRED_FORMAT2(::ember::testing::gradcheck_passes, fn, \
                      (std::vector<::ember::Tensor>(__VA_ARGS__)))
#define EXPECT_GRADGRADCHECK(fn, ...)                             \
  EXPECT_PRED_FORMAT2(::ember::testing::gradgradcheck_passes, fn, \
                      (std::vector<::ember::Tensor>(__VA_ARGS__)))
#define ASSERT_GRADGRADCHECK(fn, ...)                             \
  ASSERT_PRED_FORMAT2(::ember::testing::gradgradcheck_passes, fn, \
                      (std::vector<::ember::Tensor>(__VA_ARGS__)))
