// autograd::functional (core/autograd/functional.h) against torch.autograd.functional
// (tests/fixtures/second_order.txt, entries fn/...), against itself (hvp == vhp for a symmetric
// Hessian, the Jacobian of the gradient == the Hessian, jvp == J v, vjp == u^T J), and its
// options: create_graph (results differentiable again), strict (PyTorch's messages).
#include "core/autograd/functional.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/ember.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

namespace AF = autograd::functional;
using test::error_of;

const test::Fixture& fx() { return test::fixture_file("second_order.txt"); }

// To 1e-10 relative (per element, floored at 1e-3 of the tensor's largest element).
void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<double> a = actual.contiguous().to_vector<double>();
  const std::vector<double> e = expected.contiguous().to_vector<double>();
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_LE(std::abs(a[i] - e[i]), 1e-10 * std::max(std::abs(e[i]), 1e-3 * scale))
        << what << " element " << i << ": " << a[i] << " vs " << e[i];
  }
}
void expect_fixture(const Tensor& actual, const std::string& name) {
  expect_close(actual, fx().tensor(name), name);
}

// The fixture's functions (scripts/fixtures/gen_second_order.py).
Tensor fn_vec(const Tensor& x) { return softmax(x, -1) * tanh(x); }
Tensor fn_scalar(const Tensor& x) { return (softmax(x, -1) * x).sum() + tanh(x).pow(2).sum(); }
Tensor fn_pair(const std::vector<Tensor>& in) { return tanh(matmul(in[0], in[1])); }
Tensor fn_pair_scalar(const std::vector<Tensor>& in) {
  return tanh(matmul(in[0], in[1])).pow(2).sum() + (in[0] * in[0]).sum() * in[1].sum();
}

TEST(Functional, OneInputMatchesPyTorch) {
  const Tensor x = fx().tensor("fn/vec/x"), u = fx().tensor("fn/vec/u"),
               v = fx().tensor("fn/vec/v");
  auto [out, vjp] = AF::vjp(fn_vec, x, u);
  expect_fixture(out, "fn/vec/out");
  expect_fixture(vjp, "fn/vec/vjp");
  expect_fixture(AF::jvp(fn_vec, x, v).second, "fn/vec/jvp");
  const Tensor jac = AF::jacobian(fn_vec, x);
  expect_fixture(jac, "fn/vec/jacobian");
  // vjp = u^T J, jvp = J v.
  expect_close(vjp, matmul(u, jac), "u^T J");
  expect_close(AF::jvp(fn_vec, x, v).second, matmul(jac, v), "J v");
  EXPECT_FALSE(out.requires_grad());
  EXPECT_FALSE(vjp.requires_grad());
}

TEST(Functional, ScalarFunctionHessianHvpVhpMatchPyTorch) {
  const Tensor x = fx().tensor("fn/scalar/x"), v = fx().tensor("fn/scalar/v");
  expect_fixture(AF::jacobian(fn_scalar, x), "fn/scalar/jacobian");
  const Tensor h = AF::hessian(fn_scalar, x);
  expect_fixture(h, "fn/scalar/hessian");
  auto [out, hvp] = AF::hvp(fn_scalar, x, v);
  expect_fixture(out, "fn/scalar/out");
  expect_fixture(hvp, "fn/scalar/hvp");
  const Tensor vhp = AF::vhp(fn_scalar, x, v).second;
  expect_fixture(vhp, "fn/scalar/vhp");
  // A symmetric Hessian: hvp == vhp == H v.
  expect_close(hvp, vhp, "hvp vs vhp");
  expect_close(hvp, matmul(h.reshape({6, 6}), v.reshape({6})).reshape({2, 3}), "H v");
  // The Jacobian of the gradient is the Hessian.
  auto grad_fn = [](const Tensor& y) {
    return autograd::grad({fn_scalar(y)}, {y}, {}, std::nullopt, /*create_graph=*/true)[0];
  };
  expect_close(AF::jacobian(grad_fn, x), h, "jacobian(grad) vs hessian");
}

TEST(Functional, SeveralInputsMatchPyTorch) {
  const Tensor a = fx().tensor("fn/pair/a"), b = fx().tensor("fn/pair/b");
  const Tensor u = fx().tensor("fn/pair/u"), va = fx().tensor("fn/pair/va"),
               vb = fx().tensor("fn/pair/vb");
  auto [out, vjp] = AF::vjp(fn_pair, {a, b}, u);
  expect_fixture(out, "fn/pair/out");
  ASSERT_EQ(vjp.size(), 2u);
  expect_fixture(vjp[0], "fn/pair/vjp0");
  expect_fixture(vjp[1], "fn/pair/vjp1");
  expect_fixture(AF::jvp(fn_pair, {a, b}, {va, vb}).second, "fn/pair/jvp");
  const std::vector<Tensor> jac = AF::jacobian(fn_pair, {a, b});
  expect_fixture(jac[0], "fn/pair/jacobian0");
  expect_fixture(jac[1], "fn/pair/jacobian1");

  expect_fixture(fn_pair_scalar({a, b}), "fn/pair_scalar/out");
  const auto h = AF::hessian(fn_pair_scalar, {a, b});
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      expect_fixture(h[i][j], "fn/pair_scalar/hessian" + std::to_string(i) + std::to_string(j));
    }
  }
  const auto hvp = AF::hvp(fn_pair_scalar, {a, b}, {va, vb}).second;
  const auto vhp = AF::vhp(fn_pair_scalar, {a, b}, {va, vb}).second;
  for (int i = 0; i < 2; ++i) {
    expect_fixture(hvp[i], "fn/pair_scalar/hvp" + std::to_string(i));
    expect_fixture(vhp[i], "fn/pair_scalar/vhp" + std::to_string(i));
  }
  // H[0][1] is H[1][0] transposed (the mixed partials agree).
  expect_close(h[0][1].reshape({6, 6}), h[1][0].reshape({6, 6}).t(), "H01 vs H10^T");
}

