// Every bad input raises ember::Error, never a crash or a silent wrong answer, and the message
// names the op, the shapes or dtypes involved and what was expected. An undefined tensor (a
// default-constructed Tensor, a gradient that was never computed) is such an input for every op
// and method.
//
// PyTorch 1.13's wording, where we follow it, is quoted next to each case.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/autograd/engine.h"
#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/ember.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/nn_ops.h"
#include "core/ops/reduce.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

// Succeeds when `f` throws an ember::Error whose message contains every one of `parts`.
testing::AssertionResult ThrowsWith(const std::function<void()>& f,
                                    const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts) {
      if (msg.find(part) == std::string::npos) {
        return testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << part << "\"";
      }
    }
    return testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return testing::AssertionFailure() << "threw a non-ember exception: " << e.what();
  }
  return testing::AssertionFailure() << "threw nothing";
}

TEST(ErrorsType, IsARuntimeError) {
  try {
    (void)(ones({2, 3}) + ones({4}));
    FAIL() << "expected an Error";
  } catch (const std::runtime_error& e) {  // ember::Error derives from std::runtime_error
    EXPECT_NE(dynamic_cast<const Error*>(&e), nullptr);
  }
}

// ---- broadcasting ----

TEST(ErrorsBroadcast, ShapeMismatchNamesTheOpAndBothShapes) {
  // torch.ones(2, 3) + torch.ones(4) -> The size of tensor a (3) must match the size of tensor b
  // (4) at non-singleton dimension 1
  EXPECT_TRUE(ThrowsWith(
      [] {
        (void)(ones({2, 3}) + ones({4}));
      },
      {"add", "[2, 3]", "[4]", "cannot be broadcast", "3 != 4"}));
  EXPECT_TRUE(ThrowsWith([] { (void)(ones({2, 3}) - ones({3, 2})); }, {"sub", "[2, 3]", "[3, 2]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)(ones({5}) * ones({2, 4})); }, {"mul", "[5]", "[2, 4]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)(ones({2}) / ones({3})); }, {"div", "[2]", "[3]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)maximum(ones({2}), ones({3})); }, {"maximum", "[2]", "[3]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)minimum(ones({2}), ones({3})); }, {"minimum", "[2]", "[3]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)lt(ones({2}), ones({3})); }, {"lt", "[2]", "[3]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)eq(ones({2, 2}), ones({3})); }, {"eq", "[2, 2]", "[3]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)where(ones({2}, DType::Bool), ones({3}), ones({3})); },
                         {"where", "[2]", "[3]"}));
}

TEST(ErrorsBroadcast, InPlaceDestinationsCannotGrow) {
  EXPECT_TRUE(ThrowsWith(
      [] {
        Tensor t = zeros({3});
        t.copy_(ones({2, 3}));
      },
      {"copy_", "[2, 3]", "[3]"}));
  EXPECT_TRUE(ThrowsWith(
      [] {
        Tensor t = zeros({3});
        t.add_(ones({2, 3}));
      },
      {"add_", "[2, 3]", "[3]"}));
  // A mask that would broadcast the tensor to a bigger shape.
  // torch.ones(3).masked_fill_(torch.ones(2, 3, dtype=torch.bool), 0) -> RuntimeError
  EXPECT_TRUE(ThrowsWith(
      [] {
        (void)ones({3}).masked_fill(ones({2, 3}, DType::Bool), 0);
      },
      {"masked_fill", "[2, 3]", "[3]"}));
  EXPECT_TRUE(ThrowsWith(
      [] {
        (void)ones({2, 3}).masked_fill(ones({4}, DType::Bool), 0);
      },
      {"masked_fill", "[2, 3]", "[4]"}));
}

// ---- dims ----

