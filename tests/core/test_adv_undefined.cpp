// Adversarial undefined tensors: every op and method on an undefined tensor
// (a gradient that was never computed, a default-constructed Tensor) is an Error naming the op.
#include <gtest/gtest.h>

#include "core/ember.h"
#include "core/ops/nn_ops.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;

constexpr const char* kUndefined =
    ": expected a defined tensor, got an undefined one (a gradient that was never computed?)";

std::string msg(const std::string& op) { return op + kUndefined; }

TEST(AdvUndefined, MethodsNameThemselves) {
  Tensor u;
  expect_error([&] { u.sum(); }, msg("sum"));
  expect_error([&] { u.sum(0); }, msg("sum"));
  expect_error([&] { u.mean(); }, msg("mean"));
  expect_error([&] { u.mean(-1, true); }, msg("mean"));
  expect_error([&] { u.numel(); }, msg("numel"));
  expect_error([&] { u.dim(); }, msg("dim"));
  expect_error([&] { u.shape(); }, msg("shape"));
  expect_error([&] { u.size(0); }, msg("size"));
  expect_error([&] { u.stride(0); }, msg("stride"));
  expect_error([&] { u.dtype(); }, msg("dtype"));
  expect_error([&] { u.item(); }, msg("item"));
  expect_error([&] { u.at({0}); }, msg("at"));
  expect_error([&] { u.set({0}, 1.0); }, msg("set"));
  expect_error([&] { u.to_vector<float>(); }, msg("to_vector"));
  expect_error([&] { u.data_ptr<float>(); }, msg("data_ptr"));
  expect_error([&] { u.contiguous(); }, msg("contiguous"));
  expect_error([&] { u.clone(); }, msg("clone"));
  expect_error([&] { u.detach(); }, msg("detach"));
  expect_error([&] { u.to(DType::Float64); }, msg("to"));
  expect_error([&] { u.view({1}); }, msg("view"));
  expect_error([&] { u.reshape({-1}); }, msg("reshape"));
  expect_error([&] { u.transpose(0, 1); }, msg("transpose"));
  expect_error([&] { u.t(); }, msg("t"));
  expect_error([&] { u.permute({0}); }, msg("permute"));
  expect_error([&] { u.unsqueeze(0); }, msg("unsqueeze"));
  expect_error([&] { u.squeeze(); }, msg("squeeze"));
  expect_error([&] { u.flatten(); }, msg("flatten"));
  expect_error([&] { u.expand({2}); }, msg("expand"));
  expect_error([&] { u[0]; }, msg("select"));
  expect_error([&] { u.slice(0, 0, 1); }, msg("slice"));
  expect_error([&] { u.narrow(0, 0, 1); }, msg("narrow"));
  expect_error([&] { u.index({0}); }, msg("index"));
  expect_error([&] { u.split(1); }, msg("split"));
  expect_error([&] { u.chunk(2); }, msg("chunk"));
  expect_error([&] { u.exp(); }, msg("exp"));
  expect_error([&] { u.pow(2.0); }, msg("pow"));
  expect_error([&] { u.softmax(0); }, msg("softmax"));
  expect_error([&] { u.argmax(0); }, msg("argmax"));
  expect_error([&] { u.fill_(1.0); }, msg("fill_"));
  expect_error([&] { u.zero_(); }, msg("fill_"));
  expect_error([&] { u.mul_(2.0); }, msg("mul_"));
  expect_error([&] { u.add_(ones({1})); }, msg("add_"));
  expect_error([&] { u.copy_(ones({1})); }, msg("copy_"));
  expect_error([&] { u.requires_grad_(); }, msg("requires_grad_"));
  expect_error([&] { u.requires_grad(); }, msg("requires_grad"));
  expect_error([&] { u.grad(); }, msg("grad"));
  expect_error([&] { u.set_grad(ones({1})); }, msg("set_grad"));
  expect_error([&] { u.grad_fn(); }, msg("grad_fn"));
  expect_error([&] { u.is_leaf(); }, msg("is_leaf"));
  expect_error([&] { u.backward(); }, msg("backward"));
  expect_error([&] { u.retain_grad(); }, msg("retain_grad"));
  expect_error([&] { u.register_hook([](const Tensor& g) { return g; }); }, msg("register_hook"));
  expect_error([&] { u.version(); }, msg("storage"));
  EXPECT_EQ(repr(u), "None");  // printing an undefined tensor is fine, as print(None)
}

