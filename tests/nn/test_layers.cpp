// Tests of the nn layers and ops against PyTorch 1.13.
//
// Most expected values come from tests/fixtures/nn_layers.txt, written by
// scripts/fixtures/gen_nn_layers.py (its docstring describes the format). Each fixture case
// starts from torch.manual_seed(seed); the test replays the same calls after
// ember::manual_seed(seed). Initial weights and random inputs must match bit for bit; outputs
// and gradients (sums computed in another order) to within float32 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/graph/node.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/nn_ops.h"
#include "core/ops/reduce.h"
#include "core/tensor/random.h"
#include "core/testing_gtest.h"
#include "nn/container.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

using test::bits_of;
using test::error_of;
using test::expect_allclose;
using test::grad_fn_name;

// ---------------------------------------------------------------------------------------------
// The fixture file

const test::Fixture& fixture() { return test::fixture_file("nn_layers.txt"); }

Tensor fixture_tensor(const std::string& name) { return fixture().tensor(name); }

// `actual` has the fixture tensor's dtype, shape and exactly its values (for a summarised
// tensor: its first and last 16 and the hash of all).
void expect_bits(const Tensor& actual, const std::string& name) {
  SCOPED_TRACE(name);
  fixture().expect_exact(actual, name);
}

// `actual` has the fixture tensor's shape and values to within float32 rounding of sums.
void expect_close(const Tensor& actual, const std::string& name, double rtol = 1e-5,
                  double atol = 1e-6) {
  SCOPED_TRACE(name);
  expect_allclose(actual, fixture_tensor(name), rtol, atol);
}

const std::vector<uint64_t> kSeeds = {123, 789, 0};

std::string case_name(uint64_t seed, const std::string& name) {
  return "seed" + std::to_string(seed) + "/" + name + "/";
}

// loss = (out * c).sum() with c = rand(out.shape), drawn after out, as the fixture script does.
Tensor weighted_sum_backward(const Tensor& out) {
  Tensor c = rand(out.shape());
  sum(out * c).backward();
  return c;
}

// ---------------------------------------------------------------------------------------------
// Linear

TEST(Linear, InitialWeightsMatchPyTorchBitForBit) {
  struct Config {
    const char* name;
    int64_t in, out;
    bool bias;
  };
  for (uint64_t seed : kSeeds) {
    for (Config c : {Config{"linear_3_2", 3, 2, true}, Config{"linear_3_2_nobias", 3, 2, false},
                     Config{"linear_5_4", 5, 4, true}, Config{"linear_768_768", 768, 768, true}}) {
      manual_seed(seed);
      Linear layer(c.in, c.out, c.bias);
      const std::string prefix = case_name(seed, c.name);
      expect_bits(layer.weight, prefix + "weight");
      if (c.bias) expect_bits(layer.bias, prefix + "bias");
    }
  }
}

TEST(Linear, TheBooksSeed123Weights) {
  // core/base/RNG.md §5: torch.manual_seed(123); nn.Linear(3, 2).
  manual_seed(123);
  Linear layer(3, 2);
  EXPECT_EQ(bits_of(layer.weight), (std::vector<uint32_t>{0xbe711478, 0x3c9caaef, 0xbe92d05d,
                                                          0x3e5ef3ba, 0xbefbdecd, 0x3ed8b0b2}));
  EXPECT_EQ(bits_of(layer.bias), (std::vector<uint32_t>{0xbed6db3d, 0xbeeb045d}));
  EXPECT_EQ(layer.weight.shape(), (Shape{2, 3}));
}

TEST(Linear, SequentialDrawsItsLayersInOrder) {
  for (uint64_t seed : kSeeds) {
    manual_seed(seed);
    Sequential mlp(
        {std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(), std::make_shared<Linear>(4, 2)});
    for (const auto& [key, tensor] : mlp.state_dict()) {
      expect_bits(tensor, case_name(seed, "sequential") + key);
    }
  }
}