TEST(ErrorsDim, OutOfRangeDimsNameTheValidRange) {
  // torch.ones(2, 3).transpose(0, 3) -> Dimension out of range (expected to be in range of
  // [-2, 1], but got 3)
  Tensor t = ones({2, 3});
  EXPECT_TRUE(ThrowsWith([&] { (void)t.transpose(0, 3); },
                         {"transpose", "dimension out of range", "[-2, 1]", "but got 3"}));
  // torch.ones(2, 3).squeeze(-3) -> ... [-2, 1], but got -3
  EXPECT_TRUE(ThrowsWith([&] { (void)t.squeeze(-3); }, {"squeeze", "[-2, 1]", "but got -3"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.select(2, 0); }, {"select", "[-2, 1]", "but got 2"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.slice(-3, 0, 1); }, {"slice", "but got -3"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.unsqueeze(3); }, {"unsqueeze", "[-3, 2]", "but got 3"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.unsqueeze(-4); }, {"unsqueeze", "but got -4"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.permute({0, 2}); }, {"permute", "but got 2"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.flatten(0, 2); }, {"flatten", "but got 2"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.narrow(-3, 0, 1); }, {"narrow", "but got -3"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.size(2); }, {"size", "but got 2"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.stride(-3); }, {"stride", "but got -3"}));
  // 0-d tensors accept dims 0 and -1 only.
  EXPECT_TRUE(ThrowsWith([] { (void)tensor(1.0).unsqueeze(2); }, {"unsqueeze", "[-1, 0]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)tensor(1.0).select(0, 0); }, {"select", "0-dim"}));
}

TEST(ErrorsDim, BadPermutationsAndShapes) {
  Tensor t = ones({2, 3});
  // torch.ones(2, 3).permute(0, 0) -> permute(): duplicate dims are not allowed.
  EXPECT_TRUE(ThrowsWith([&] { (void)t.permute({0, 0}); }, {"permute", "repeated"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.permute({0}); }, {"permute", "[2, 3]"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.view({4, 2}); }, {"view", "[4, 2]", "6"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.reshape({-1, 4}); }, {"reshape", "[-1, 4]", "6"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.view({-1, -1}); }, {"view", "only one dimension"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.view({-2, 3}); }, {"view", "-2"}));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        (void)t.expand({2, 4});
      },
      {"expand", "(4)", "(3)", "[2, 4]", "[2, 3]"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.expand({3}); }, {"expand", "[3]", "[2, 3]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)ones({2, 3, 4}).t(); }, {"t", "[2, 3, 4]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)zeros({2, -3}); }, {"negative", "[2, -3]"}));
}

// ---- dtypes ----

TEST(ErrorsDType, MasksAndConditionsMustBeBool) {
  EXPECT_TRUE(ThrowsWith([] { (void)ones({3}).masked_fill(ones({3}), 0); },
                         {"masked_fill", "boolean", "float32"}));
  EXPECT_TRUE(ThrowsWith(
      [] {
        Tensor t = ones({3});
        t.masked_fill_(ones({3}, DType::Int64), 0);
      },
      {"masked_fill", "boolean", "int64"}));
  // torch.where(torch.ones(3), ...) -> where expected condition to be a boolean tensor, but got a
  // tensor with dtype Float
  EXPECT_TRUE(ThrowsWith([] { (void)where(ones({3}), ones({3}), ones({3})); },
                         {"where", "bool", "float32"}));
}

TEST(ErrorsDType, OtherDTypeMisuse) {
  EXPECT_TRUE(ThrowsWith(
      [] {
        tensor({1, 2}, DType::Int64).requires_grad_();
      },
      {"requires_grad_", "floating point", "int64"}));
  EXPECT_TRUE(
      ThrowsWith([] { (void)ones({2}).data_ptr<int64_t>(); }, {"data_ptr", "float32", "int64"}));
  Tensor b = ones({2}, DType::Bool);
  EXPECT_TRUE(ThrowsWith([&] { (void)(b - b); }, {"sub", "bool"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)neg(b); }, {"neg", "bool"}));
  EXPECT_TRUE(ThrowsWith([] { (void)gelu(ones({2}), "fast"); }, {"gelu", "'fast'"}));
}

// ---- views and indices ----

