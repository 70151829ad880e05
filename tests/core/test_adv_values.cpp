// Adversarial: values. NaN propagates through activations and comparison-based
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
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

// PyTorch's tensors for these tests (scripts/fixtures/gen_adversarial.py).
const test::Fixture& adv() { return test::fixture_file("adversarial.txt"); }

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
    Tensor v = adv().tensor("nan/in/v").requires_grad_();
    Tensor y = fn(v);
    y.backward(ones_like(y));
    adv().expect_exact(y, "nan/" + name + "/out");
    // tanh's and gelu's backward formulas round differently in the last bit; NaN, inf and zero
    // gradients still match exactly (equal_nan).
    adv().expect_near(v.grad(), "nan/" + name + "/grad", 1e-15);
  }
}

TEST(AdvValues, MaximumMinimumWithNanMatchPyTorch) {
  for (bool is_max : {true, false}) {
    const std::string name = is_max ? "maximum" : "minimum";
    SCOPED_TRACE(name);
    Tensor a = adv().tensor("nan/in/v").requires_grad_(),
           b = adv().tensor("nan/in/other").requires_grad_();
    Tensor y = is_max ? maximum(a, b) : minimum(a, b);
    y.backward(ones_like(y));
    adv().expect_exact(y, "nan/" + name + "/out");
    adv().expect_exact(a.grad(), "nan/" + name + "/grad_a");
    adv().expect_exact(b.grad(), "nan/" + name + "/grad_b");
  }
}

TEST(AdvValues, ReductionsWithNanMatchPyTorch) {
  Tensor m = adv().tensor("nan/in/m");
  adv().expect_exact(max(m), "nan/max_all");
  adv().expect_exact(min(m), "nan/min_all");
  adv().expect_exact(argmax(m), "nan/argmax_all");
  adv().expect_exact(argmax(m, 1), "nan/argmax_dim1");
  adv().expect_exact(max(m, 1).values, "nan/max_dim1");
  adv().expect_exact(max(m, 1).indices, "nan/max_dim1_idx");
  adv().expect_exact(softmax(m, 1), "nan/softmax");
  // A strided view reads the same.
  Tensor mt = m.t().contiguous().t();
  adv().expect_exact(argmax(mt), "nan/argmax_all");
  adv().expect_exact(max(mt, 1).indices, "nan/max_dim1_idx");
}

// ---- int64 ----

TEST(AdvValues, Int64IsExactEndToEnd) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not a double
  Tensor t = full({1}, 0, DType::Int64);
  t.add_(big);  // an integral Scalar, kept exactly
  EXPECT_EQ(t.item<int64_t>(), big);
  EXPECT_EQ(repr(t), "tensor([9007199254740993])");
  Tensor largest = adv().tensor("int/in/big").slice(0, 0, 1);
  EXPECT_EQ(largest.item<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(repr(largest), "tensor([9223372036854775807])");
  EXPECT_EQ(repr(adv().tensor("int/in/big")),
            "tensor([ 9223372036854775807, -9223372036854775808,  4611686018427387904,\n"
            "                          -5,                    3,     9007199254740993])");
  EXPECT_EQ(repr(adv().tensor("int/sum")), "tensor(4620693217682128894)");  // wrapped twice
  EXPECT_EQ(repr(adv().tensor("int/add_1")).substr(0, 30), "tensor([-9223372036854775808, ");
  EXPECT_EQ(adv().tensor("int/in/big").to_vector<int64_t>()[5], big);
  EXPECT_EQ((adv().tensor("int/in/big") * 1).to_vector<int64_t>()[5], big);
  // item<int> of other integer widths reads the integer too.
  EXPECT_EQ(scalar_tensor(7, DType::Int64).item<int>(), 7);
  EXPECT_EQ(scalar_tensor(1, DType::Bool).item<int64_t>(), 1);
  EXPECT_EQ(scalar_tensor(-3.9).item<int64_t>(), -3);
}

TEST(AdvValues, Int64OverflowWrapsAsPyTorch) {
  Tensor big = adv().tensor("int/in/big");
  adv().expect_exact(big + 1, "int/add_1");
  adv().expect_exact(big - 1, "int/sub_1");
  adv().expect_exact(big * 4, "int/mul_4");
  adv().expect_exact(-big, "int/neg");
  adv().expect_exact(big.abs(), "int/abs");
  adv().expect_exact(big.pow(3), "int/pow_3");
  adv().expect_exact(big.sum(), "int/sum");
  adv().expect_exact(big + big, "int/add_self");
  Tensor mat = big.reshape({2, 3});
  adv().expect_exact(matmul(mat, mat.t()), "int/mm");
  adv().expect_exact(pow(tensor({3}, DType::Int64), 40), "int/pow_40_of_3");
  // The in-place forms and alpha wrap the same way.
  Tensor t = big.clone();
  t.add_(ones({6}, DType::Int64));
  adv().expect_exact(t, "int/add_1");
  Tensor u = big.clone();
  u.add_(big, 1);
  adv().expect_exact(u, "int/add_self");
  Tensor w = big.clone();
  w.mul_(4);
  adv().expect_exact(w, "int/mul_4");
  // sum along a dim, and of a strided view, wrap too.
  Tensor two = tensor({{4611686018427387904.0, 4611686018427387904.0}}, DType::Int64);
  EXPECT_EQ(two.sum(1).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(sum(two.t(), {0}).item<int64_t>(), std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace ember