TEST(Linear, ForwardAndGradientsMatchPyTorch) {
  struct Config {
    const char* name;
    Shape x_shape;
    bool bias;
    const char* grad_fn;  // what PyTorch prints for out.grad_fn
  };
  const std::vector<Config> configs = {
      {"linear_forward_2d", {3, 5}, true, "AddmmBackward0"},
      {"linear_forward_3d", {2, 3, 5}, true, "ViewBackward0"},
      {"linear_forward_3d_nobias", {2, 3, 5}, false, "UnsafeViewBackward0"},
      {"linear_forward_1d", {5}, true, "AddBackward0"},
  };
  for (uint64_t seed : kSeeds) {
    for (const Config& c : configs) {
      const std::string prefix = case_name(seed, c.name);
      manual_seed(seed);
      Linear layer(5, 4, c.bias);
      Tensor x = rand(c.x_shape).requires_grad_();
      Tensor out = layer(x);
      EXPECT_EQ(grad_fn_name(out), c.grad_fn) << prefix;
      Tensor weights = weighted_sum_backward(out);
      expect_bits(x, prefix + "x");
      expect_bits(weights, prefix + "c");
      expect_close(out, prefix + "out");
      expect_close(layer.weight.grad(), prefix + "weight.grad");
      if (c.bias) expect_close(layer.bias.grad(), prefix + "bias.grad");
      expect_close(x.grad(), prefix + "x.grad");
    }
  }
}

TEST(Linear, DispatchesLikeAtLinear) {
  // The grad_fn PyTorch 1.13 prints for nn.Linear(3, 2[, bias=False])(x).
  manual_seed(0);
  Linear with_bias(3, 2), without_bias(3, 2, false);
  const Tensor x2 = rand({4, 3}), x3 = rand({2, 4, 3}), x4 = rand({2, 2, 4, 3});
  const Tensor x3_transposed = rand({4, 2, 3}).transpose(0, 1);
  EXPECT_EQ(grad_fn_name(with_bias(x2)), "AddmmBackward0");
  EXPECT_EQ(grad_fn_name(with_bias(x3)), "ViewBackward0");
  EXPECT_EQ(grad_fn_name(with_bias(x4)), "AddBackward0");
  EXPECT_EQ(grad_fn_name(with_bias(x3_transposed)), "AddBackward0");
  EXPECT_EQ(grad_fn_name(without_bias(x2)), "MmBackward0");
  EXPECT_EQ(grad_fn_name(without_bias(x3)), "UnsafeViewBackward0");
  EXPECT_EQ(grad_fn_name(without_bias(x4)), "UnsafeViewBackward0");
  EXPECT_EQ(grad_fn_name(without_bias(x3_transposed)), "UnsafeViewBackward0");
  // Every path computes the same numbers.
  const Tensor reference = matmul(x3_transposed, with_bias.weight.t()) + with_bias.bias;
  EXPECT_TRUE(allclose(with_bias(x3_transposed), reference));
  EXPECT_TRUE(allclose(with_bias(x3_transposed.contiguous()), reference, 1e-6, 1e-7));
  EXPECT_EQ(with_bias(x4).shape(), (Shape{2, 2, 4, 2}));
}

TEST(Linear, WrongInputSizeNamesTheShapes) {
  Linear layer(3, 2);
  EXPECT_EQ(error_of([&] {
              layer(ones({4, 5}));
            }),
            "linear: input of shape [4, 5] does not end in in_features=3 (weight of shape [2, 3])");
}

// A bias of another dtype than the weight's is an Error whatever the input's rank: the addmm of a
// 2-d input refused it, while a 1-d or 4-d input (matmul, then + bias) returned a float64 result
// for a float32 input and weight.
TEST(Linear, ABiasOfAnotherDtypeIsAnErrorForEveryInputRank) {
  const Tensor weight = ones({2, 3}), bias = ones({2}, DType::Float64);
  for (const Shape& shape : {Shape{3}, Shape{4, 3}, Shape{5, 4, 3}, Shape{2, 5, 4, 3}}) {
    EXPECT_EQ(
        error_of([&] { linear(ones(shape), weight, bias); }),
        "linear: expected a bias of the weight's dtype float32, got float64 (input of shape " +
            shape_str(shape) + ", weight of shape [2, 3])");
  }
  EXPECT_EQ(error_of([&] {
              RowPanelScope scope;
              NoGradGuard no_grad;
              linear(ones({3}), weight, bias);
            }),
            "linear: expected a bias of the weight's dtype float32, got float64 (input of shape "
            "[3], weight of shape [2, 3])");
}

