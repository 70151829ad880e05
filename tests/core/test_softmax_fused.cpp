// The fused masked, scaled softmax (core/ops/softmax.h, kernels in core/kernels/masked_softmax.h)
// against the composite it replaces, the chapter's
//   s.masked_fill_(mask, -inf); w = softmax(s / divisor, -1)
// the same output (bit for bit) and the same gradient (float32 to 1e-5 relative, float64 to
// 1e-10), with the causal mask and with an arbitrary one, rows of every length modulo 8, at 1 and
// 2 threads; a float64 gradcheck; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/generator.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/parallel.h"
#include "core/random.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;

Tensor composite(const Tensor& x, const Tensor& mask, double divisor) {
  Tensor s = x.clone();
  s.masked_fill_(mask, -INFINITY);
  return softmax(s / divisor, -1);
}

struct Outcome {
  Tensor y, dx;
};

Outcome run(bool fused, Tensor leaf, const Tensor& mask, double divisor, const Tensor& upstream) {
  leaf.set_grad(Tensor());
  Tensor y = fused ? masked_scaled_softmax(leaf, mask, divisor) : composite(leaf, mask, divisor);
  (y * upstream).sum().backward();
  return {y.detach(), leaf.grad()};
}

// |a - b| <= rtol * (|b| + max|b|) elementwise.
void expect_close(const Tensor& a, const Tensor& b, double rtol, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double scale = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  int64_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    bad += !(std::abs(x[i] - y[i]) <= rtol * (std::abs(y[i]) + scale));
  EXPECT_EQ(bad, 0) << what;
}

void expect_fused_equals_composite(const Shape& shape, bool causal, DType dtype, double rtol) {
  SCOPED_TRACE(::testing::Message() << "dims=" << shape.size() << " last=" << shape.back()
                                    << " causal=" << causal << " " << dtype_name(dtype));
  Generator gen(17);
  const int64_t nq = shape[shape.size() - 2], nk = shape.back();
  const Tensor x = (randn(shape, dtype, &gen) * 3.0).detach().requires_grad_(true);
  // The causal mask, or a random one that never masks column 0 (no fully masked row).
  const Tensor keep_first = cat({zeros({nq, 1}), ones({nq, nk - 1})}, 1);
  const Tensor mask =
      causal ? triu(ones({nq, nk}), 1).to_bool()
             : (lt(rand({nq, nk}, DType::Float32, &gen), 0.3).to(DType::Float32) * keep_first)
                   .to_bool();
  const Tensor upstream = randn(shape, dtype, &gen);
  const double divisor = std::sqrt(static_cast<double>(nk));
  const Outcome fused = run(true, x, mask, divisor, upstream);
  const Outcome reference = run(false, x, mask, divisor, upstream);
  EXPECT_EQ(test::values(fused.y), test::values(reference.y));  // the same operations: same bits
  expect_close(fused.dx, reference.dx, rtol, "grad x");
}

TEST(MaskedScaledSoftmax, Float32EqualsComposite) {
  expect_fused_equals_composite({2, 3, 6, 6}, true, DType::Float32, 1e-5);
  expect_fused_equals_composite({1, 2, 70, 70}, true, DType::Float32, 1e-5);
  expect_fused_equals_composite({4, 13, 21}, false, DType::Float32, 1e-5);
  expect_fused_equals_composite({130, 9}, false, DType::Float32, 1e-5);
}

TEST(MaskedScaledSoftmax, Float64EqualsComposite) {
  expect_fused_equals_composite({2, 3, 6, 6}, true, DType::Float64, 1e-10);
  expect_fused_equals_composite({3, 33, 33}, false, DType::Float64, 1e-10);
}

TEST(MaskedScaledSoftmax, SameResultsAtOneAndTwoThreads) {
  const int saved = get_num_threads();
  Generator gen(3);
  const Tensor x = randn({4, 4, 128, 128}, DType::Float32, &gen).requires_grad_(true);
  const Tensor mask = triu(ones({128, 128}), 1).to_bool();
  const Tensor upstream = randn({4, 4, 128, 128}, DType::Float32, &gen);
  set_num_threads(1);
  const Outcome one = run(true, x, mask, 8.0, upstream);
  set_num_threads(2);
  const Outcome two = run(true, x, mask, 8.0, upstream);
  set_num_threads(saved);
  EXPECT_EQ(test::values(one.y), test::values(two.y));
  EXPECT_EQ(test::values(one.dx), test::values(two.dx));
}

TEST(MaskedScaledSoftmax, Float64Gradcheck) {
  Generator gen(5);
  const Tensor x = randn({2, 5, 5}, DType::Float64, &gen).requires_grad_(true);
  const Tensor mask = triu(ones({5, 5}), 1).to_bool();
  const autograd::GradcheckResult result = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return masked_scaled_softmax(in[0], mask, 1.7); }, {x});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(MaskedScaledSoftmax, Errors) {
  const Tensor mask = triu(ones({3, 3}), 1).to_bool();
  std::string m = error_of([&] { masked_scaled_softmax(zeros({2, 3, 4}), mask, 1.0); });
  EXPECT_NE(m.find("masked_scaled_softmax"), std::string::npos) << m;
  EXPECT_NE(m.find("[3, 4]"), std::string::npos) << m;
  m = error_of([&] { masked_scaled_softmax(zeros({3, 3}), triu(ones({3, 3}), 1), 1.0); });
  EXPECT_NE(m.find("bool"), std::string::npos) << m;
  m = error_of([&] { masked_scaled_softmax(zeros({3}), mask, 1.0); });
  EXPECT_NE(m.find("[..., n_q, n_k]"), std::string::npos) << m;
}

}  // namespace
}  // namespace ember