TEST(ErrorsView, IncompatibleStrides) {
  // x.t().view(-1) -> view size is not compatible with input tensor's size and stride (at least
  // one dimension spans across two contiguous subspaces). Use .reshape(...) instead.
  Tensor x = ones({2, 3});
  EXPECT_TRUE(ThrowsWith([&] { (void)x.t().view({-1}); },
                         {"view", "not compatible", "[3, 2]", "[1, 3]", "reshape"}));
  EXPECT_TRUE(ThrowsWith(
      [] {
        (void)ones({4, 4}).slice(1, 0, 2).view({8});
      },
      {"view", "[4, 2]", "[4, 1]", "[8]"}));
}

TEST(ErrorsIndex, OutOfRangeIndices) {
  Tensor t = ones({3, 4});
  // torch.ones(3, 4).select(0, 5) -> select(): index 5 out of range for tensor of size [3, 4] at
  // dimension 0
  EXPECT_TRUE(ThrowsWith([&] { (void)t.select(0, 5); }, {"select", "index 5", "size 3", "[3, 4]"}));
  // torch.ones(3, 4)[:, -5] -> index -5 is out of bounds for dimension 1 with size 4
  EXPECT_TRUE(ThrowsWith([&] { (void)t.select(1, -5); }, {"select", "index -5", "size 4"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t[3]; }, {"select", "index 3", "size 3"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.index({Slice(), 4}); }, {"select", "index 4", "size 4"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.index({0, 0, 0}); }, {"index", "too many", "[3, 4]"}));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        (void)t.at({3, 0});
      },
      {"at", "index 3", "out of bounds", "dimension 0", "size 3"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.at({0, -5}); }, {"at", "index -5", "dimension 1"}));
  EXPECT_TRUE(ThrowsWith([&] { (void)t.at({0}); }, {"at", "expected 2 indices", "[3, 4]"}));
  EXPECT_TRUE(ThrowsWith([&] { t.set({0, 4}, 1); }, {"set", "index 4", "size 4"}));
  // torch.ones(3).narrow(0, 2, 2) -> start (2) + length (2) exceeds dimension size (3).
  EXPECT_TRUE(ThrowsWith([] { (void)ones({3}).narrow(0, 2, 2); },
                         {"narrow", "start (2)", "length (2)", "(3)"}));
  EXPECT_TRUE(ThrowsWith([] { (void)ones({3}).slice(0, 0, 2, 0); }, {"slice", "step"}));
}