// addmm multiplies int64 as matmul does (and PyTorch's addmm), so linear gives an int64 input's
// product with a bias whatever its rank or layout: a 2-d or a contiguous 3-d input takes addmm,
// a 1-d or a transposed 3-d one matmul then + bias, and all give the same values.
TEST(Linear, Int64InputsWithABiasForEveryRank) {
  const Tensor w = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Int64);
  const Tensor bias = tensor({10, -20}, DType::Int64);
  const Tensor x = tensor({{1, 0, 2}, {3, 1, 1}}, DType::Int64);
  const Tensor expected = tensor({{17, -4}, {18, 3}}, DType::Int64);  // x w^T + bias
  for (const Tensor& y :
       {linear(x, w, bias), linear(x.unsqueeze(0), w, bias)[0],
        linear(x.t().unsqueeze(0).transpose(1, 2), w, bias)[0], addmm(bias, x, w.t()),
        addmm(tensor({{10}, {10}}, DType::Int64), x, w.t()) - tensor({0, 30}, DType::Int64)}) {
    EXPECT_EQ(y.dtype(), DType::Int64);
    EXPECT_TRUE(equal(y, expected)) << y;
  }
  EXPECT_TRUE(equal(linear(x[1], w, bias), expected[1]));
  EXPECT_EQ(error_of([] {
              addmm(ones({2}, DType::Bool), ones({1, 2}, DType::Bool), ones({2, 2}, DType::Bool));
            }),
            "addmm: not implemented for bool tensors (shapes [2], [1, 2] and [2, 2])");
  EXPECT_EQ(error_of([&] { addmm(bias.to(DType::Float32), x, w.t()); }),
            "addmm: expected bias, a and b of one dtype, got float32, int64 and int64");
}

TEST(Linear, AddmmBroadcastsItsBias) {
  const Tensor bias = tensor({10, 20});
  const Tensor a = tensor({{1, 2}, {3, 4}, {5, 6}});
  const Tensor b = tensor({{1, 0}, {0, 1}});
  EXPECT_TRUE(equal(addmm(bias, a, b), tensor({{11, 22}, {13, 24}, {15, 26}})));
  EXPECT_TRUE(equal(addmm(ones({3, 2}), a, b), a + 1.0));
  EXPECT_EQ(error_of([&] { addmm(ones({3}), a, b); }),
            "addmm: bias of shape [3] cannot be broadcast to the product's shape [3, 2]");
}

// ---------------------------------------------------------------------------------------------
// Embedding

TEST(Embedding, InitialWeightsMatchPyTorchBitForBit) {
  for (uint64_t seed : kSeeds) {
    manual_seed(seed);
    expect_bits(Embedding(10, 4).weight, case_name(seed, "embedding_10_4") + "weight");
    manual_seed(seed);  // 6 values: the serial normal path
    expect_bits(Embedding(3, 2).weight, case_name(seed, "embedding_3_2") + "weight");
  }
}

TEST(Embedding, ForwardAndGradientMatchPyTorch) {
  for (uint64_t seed : kSeeds) {
    const std::string prefix = case_name(seed, "embedding_forward");
    manual_seed(seed);
    Embedding emb(10, 4);
    Tensor out = emb(tensor({{1, 2, 1}, {0, 9, 1}}, DType::Int64));
    EXPECT_EQ(grad_fn_name(out), "EmbeddingBackward0");
    weighted_sum_backward(out);
    expect_bits(out, prefix + "out");  // a lookup: exact
    expect_close(emb.weight.grad(), prefix + "weight.grad");
  }
}

TEST(Embedding, OutOfRangeIndexIsAnError) {
  Embedding emb(5, 3);
  EXPECT_EQ(error_of([&] {
              emb(tensor({1, 5}, DType::Int64));
            }),
            "embedding: index 5 is out of range for num_embeddings=5 (expected 0 <= index < 5)");
  EXPECT_EQ(error_of([&] { emb(tensor({-1}, DType::Int64)); }),
            "embedding: index -1 is out of range for num_embeddings=5 (expected 0 <= index < 5)");
  EXPECT_EQ(error_of([&] { emb(tensor({1.0})); }),
            "embedding: expected indices of dtype int64, got float32");
}

