// Adversarial: values (issue 6, class 9). NaN propagates through activations and comparison-based
// ops with PyTorch's gradients; int64 is exact end to end and wraps on overflow as PyTorch's
// does. Expected values are PyTorch 1.13's (tests/fixtures/adversarial.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/ember.h"
#include "tests/core/adv_fixture.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_exact;
using test::fixture;

// ---- NaN ----

TEST(AdvValues, ReluOfNanIsNanAndPassesItsGradient) {
  // torch.relu(torch.tensor([nan, -1., 2.])) -> tensor([nan, 0., 2.]); grad [1, 0, 1]
  Tensor x = tensor({NAN, -1.0, 2.0}).requires_grad_();
  Tensor y = relu(x);
  EXPECT_TRUE(std::isnan(y.to_vector<double>()[0]));
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 1}));
}

TEST(AdvValues, UnaryOpsOnNanInfAndSignedZeroMatchPyTorch) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -1.0, 1.0); }},
      {"clamp_min", [](const Tensor& t) { return clamp(t, 0.0); }},
      {"abs", [](const Tensor& t) { return abs(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
  };
  for (const auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    Tensor v = fixture("nan/in/v").requires_grad_();
    Tensor y = fn(v);
    y.backward(ones_like(y));
    expect_exact(y, "nan/" + name + "/out");
    // tanh's and gelu's backward formulas round differently in the last bit; NaN, inf and zero
    // gradients still match exactly (equal_nan).
    test::expect_near_fixture(v.grad(), "nan/" + name + "/grad", 1e-15);
  }
}

TEST(AdvValues, MaximumMinimumWithNanMatchPyTorch) {
  for (bool is_max : {true, false}) {
    const std::string name = is_max ? "maximum" : "minimum";
    SCOPED_TRACE(name);
    Tensor a = fixture("nan/in/v").requires_grad_(), b = fixture("nan/in/other").requires_grad_();
    Tensor y = is_max ? maximum(a, b) : minimum(a, b);
    y.backward(ones_like(y));
    expect_exact(y, "nan/" + name + "/out");
    expect_exact(a.grad(), "nan/" + name + "/grad_a");
    expect_exact(b.grad(), "nan/" + name + "/grad_b");
  }
}

TEST(AdvValues, ReductionsWithNanMatchPyTorch) {
  Tensor m = fixture("nan/in/m");
  expect_exact(max(m), "nan/max_all");
  expect_exact(min(m), "nan/min_all");
  expect_exact(argmax(m), "nan/argmax_all");
  expect_exact(argmax(m, 1), "nan/argmax_dim1");
  expect_exact(max(m, 1).values, "nan/max_dim1");
  expect_exact(max(m, 1).indices, "nan/max_dim1_idx");
  expect_exact(softmax(m, 1), "nan/softmax");
  // A strided view reads the same.
  Tensor mt = m.t().contiguous().t();
  expect_exact(argmax(mt), "nan/argmax_all");
  expect_exact(max(mt, 1).indices, "nan/max_dim1_idx");
}

// ---- int64 ----

TEST(AdvValues, Int64IsExactEndToEnd) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not a double
  Tensor t = full({1}, 0, DType::Int64);
  t.add_(big);  // an integral Scalar, kept exactly
  EXPECT_EQ(t.item<int64_t>(), big);
  EXPECT_EQ(repr(t), "tensor([9007199254740993])");
  Tensor largest = fixture("int/in/big").slice(0, 0, 1);
  EXPECT_EQ(largest.item<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(repr(largest), "tensor([9223372036854775807])");
  EXPECT_EQ(repr(fixture("int/in/big")),
            "tensor([ 9223372036854775807, -9223372036854775808,  4611686018427387904,\n"
            "                          -5,                    3,     9007199254740993])");
  EXPECT_EQ(repr(fixture("int/sum")), "tensor(4620693217682128894)");  // wrapped twice
  EXPECT_EQ(repr(fixture("int/add_1")).substr(0, 30), "tensor([-9223372036854775808, ");
  EXPECT_EQ(fixture("int/in/big").to_vector<int64_t>()[5], big);
  EXPECT_EQ((fixture("int/in/big") * 1).to_vector<int64_t>()[5], big);
  // item<int> of other integer widths reads the integer too.
  EXPECT_EQ(scalar_tensor(7, DType::Int64).item<int>(), 7);
  EXPECT_EQ(scalar_tensor(1, DType::Bool).item<int64_t>(), 1);
  EXPECT_EQ(scalar_tensor(-3.9).item<int64_t>(), -3);
}

TEST(AdvValues, Int64OverflowWrapsAsPyTorch) {
  Tensor big = fixture("int/in/big");
  expect_exact(big + 1, "int/add_1");
  expect_exact(big - 1, "int/sub_1");
  expect_exact(big * 4, "int/mul_4");
  expect_exact(-big, "int/neg");
  expect_exact(big.abs(), "int/abs");
  expect_exact(big.pow(3), "int/pow_3");
  expect_exact(big.sum(), "int/sum");
  expect_exact(big + big, "int/add_self");
  Tensor mat = big.reshape({2, 3});
  expect_exact(matmul(mat, mat.t()), "int/mm");
  expect_exact(pow(tensor({3}, DType::Int64), 40), "int/pow_40_of_3");
  // The in-place forms and alpha wrap the same way.
  Tensor t = big.clone();
  t.add_(ones({6}, DType::Int64));
  expect_exact(t, "int/add_1");
  Tensor u = big.clone();
  u.add_(big, 1);
  expect_exact(u, "int/add_self");
  Tensor w = big.clone();
  w.mul_(4);
  expect_exact(w, "int/mul_4");
  // sum along a dim, and of a strided view, wrap too.
  Tensor two = tensor({{4611686018427387904.0, 4611686018427387904.0}}, DType::Int64);
  EXPECT_EQ(two.sum(1).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(sum(two.t(), {0}).item<int64_t>(), std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace ember
