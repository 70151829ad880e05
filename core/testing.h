// Test helpers for users' own tests (no GoogleTest needed; its macros are in
// core/testing_gtest.h): torch.testing.assert_close for Ember tensors.
//
//   ember::testing::assert_close(actual, expected);              // torch.testing's tolerances
//   ember::testing::assert_close(actual, expected, 1e-4, 1e-6);  // rtol, atol
//
// throws an ember::Error with torch.testing's report when they differ:
//   Tensor-likes are not close!
//
//   Mismatched elements: 1 / 6 (16.7%)
//   Greatest absolute difference: 0.5 at index (1, 0) (up to 1e-05 allowed)
//   Greatest relative difference: 0.25 at index (1, 0) (up to 1.3e-06 allowed)
#pragma once

#include <optional>
#include <string>

#include "core/tensor/tensor.h"

namespace ember::testing {

// torch.testing's default tolerances for a dtype: float32 rtol 1.3e-6, atol 1e-5; float64
// rtol 1e-7, atol 1e-7; int64 and bool 0 and 0 (exact).
struct Tolerances {
  double rtol;
  double atol;
};
Tolerances default_tolerances(DType dtype);

struct CloseOptions {
  std::optional<double> rtol;  // give both or neither (torch.testing's rule)
  std::optional<double> atol;
  bool equal_nan = false;
  bool check_dtype = true;
};

// The report of torch.testing.assert_close when actual and expected are not close (shape,
// dtype, then values: |actual - expected| <= atol + rtol * |expected| element by element);
// std::nullopt when they are. Both must be defined.
std::optional<std::string> close_report(const Tensor& actual, const Tensor& expected,
                                        const CloseOptions& options = {});

// Throws an ember::Error holding close_report's text when actual and expected are not close.
void assert_close(const Tensor& actual, const Tensor& expected,
                  std::optional<double> rtol = std::nullopt,
                  std::optional<double> atol = std::nullopt, bool equal_nan = false);

}  // namespace ember::testing