TEST(Embedding, AnyIndexShape) {
  Embedding emb(5, 3);
  EXPECT_EQ(emb(scalar_tensor(2, DType::Int64)).shape(), (Shape{3}));
  EXPECT_TRUE(equal(emb(scalar_tensor(2, DType::Int64)), emb.weight[2]));
  EXPECT_EQ(emb(zeros({2, 0}, DType::Int64)).shape(), (Shape{2, 0, 3}));
  Tensor transposed = tensor({{0, 1}, {2, 3}}, DType::Int64).t();
  EXPECT_TRUE(equal(emb(transposed)[0][1], emb.weight[2]));
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

TEST(LayerNorm, ForwardAndGradientsMatchPyTorch) {
  for (uint64_t seed : kSeeds) {
    std::string prefix = case_name(seed, "layer_norm_affine");
    manual_seed(seed);
    Tensor x = randn({2, 3, 5}).requires_grad_();
    Tensor w = rand({5}).requires_grad_();
    Tensor b = rand({5}).requires_grad_();
    Tensor out = layer_norm(x, {5}, w, b);
    EXPECT_EQ(grad_fn_name(out), "NativeLayerNormBackward0");
    weighted_sum_backward(out);
    expect_bits(x, prefix + "x");
    expect_close(out, prefix + "out");
    expect_close(x.grad(), prefix + "x.grad", 1e-4, 1e-5);
    expect_close(w.grad(), prefix + "w.grad");
    expect_close(b.grad(), prefix + "b.grad");

    prefix = case_name(seed, "layer_norm_plain");
    manual_seed(seed);
    Tensor y = (rand({2, 3, 4}) * 3.0).requires_grad_();
    out = layer_norm(y, {3, 4});
    weighted_sum_backward(out);
    expect_bits(y, prefix + "x");
    expect_close(out, prefix + "out");
    expect_close(y.grad(), prefix + "x.grad", 1e-4, 1e-5);
  }
}

TEST(LayerNorm, ModuleStartsAsThePlainNormalisation) {
  LayerNorm norm(5);
  EXPECT_TRUE(equal(norm.weight, ones({5})));
  EXPECT_TRUE(equal(norm.bias, zeros({5})));
  manual_seed(3);
  Tensor x = randn({4, 5});
  EXPECT_TRUE(equal(norm(x), layer_norm(x, {5})));
  // Each row now has mean 0 and biased variance 1 (up to eps).
  Tensor y = norm(x);
  EXPECT_TRUE(allclose(mean(y, {-1}), zeros({4}), 0, 1e-6));
  EXPECT_TRUE(allclose(var(y, {-1}, Correction(0)), ones({4}), 1e-3, 0));

  LayerNorm plain(Shape{5}, 1e-5, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_TRUE(equal(plain(x), y));
}

TEST(LayerNorm, WrongShapesAreErrors) {
  EXPECT_EQ(error_of([&] {
              layer_norm(ones({2, 4}), {3});
            }),
            "layer_norm: given normalized_shape=[3], expected input with shape [*, 3], but got "
            "input of size [2, 4]");
  EXPECT_EQ(error_of([&] {
              layer_norm(ones({2, 3}), {3}, ones({2}));
            }),
            "layer_norm: expected weight of shape [3] (normalized_shape), got [2]");
}

// ---------------------------------------------------------------------------------------------
// init

TEST(Init, ValuesMatchPyTorchBitForBit) {
  struct Case {
    const char* name;
    Shape shape;
    std::function<void(Tensor&)> fill;
  };
  const std::vector<Case> cases = {
      {"kaiming_uniform", {4, 6}, [](Tensor& t) { init::kaiming_uniform_(t); }},
      {"kaiming_uniform_sqrt5",
       {4, 6},
       [](Tensor& t) { init::kaiming_uniform_(t, std::sqrt(5.0)); }},
      {"kaiming_uniform_3d", {4, 3, 5}, [](Tensor& t) { init::kaiming_uniform_(t); }},
      {"kaiming_normal_fan_out_relu",
       {4, 6},
       [](Tensor& t) { init::kaiming_normal_(t, 0.0, "fan_out", "relu"); }},
      {"kaiming_normal_small", {2, 3}, [](Tensor& t) { init::kaiming_normal_(t); }},
      {"xavier_uniform_tanh",
       {4, 6},
       [](Tensor& t) { init::xavier_uniform_(t, init::calculate_gain("tanh")); }},
      {"xavier_normal", {4, 6}, [](Tensor& t) { init::xavier_normal_(t); }},
      {"uniform", {4, 6}, [](Tensor& t) { init::uniform_(t, -0.5, 2.0); }},
      {"normal", {4, 6}, [](Tensor& t) { init::normal_(t, 0.3, 2.0); }},
  };
  for (uint64_t seed : kSeeds) {
    for (const Case& c : cases) {
      manual_seed(seed);
      Tensor t = empty(c.shape);
      c.fill(t);
      expect_bits(t, case_name(seed, std::string("init_") + c.name) + "out");
    }
  }
}

TEST(Init, WorksOnParametersAndWithAGenerator) {
  Tensor p = Parameter(zeros({3, 4}));
  Generator a(42), b(42);
  init::xavier_uniform_(p, 1.0, &a);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_FALSE(p.grad_fn());
  Tensor q = zeros({3, 4});
  init::xavier_uniform_(q, 1.0, &b);
  EXPECT_TRUE(equal(p.detach(), q));
  init::constant_(p, 0.25);
  EXPECT_TRUE(equal(p.detach(), full({3, 4}, 0.25)));
  init::ones_(p);
  EXPECT_TRUE(equal(p.detach(), ones({3, 4})));
  init::zeros_(p);
  EXPECT_TRUE(equal(p.detach(), zeros({3, 4})));
}

// Module sizes at the int64 limits: negative sizes and weights whose element count overflows are
// Errors naming the module or the tensor API's size check; an empty weight is fine.
TEST(Layers, SizesAtTheLimits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (const int64_t bad : {int64_t{-1}, kMin}) {
    EXPECT_NE(error_of([&] { Linear(bad, 2); }).find("Linear: expected non-negative sizes"),
              std::string::npos);
    EXPECT_NE(error_of([&] { Linear(2, bad); }).find("Linear: expected non-negative sizes"),
              std::string::npos);
    EXPECT_NE(error_of([&] { Embedding(bad, 2); }).find("Embedding: expected non-negative sizes"),
              std::string::npos);
    EXPECT_NE(error_of([&] { Embedding(2, bad); }).find("Embedding: expected non-negative sizes"),
              std::string::npos);
  }
  for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{
           {kMax, 2}, {2, kMax}, {kMax, kMax}, {int64_t{1} << 32, int64_t{1} << 31}}) {
    EXPECT_NE(error_of([&] { Linear(a, b); }).find("overflow"), std::string::npos) << a << " " << b;
    EXPECT_NE(error_of([&] { Embedding(a, b); }).find("overflow"), std::string::npos)
        << a << " " << b;
  }
  // [0, kMax] holds no element: a valid, empty weight (as in PyTorch).
  EXPECT_EQ(Linear(kMax, 0).weight.shape(), (Shape{0, kMax}));
  EXPECT_EQ(Embedding(kMax, 0).weight.numel(), 0);
}

TEST(Init, GainsAndFans) {
  // torch.nn.init.calculate_gain
  EXPECT_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_EQ(init::calculate_gain("tanh"), 1.6666666666666667);
  EXPECT_EQ(init::calculate_gain("relu"), 1.4142135623730951);
  EXPECT_EQ(init::calculate_gain("leaky_relu"), 1.4141428569978354);
  EXPECT_EQ(init::calculate_gain("leaky_relu", 0.0), 1.4142135623730951);
  EXPECT_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), 0.5773502691896257);
  EXPECT_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_EQ(error_of([] { init::calculate_gain("swish"); }),
            "calculate_gain: unsupported nonlinearity swish");

  init::Fans fans = init::calculate_fan_in_and_fan_out(empty({4, 3, 5}));
  EXPECT_EQ(fans.fan_in, 15);
  EXPECT_EQ(fans.fan_out, 20);
  fans = init::calculate_fan_in_and_fan_out(empty({2, 768}));
  EXPECT_EQ(fans.fan_in, 768);
  EXPECT_EQ(fans.fan_out, 2);
  EXPECT_NE(error_of([] { init::calculate_fan_in_and_fan_out(empty({5})); }).find("fewer than 2"),
            std::string::npos);
  // An empty tensor's other sizes may be huge: a receptive field beyond int64 is an Error.
  EXPECT_EQ(error_of([] {
              init::calculate_fan_in_and_fan_out(empty({0, 3, int64_t{1} << 40, 1 << 30}));
            }),
            "calculate_fan_in_and_fan_out: size calculation overflowed (1099511627776 * 1073741824 "
            "does not fit in int64)");
  fans = init::calculate_fan_in_and_fan_out(empty({0, int64_t{1} << 62}));
  EXPECT_EQ(fans.fan_in, int64_t{1} << 62);
  EXPECT_EQ(fans.fan_out, 0);
  Tensor t = empty({2, 3});
  EXPECT_NE(error_of([&] { init::kaiming_uniform_(t, 0, "fan_avg"); }).find("fan_avg"),
            std::string::npos);
}