TEST(ErrorsValue, ItemAndConstruction) {
  EXPECT_TRUE(ThrowsWith([] { (void)ones({2, 2}).item(); }, {"item", "4 elements", "[2, 2]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)tensor({{1, 2}, {3}}); }, {"tensor", "length 2", "got 1"}));
  EXPECT_TRUE(ThrowsWith([] { (void)tensor({{1, 2}, 3}); }, {"tensor", "uneven"}));
  EXPECT_TRUE(ThrowsWith(
      [] {
        (void)from_vector({1, 2, 3}, {2, 2});
      },
      {"from_vector", "3 values", "[2, 2]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)arange(0, 1, 0); }, {"arange", "step"}));
  EXPECT_TRUE(ThrowsWith([] { (void)triu(ones({4})); }, {"triu", "2 dimensions", "[4]"}));
  EXPECT_TRUE(ThrowsWith([] { (void)tril(ones({4})); }, {"tril", "[4]"}));
}

// ---- autograd ----

TEST(ErrorsAutograd, BackwardOnANonScalarWithoutAGradient) {
  // torch.ones(3, requires_grad=True).mul(2).backward() -> grad can be implicitly created only
  // for scalar outputs
  Tensor x = ones({3}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_TRUE(ThrowsWith([&] { y.backward(); },
                         {"backward", "implicitly created only for scalar outputs", "[3]"}));
  EXPECT_TRUE(ThrowsWith([&] { y.backward(ones({3, 1})); }, {"backward", "[3, 1]", "[3]"}));
  EXPECT_TRUE(ThrowsWith([] { ones({1}).backward(); }, {"backward", "does not require grad"}));
}

TEST(ErrorsAutograd, GraphMisuse) {
  Tensor x = ones({2}).requires_grad_();
  EXPECT_TRUE(
      ThrowsWith([&] { x.mul_(2.0); }, {"mul_", "leaf Variable that requires grad", "in-place"}));
  Tensor loss = x.exp().sum();
  loss.backward();
  EXPECT_TRUE(
      ThrowsWith([&] { loss.backward(); }, {"ExpBackward0", "second time", "retain_graph"}));
  Tensor e = x.exp();
  Tensor l2 = e.sum();
  e.masked_fill_(ones({2}, DType::Bool), 0);
  EXPECT_TRUE(ThrowsWith([&] { l2.backward(); },
                         {"modified by an inplace operation", "ExpBackward0", "version"}));
  EXPECT_TRUE(
      ThrowsWith([&] { (void)autograd::grad({(x * 2.0).sum()}, {ones({1}).requires_grad_()}); },
                 {"autograd::grad", "allow_unused"}));
  EXPECT_TRUE(ThrowsWith([] { ones({1}).register_hook([](const Tensor& g) { return g; }); },
                         {"register_hook", "doesn't require gradient"}));
  EXPECT_TRUE(ThrowsWith([] { ones({1}).retain_grad(); }, {"retain_grad", "requires_grad=False"}));
}

TEST(ErrorsAutograd, AHookThatChangesTheShapeIsCaught) {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = x * 2.0;
  y.register_hook([](const Tensor&) { return ones({4}); });
  EXPECT_TRUE(ThrowsWith([&] { y.sum().backward(); }, {"MulBackward0", "hook", "[4]", "[3]"}));
  Tensor leaf = ones({2}).requires_grad_();
  leaf.register_hook([](const Tensor&) { return ones({2, 2}); });
  EXPECT_TRUE(ThrowsWith([&] { (leaf * 2.0).sum().backward(); },
                         {"AccumulateGrad", "hook", "[2, 2]", "[2]"}));
  EXPECT_FALSE(leaf.grad().defined());
}

// ---- undefined tensors ----

constexpr const char* kUndefined =
    ": expected a defined tensor, got an undefined one (a gradient that was never computed?)";

std::string msg(const std::string& op) { return op + kUndefined; }

using test::expect_error;

TEST(ErrorsUndefined, MethodsNameThemselves) {
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

TEST(ErrorsUndefined, FreeFunctionsNameTheOp) {
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

// Functions that read an argument's shape or dtype before anything else name themselves, not the
// accessor ("shape: expected a defined tensor").
TEST(ErrorsUndefined, FunctionsThatReadShapesFirstNameTheOp) {
  Tensor u, x = ones({2, 2});
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"equal", [&] { equal(u, x); }},          {"equal", [&] { equal(x, u); }},
      {"allclose", [&] { allclose(u, x); }},    {"allclose", [&] { allclose(x, u); }},
      {"to_dot", [&] { autograd::to_dot(u); }}, {"expand_as", [&] { x.expand_as(u); }},
      {"expand_as", [&] { u.expand_as(x); }},   {"sum_to", [&] { sum_to(u, {2}, "SumBackward0"); }},
      {"uniform_", [&] { uniform_(u); }},       {"normal_", [&] { normal_(u); }},
  };
  for (const auto& [op, call] : calls) {
    SCOPED_TRACE(op);
    EXPECT_EQ(test::error_of(call), msg(op));
  }
}

// The most common SGD-loop bug: a parameter that got no gradient.
TEST(ErrorsUndefined, ParameterWithoutGradientInAnUpdate) {
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

// ---- memory that cannot be had ----

// A kernel's scratch memory that cannot be had (matmul's packing workspace, 64 MiB for this
// skinny product, under an address-space limit that the inputs and the output fit in) is an
// Error naming the op and the shapes, not a std::bad_alloc. In a child process (a death test),
// whose limit the other tests do not share.
TEST(ErrorsMemory, AKernelsScratchMemoryIsAnError) {
  if (!detail::allocator_caches()) {
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: no limit fits it";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto product_at_the_limit = [] {
    const Tensor a = ones({16, int64_t{1} << 20}), b = ones({int64_t{1} << 20, 3});
    if (!test::limit_address_space(std::size_t{32} << 20)) std::_Exit(2);
    try {
      matmul(a, b);
    } catch (const Error& e) {
      std::fputs(e.what(), stderr);
      std::_Exit(0);
    } catch (const std::bad_alloc&) {
      std::_Exit(4);
    }
    std::_Exit(5);
  };
  EXPECT_EXIT(product_at_the_limit(), ::testing::ExitedWithCode(0),
              "matmul: not enough memory \\(mm of inputs of shapes \\[16, 1048576\\], "
              "\\[1048576, 3\\]\\)");
}

// The keys of a KV cache may be an expanded view with more rows than any memory holds: the fused
// attention's score tiles and packed panels for them count past int64, and their sizes must not
// wrap around to small buffers the kernel would overrun. It is an Error naming the op and the
// shapes, for one new row (K and V read in place) and for a block of them (K and V packed).
TEST(ErrorsMemory, AttentionOverKeysTooManyForMemory) {
  for (const int64_t keys : {int64_t{1} << 58, int64_t{1} << 61}) {
    for (const int64_t rows : {int64_t{1}, int64_t{16}}) {
      const Tensor q = ones({1, 1, rows, 8});
      const Tensor kv = ones({1, 1, 1, 8}).expand({1, 1, keys, 8});
      NoGradGuard no_grad;
      EXPECT_TRUE(ThrowsWith([&] { causal_attention(q, kv, kv); },
                             {"causal_attention: not enough memory (causal_attention of inputs of "
                              "shapes [1, 1, " +
                              std::to_string(rows) + ", 8], [1, 1, " + std::to_string(keys) +
                              ", 8], [1, 1, " + std::to_string(keys) + ", 8])"}))
          << rows << " rows, " << keys << " keys";
    }
  }
}

// ---- sizes beyond int64 ----

// An expanded view of one element may have more elements than int64 counts; an op that would
// copy it into a buffer of its own refuses, naming itself (not the allocation inside it).
TEST(ErrorsSize, AnOpOnAHugeExpandedViewNamesItself) {
  const Tensor big = zeros({1}).expand({test::kHugeDim, test::kHugeDim});
  const Tensor mask = zeros({1}, DType::Bool).expand(big.shape());
  const std::string sizes = "[4611686018427387904, 4611686018427387904]";
  auto storage = [&](const std::string& op, int itemsize) {
    return op + ": Storage size calculation overflowed with sizes=" + sizes +
           " and itemsize=" + std::to_string(itemsize);
  };
  auto count = [&](const std::string& op) {
    return op + ": the number of elements of shape " + sizes + " overflows int64";
  };
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {storage("contiguous", 4), [&] { big.contiguous(); }},
      {storage("clone", 4), [&] { big.clone(); }},
      {storage("to", 8), [&] { big.to(DType::Float64); }},
      {storage("add", 4), [&] { big + 1.0; }},
      {storage("add", 4), [&] { big + big; }},
      {storage("mul", 4), [&] { big * 2.0; }},
      {storage("neg", 4), [&] { -big; }},
      {storage("exp", 4), [&] { exp(big); }},
      {storage("pow", 4), [&] { pow(big, 2.0); }},
      {storage("tanh", 4), [&] { tanh(big); }},
      {storage("relu", 4), [&] { relu(big); }},
      {storage("gelu", 4), [&] { gelu(big, "tanh"); }},
      {storage("clamp", 4), [&] { clamp(big, 0.0, 1.0); }},
      {storage("eq", 1), [&] { eq(big, 0.0); }},
      {storage("where", 4), [&] { where(mask, big, big); }},
      {storage("addcmul", 4), [&] { addcmul(big, big, big); }},
      {storage("triu", 4), [&] { triu(big); }},
      {storage("softmax", 4), [&] { softmax(big, 1); }},
      {storage("argsort", 4), [&] { argsort(big); }},
      {storage("zeros_like", 4), [&] { zeros_like(big); }},
      {storage("rand_like", 4), [&] { rand_like(big); }},
      {"matmul: Storage size calculation overflowed with sizes=[4611686018427387904, 2] and "
       "itemsize=4",
       [&] {
         matmul(big, zeros({1}).expand({test::kHugeDim, 2}));
       }},
      {count("reshape"), [&] { big.reshape({-1}); }},
      {count("dropout"), [&] { dropout(big, 0.5); }},
      {count("copy_"), [&] { zeros({2}).copy_(big); }},
  };
  for (const auto& [message, call] : calls) {
    SCOPED_TRACE(message);
    EXPECT_EQ(test::error_of(call), message);
  }
  // Outside any op, the allocation names itself.
  EXPECT_EQ(test::error_of([] {
              empty({test::kHugeDim, test::kHugeDim});
            }),
            "empty: Storage size calculation overflowed with sizes=" + sizes + " and itemsize=4");
}

// uniform_ takes PyTorch's bounds: from and to finite in the tensor's dtype and to - from no
// larger than its largest value ("from is out of bounds for float", "uniform_ expects to-from <=
// std::numeric_limits<Float>::max()"); otherwise it would fill inf and nan. Within them it fills.
TEST(ErrorsRandom, UniformRangeOutsideTheDtypeIsAnError) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor f = zeros({3});
  Tensor d = zeros({3}, DType::Float64);
  expect_error([&] { uniform_(f, -1e300, 1e30); },
               "uniform_: from=-1e+300 is out of bounds for float32");
  expect_error([&] { uniform_(f, 0, inf); }, "uniform_: to=inf is out of bounds for float32");
  expect_error([&] { uniform_(d, -inf, inf); }, "uniform_: from=-inf is out of bounds for float64");
  expect_error([&] { uniform_(d, nan, 1); }, "uniform_: from=nan is out of bounds for float64");
  expect_error([&] { uniform_(d, 0, nan); }, "uniform_: to=nan is out of bounds for float64");
  expect_error([&] { uniform_(f, -3e38, 3e38); },
               "uniform_: expects to - from <= the largest float32, but found to=3e+38 and "
               "from=-3e+38");
  expect_error([&] { uniform_(d, -1.7e308, 1.7e308); }, "expects to - from <= the largest float64");
  expect_error([&] { uniform_(f, 1, 0); }, "uniform_: expects to return a [from, to) range");
  // The widest ranges that fit are filled with finite numbers in [from, to).
  uniform_(d, -1e300, 1e300);
  uniform_(f, -3.4028234663852886e38, 0);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isfinite(d.at({i})) && std::abs(d.at({i})) <= 1e300) << d.at({i});
    EXPECT_TRUE(std::isfinite(f.at({i})) && f.at({i}) <= 0) << f.at({i});
  }
}

// An op whose index or sample count is too large for memory names itself, not the step that
// failed (the factory `empty`, or `to_vector` reading an expanded index).
TEST(ErrorsMemory, IndexAndSampleCountsTooLargeForMemoryNameTheOp) {
  const int64_t big = int64_t{1} << 40;
  const Tensor index = zeros({1}, DType::Int64).expand({big});
  expect_error(
      [&] { gather(ones({2}), 0, index); },
      "gather: cannot allocate 1099511627776 values for a tensor of shape [1099511627776]");
  expect_error([&] { embedding(ones({2, 2}), index); }, "embedding: cannot allocate");
  expect_error(
      [&] {
        multinomial(tensor({0.5, 0.5}), big, true);
      },
      "multinomial: cannot allocate a tensor of shape [1099511627776]");
  expect_error(
      [&] {
        multinomial(ones({1, 3}).expand({big, 3}), 2, true);
      },
      "multinomial: cannot allocate a tensor of shape [1099511627776, 2]");
  expect_error(
      [&] {
        multinomial(tensor({0.5, 0.5}), std::numeric_limits<int64_t>::max(), true);
      },
      "multinomial: Storage size calculation overflowed");
  // Outside any op, to_vector names itself.
  expect_error([&] { index.to_vector<int64_t>(); }, "to_vector: cannot allocate 1099511627776");
}

}  // namespace
}  // namespace ember