TEST(AdvUndefined, FreeFunctionsNameTheOp) {
  Tensor u, x = ones({2, 2});
  expect_error([&] { sum(u); }, msg("sum"));
  expect_error([&] { matmul(u, x); }, msg("matmul"));
  expect_error([&] { matmul(x, u); }, msg("matmul"));
  expect_error([&] { mm(x, u); }, msg("mm"));
  expect_error([&] { add(x, u); }, msg("add"));
  expect_error([&] { u + x; }, msg("add"));
  expect_error([&] { x* u; }, msg("mul"));
  expect_error([&] { u / 2.0; }, msg("div"));
  expect_error([&] { 1.0 - u; }, msg("rsub"));
  expect_error([&] { -u; }, msg("neg"));
  expect_error([&] { relu(u); }, msg("relu"));
  expect_error([&] { where(u, x, x); }, msg("where"));
  expect_error([&] { masked_fill(x, u, 0.0); }, msg("masked_fill"));
  expect_error([&] { cat({x, u}); }, msg("cat"));
  expect_error([&] { stack({u}); }, msg("stack"));
  expect_error([&] { var(u); }, msg("var"));
  expect_error([&] { max(u); }, msg("max"));
  expect_error([&] { log_softmax(u, 0); }, msg("log_softmax"));
  expect_error([&] { linear(u, x, Tensor()); }, msg("linear"));
  expect_error([&] { linear(x, u, Tensor()); }, msg("linear"));
  expect_error([&] { layer_norm(u, {2}, Tensor(), Tensor(), 1e-5); }, msg("layer_norm"));
  expect_error([&] { embedding(u, zeros({1}, DType::Int64)); }, msg("embedding"));
  expect_error([&] { triu(u); }, msg("triu"));
  expect_error([&] { eq(u, 1.0); }, msg("eq"));
  expect_error([&] { zeros_like(u); }, msg("zeros_like"));
  expect_error([&] { ones_like(u); }, msg("ones_like"));
  expect_error([&] { full_like(u, 1.0); }, msg("full_like"));
  expect_error([&] { empty_like(u); }, msg("empty_like"));
  expect_error([&] { rand_like(u); }, msg("rand_like"));
  expect_error([&] { randn_like(u); }, msg("randn_like"));
  expect_error([&] { dropout(u, 0.5, true); }, msg("dropout"));
  expect_error([&] { x.copy_(u); }, msg("copy_"));
  expect_error([&] { autograd::backward({u}); },
               "backward: element 0 of tensors does not require grad");
  // layer_norm's weight and bias may be undefined (elementwise_affine=False).
  EXPECT_EQ(layer_norm(x, {2}, Tensor(), Tensor(), 1e-5).shape(), (Shape{2, 2}));
}

// The most common SGD-loop bug: a parameter that got no gradient.
TEST(AdvUndefined, ParameterWithoutGradientInAnUpdate) {
  Tensor w = ones({3}).requires_grad_();
  Tensor unused = ones({3}).requires_grad_();
  (w * 2.0).sum().backward();
  const double lr = 0.1;
  expect_error([&] { unused.grad() * -lr; }, msg("mul"));
  expect_error(
      [&] {
        NoGradGuard no_grad;
        unused.add_(unused.grad() * -lr);
      },
      msg("mul"));
  Tensor step = w.grad() * -lr;
  test::expect_values(step, {-0.2, -0.2, -0.2});
}

}  // namespace
}  // namespace ember