TEST(Init, KaimingOnAnEmptyTensorDrawsNothing) {
  manual_seed(5);
  Tensor nothing = empty({0, 3});
  init::kaiming_uniform_(nothing);
  const Tensor next = rand({3});
  manual_seed(5);
  EXPECT_TRUE(equal(next, rand({3})));
}

// An undefined tensor is an error naming the init function it is given to.
TEST(Init, AnUndefinedTensorIsAnErrorNamingTheFunction) {
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> fns = {
      {"uniform_", [](Tensor& t) { init::uniform_(t); }},
      {"normal_", [](Tensor& t) { init::normal_(t); }},
      {"constant_", [](Tensor& t) { init::constant_(t, 1.0); }},
      {"zeros_", [](Tensor& t) { init::zeros_(t); }},
      {"ones_", [](Tensor& t) { init::ones_(t); }},
      {"calculate_fan_in_and_fan_out", [](Tensor& t) { init::calculate_fan_in_and_fan_out(t); }},
      {"kaiming_uniform_", [](Tensor& t) { init::kaiming_uniform_(t); }},
      {"kaiming_normal_", [](Tensor& t) { init::kaiming_normal_(t); }},
      {"xavier_uniform_", [](Tensor& t) { init::xavier_uniform_(t); }},
      {"xavier_normal_", [](Tensor& t) { init::xavier_normal_(t); }},
  };
  for (const auto& [name, fn] : fns) {
    Tensor undefined;
    test::expect_error([&] { fn(undefined); },
                       "nn::init::" + name + ": expected a defined tensor, got an undefined one");
  }
}