TEST(Functional, CreateGraphResultsCanBeDifferentiatedAgain) {
  // f(x) = sum x^4: H = diag(12 x^2); d(sum H)/dx = 24 x.
  const Tensor x = tensor({1.0, -2.0, 0.5}, DType::Float64).requires_grad_();
  auto f = [](const Tensor& y) { return y.pow(4).sum(); };
  const Tensor h = AF::hessian(f, x, /*create_graph=*/true);
  EXPECT_TRUE(h.requires_grad());
  test::expect_values(h, {12, 0, 0, 0, 48, 0, 0, 0, 3});
  h.sum().backward();
  test::expect_values(x.grad(), {24, -48, 12});
  // hvp with create_graph: d/dx (v^T H v) = 24 x * v^2 (elementwise).
  const Tensor y = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  const Tensor v = tensor({1.0, 3.0}, DType::Float64);
  auto [out, hv] = AF::hvp(f, y, v, /*create_graph=*/true);
  EXPECT_TRUE(out.requires_grad());
  test::expect_values(hv, {12, 144});
  (hv * v).sum().backward();
  test::expect_values(y.grad(), {24, 432});
  // Without create_graph the inputs' .grad is never touched.
  const Tensor z = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  AF::hessian(f, z);
  AF::vjp(f, z);
  EXPECT_FALSE(z.grad().defined());
}

TEST(Functional, StrictModeRaisesPyTorchsMessages) {
  const Tensor x = tensor({1.0, 2.0}, DType::Float64);
  const Tensor y = tensor({3.0, 4.0}, DType::Float64);
  auto ignores_y = [](const std::vector<Tensor>& in) { return (in[0] * 2).sum(); };
  // Not strict: zeros for the input the output does not depend on.
  auto [out, vjp] = AF::vjp(ignores_y, {x, y});
  test::expect_values(vjp[0], {2, 2});
  test::expect_values(vjp[1], {0, 0});
  EXPECT_EQ(error_of([&] {
              AF::vjp(ignores_y, {x, y}, Tensor(), false, /*strict=*/true);
            }),
            "The output of the user-provided function is independent of input 1. This is not "
            "allowed in strict mode.");
  EXPECT_EQ(error_of([&] {
              AF::jacobian(ignores_y, {x, y}, false, /*strict=*/true);
            }),
            "Output 0 of the user-provided function is independent of input 1. This is not "
            "allowed in strict mode.");
  // A linear function: its gradient does not depend on the input.
  auto linear = [](const Tensor& t) { return (t * 2).sum(); };
  test::expect_values(AF::hessian(linear, x), {0, 0, 0, 0});
  EXPECT_EQ(error_of([&] { AF::hessian(linear, x, false, /*strict=*/true); }),
            "While computing the hessian, found that the jacobian of the user-provided function "
            "with respect to input 0 is independent of the input. This is not allowed in strict "
            "mode. You should ensure that your function is twice differentiable and that the "
            "jacobian depends on the inputs (this would be violated by a linear function for "
            "example).");
  EXPECT_EQ(error_of([&] { AF::vhp(linear, x, y, false, /*strict=*/true); }),
            error_of([&] { AF::hessian(linear, x, false, /*strict=*/true); }));
  // An output that does not depend on the input at all.
  auto constant = [](const Tensor& t) { return ones(t.shape(), DType::Float64); };
  EXPECT_EQ(error_of([&] { AF::jacobian(constant, x, false, /*strict=*/true); }),
            "Output 0 of the user-provided function does not require gradients. The outputs "
            "must be computed in a differentiable manner from the input when running in strict "
            "mode.");
}

TEST(Functional, BadArgumentsAreErrors) {
  const Tensor x = tensor({1.0, 2.0, 3.0}, DType::Float64);
  auto f = [](const Tensor& t) { return t.pow(2); };
  test::expect_error([&] { AF::vjp(f, x, ones({2}, DType::Float64)); },
                     "v has invalid size: should be [3] but got [2].");
  test::expect_error([&] { AF::vjp(f, x); },
                     "The vector v can only be None if the user-provided function returns a "
                     "single Tensor with a single element.");
  test::expect_error([&] { AF::jvp(f, x); },
                     "The vector v can only be None if the input to the user-provided function "
                     "is a single Tensor with a single element.");
  test::expect_error([&] { AF::hessian(f, x); },
                     "hessian: The Tensor returned by the function given to hessian should "
                     "contain a single element");
  test::expect_error(
      [&] {
        AF::hvp([](const std::vector<Tensor>& in) { return (in[0] * in[1]).sum(); }, {x, x}, {x});
      },
      "v is a tuple of invalid length: should be 2 but got 1.");
}

}  // namespace
}  // namespace ember