// ---------------------------------------------------------------------------------------------
// Dropout

TEST(Dropout, TheBooksMaskForSeed123) {
  // torch.manual_seed(123); dropout = torch.nn.Dropout(0.5); dropout(torch.ones(6, 6))
  manual_seed(123);
  Dropout dropout(0.5);
  Tensor out = dropout(ones({6, 6}));
  EXPECT_TRUE(equal(out, tensor({{2, 2, 0, 2, 2, 0},
                                 {0, 0, 0, 2, 0, 2},
                                 {2, 2, 2, 2, 0, 2},
                                 {0, 2, 2, 0, 0, 2},
                                 {0, 2, 0, 2, 0, 2},
                                 {0, 2, 2, 2, 2, 0}})))
      << out;
  for (uint64_t seed : kSeeds) {
    manual_seed(seed);
    expect_bits(Dropout(0.5)(ones({6, 6})), case_name(seed, "dropout_0.5") + "out");
  }
}

TEST(Dropout, IdentityInEvalModeOrWithPZero) {
  manual_seed(1);
  const Tensor x = rand({4, 4});
  Dropout dropout(0.5);
  dropout.eval();
  EXPECT_TRUE(dropout(x).is_same(x));
  Dropout none(0.0);
  EXPECT_TRUE(none(x).is_same(x));
  EXPECT_EQ(error_of([] { Dropout(1.5); }),
            "Dropout: dropout probability has to be between 0 and 1, but got 1.5");
}

// An int64 or bool tensor as PyTorch's dropout takes it: itself in eval mode or with p = 0,
// zeros of its dtype with p = 1, and PyTorch's error for a p between, which would scale it by a
// float.
//   F.dropout(torch.ones(4, dtype=torch.long), 0.5, False)  # tensor([1, 1, 1, 1])
//   F.dropout(torch.ones(4, dtype=torch.bool), 1.0, True)   # tensor([False, False, False, False])
//   F.dropout(torch.ones(4, dtype=torch.long), 0.5, True)
//   # RuntimeError: result type Float can't be cast to the desired output type Long
TEST(Dropout, IntegerAndBoolTensorsAsPyTorchs) {
  const Tensor longs = ones({4}, DType::Int64), bools = ones({4}, DType::Bool);
  Dropout half(0.5);
  half.eval();
  EXPECT_TRUE(half(longs).is_same(longs));
  EXPECT_TRUE(half(bools).is_same(bools));
  EXPECT_TRUE(Dropout(0.0)(longs).is_same(longs));
  for (const Tensor& x : {longs, bools}) {
    const Tensor zeroed = Dropout(1.0)(x);
    EXPECT_EQ(zeroed.dtype(), x.dtype());
    EXPECT_EQ(zeroed.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
  }
  EXPECT_EQ(error_of([&] { Dropout(0.5)(longs); }),
            "dropout: result type Float can't be cast to the desired output type Long");
  EXPECT_EQ(error_of([&] { Dropout(0.3)(bools); }),
            "dropout: result type Float can't be cast to the desired output type Bool");
}

TEST(Dropout, GradientIsMaskedAndScaledLikeTheOutput) {
  manual_seed(123);
  Tensor x = ones({6, 6}).requires_grad_();
  Tensor out = Dropout(0.5)(x);
  sum(out).backward();
  EXPECT_TRUE(equal(x.grad(), out.detach()));
}

// ---------------------------------------------------------------------------------------------
// Gradcheck in float64 (finite differences against the analytic backward)

using Inputs = std::vector<Tensor>;

void expect_gradcheck(const std::function<Tensor(const Inputs&)>& fn, const Inputs& inputs,
                      const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_GRADCHECK(fn, inputs);
}

Tensor leaf64(const Shape& shape) { return rand(shape, DType::Float64).requires_grad_(); }

TEST(Gradcheck, Addmm) {
  manual_seed(11);
  auto fn = [](const Inputs& in) { return addmm(in[0], in[1], in[2]); };
  expect_gradcheck(fn, {leaf64({4}), leaf64({3, 5}), leaf64({5, 4})}, "addmm, bias [n]");
  expect_gradcheck(fn, {leaf64({3, 4}), leaf64({3, 5}), leaf64({5, 4})}, "addmm, bias [m, n]");
  expect_gradcheck(fn, {leaf64({1, 4}), leaf64({5, 3}).t(), leaf64({5, 4})}, "addmm, transposed a");
}

TEST(Gradcheck, Linear) {
  manual_seed(12);
  auto with_bias = [](const Inputs& in) { return linear(in[0], in[1], in[2]); };
  auto without_bias = [](const Inputs& in) { return linear(in[0], in[1]); };
  const Tensor w = leaf64({4, 5}), b = leaf64({4});
  expect_gradcheck(with_bias, {leaf64({3, 5}), w, b}, "linear 2-d (addmm)");
  expect_gradcheck(with_bias, {leaf64({2, 3, 5}), w, b}, "linear 3-d (addmm + view)");
  expect_gradcheck(with_bias, {leaf64({3, 2, 5}).transpose(0, 1), w, b},
                   "linear 3-d non-contiguous (matmul + add)");
  expect_gradcheck(with_bias, {leaf64({5}), w, b}, "linear 1-d");
  expect_gradcheck(without_bias, {leaf64({2, 3, 5}), w}, "linear 3-d without bias");
}

TEST(Gradcheck, Embedding) {
  manual_seed(13);
  const Tensor indices = tensor({{1, 2, 1}, {0, 4, 1}}, DType::Int64);  // 1 picked three times
  expect_gradcheck([](const Inputs& in) { return embedding(in[0], in[1]); },
                   {leaf64({5, 3}), indices}, "embedding");
}

TEST(Gradcheck, LayerNorm) {
  manual_seed(14);
  auto affine = [](const Inputs& in) { return layer_norm(in[0], {5}, in[1], in[2]); };
  expect_gradcheck(affine, {leaf64({2, 3, 5}), leaf64({5}), leaf64({5})}, "layer_norm affine");
  expect_gradcheck(affine, {leaf64({3, 5, 2}).transpose(1, 2), leaf64({5}), leaf64({5})},
                   "layer_norm on a transposed input");
  expect_gradcheck(
      [](const Inputs& in) {
        return layer_norm(in[0], {3, 4});
      },
      {leaf64({2, 3, 4})}, "layer_norm over two dims, no affine");
  expect_gradcheck([](const Inputs& in) { return layer_norm(in[0], {4}, in[1]); },
                   {leaf64({3, 4}), leaf64({4})}, "layer_norm, weight only");
  // Only the weight and bias require grad.
  const Tensor x = rand({3, 4}, DType::Float64);
  expect_gradcheck([&](const Inputs& in) { return layer_norm(x, {4}, in[0], in[1]); },
                   {leaf64({4}), leaf64({4})}, "layer_norm, grads of weight and bias only");
}

}  // namespace
}  // namespace ember::nn
