// Tests of the chapter-3 attention modules (nn/attention.h) against PyTorch 1.13 running the
// book's classes, and by gradcheck.
//
// Expected values come from tests/fixtures/attention.txt, written by
// scripts/fixtures/gen_attention.py (its docstring describes the format and the cases). Each
// case starts from torch.manual_seed(seed); the test replays the same calls after
// ember::manual_seed(seed): construct the module (draws the parameters), draw the input, draw
// the loss weights w, forward (draws the dropout masks), (out * w).sum().backward(). Parameters
// and random inputs must match bit for bit; outputs and gradients (sums computed in another
// order) to within float32 rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/base/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/tensor/random.h"
#include "core/testing_gtest.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

using test::book_inputs;
using test::error_of;
using test::expect_allclose;
using test::keys;

// ---------------------------------------------------------------------------------------------
// The fixture file

const test::Fixture& fixture() { return test::fixture_file("attention.txt"); }

// The names of the fixture entries "<prefix><rest>", as the sorted list of <rest>.
std::vector<std::string> fixture_names_under(const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& name : fixture().names()) {
    if (name.rfind(prefix, 0) == 0) out.push_back(name.substr(prefix.size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Tensor fixture_tensor(const std::string& name) { return fixture().tensor(name); }

// `actual` has the fixture tensor's shape and exactly its float32 values.
void expect_bits(const Tensor& actual, const std::string& name) {
  SCOPED_TRACE(name);
  const test::FixtureEntry& expected = fixture().entry(name);
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(actual.dtype(), DType::Float32);
  ASSERT_EQ(expected.dtype, DType::Float32);
  ASSERT_EQ(actual.shape(), expected.shape);
  EXPECT_EQ(test::patterns_of(actual), expected.patterns);
}

// `actual` has the fixture tensor's shape and values to within float32 rounding of sums.
void expect_close(const Tensor& actual, const std::string& name) {
  SCOPED_TRACE(name);
  expect_allclose(actual, fixture_tensor(name), 1e-5, 1e-6);
}

Tensor book_batch() { return stack({book_inputs(), book_inputs()}, 0); }

// ---------------------------------------------------------------------------------------------
// The modules of the fixture cases: the SHAPES table and make() of gen_attention.py

struct Sizes {
  int64_t d_in, d_out, ctx, T, b, heads;
  bool bias;
  bool draw_rand;  // the input is rand (else randn)
};

const std::map<uint64_t, Sizes> kShapes = {
    {123, {3, 4, 6, 5, 2, 2, true, true}},
    {789, {5, 6, 4, 4, 3, 3, false, false}},
    {0, {4, 2, 8, 3, 2, 2, true, false}},
};

struct Mode {
  const char* name;
  double dropout;
  bool training;
};
const std::vector<Mode> kModes = {{"p0", 0.0, true}, {"drop", 0.1, true}, {"eval", 0.5, false}};

std::shared_ptr<Module> make(const std::string& kind, const Sizes& s, double dropout) {
  if (kind == "sa_v1") return std::make_shared<SelfAttentionV1>(s.d_in, s.d_out);
  if (kind == "sa_v2") return std::make_shared<SelfAttentionV2>(s.d_in, s.d_out, s.bias);
  if (kind == "causal") {
    return std::make_shared<CausalAttention>(s.d_in, s.d_out, s.ctx, dropout, s.bias);
  }
  if (kind == "wrapper") {
    return std::make_shared<MultiHeadAttentionWrapper>(s.d_in, s.d_out, s.ctx, dropout, s.heads,
                                                       s.bias);
  }
  if (kind == "mha") {
    return std::make_shared<MultiHeadAttention>(s.d_in, s.d_out, s.ctx, dropout, s.heads, s.bias);
  }
  throw std::runtime_error("unknown module kind " + kind);
}

Shape input_shape(const std::string& kind, const Sizes& s) {
  if (kind == "sa_v1" || kind == "sa_v2") return {s.T, s.d_in};  // keys.T: one sequence
  return {s.b, s.T, s.d_in};
}

Shape output_shape(const std::string& kind, const Sizes& s) {
  Shape shape = input_shape(kind, s);
  shape.back() = kind == "wrapper" ? s.d_out * s.heads : s.d_out;
  return shape;
}

// Checks x, w, out, x.grad and every parameter's gradient against the fixture case `prefix`.
void expect_forward_and_backward(Module& m, const Tensor& x, const Tensor& w, const Tensor& out,
                                 const std::string& prefix) {
  expect_bits(w, prefix + "w");
  expect_close(out, prefix + "out");
  expect_close(x.grad(), prefix + "x.grad");
  std::vector<std::string> names = keys(m.named_parameters());
  for (const auto& [key, p] : m.named_parameters()) expect_close(p.grad(), prefix + "grad/" + key);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, fixture_names_under(prefix + "grad/")) << prefix;
}

// One fixture case: seed, construct, x, w, forward, backward, as gen_attention.py does.
void run_case(uint64_t seed, const std::string& kind, const Mode& mode) {
  const Sizes& s = kShapes.at(seed);
  const std::string prefix = "seed" + std::to_string(seed) + "/" + kind + "_" + mode.name + "/";
  SCOPED_TRACE(prefix);
  manual_seed(seed);
  std::shared_ptr<Module> m = make(kind, s, mode.dropout);
  if (!mode.training) m->eval();
  for (const auto& [key, p] : m->named_parameters()) expect_bits(p, prefix + "param/" + key);
  Tensor x = (s.draw_rand ? rand(input_shape(kind, s)) : randn(input_shape(kind, s)));
  x.requires_grad_();
  expect_bits(x, prefix + "x");
  const Tensor w = rand(output_shape(kind, s));
  const Tensor out = m->forward(x);
  sum(out * w).backward();
  expect_forward_and_backward(*m, x, w, out, prefix);
}

// ---------------------------------------------------------------------------------------------
// Forward and backward against PyTorch

TEST(AttentionPyTorch, SelfAttentionV1) {
  for (const auto& [seed, sizes] : kShapes) run_case(seed, "sa_v1", kModes[0]);
}

TEST(AttentionPyTorch, SelfAttentionV2) {
  for (const auto& [seed, sizes] : kShapes) run_case(seed, "sa_v2", kModes[0]);
}

TEST(AttentionPyTorch, CausalAttention) {
  for (const auto& [seed, sizes] : kShapes) {
    for (const Mode& mode : kModes) run_case(seed, "causal", mode);
  }
}

TEST(AttentionPyTorch, MultiHeadAttentionWrapper) {
  for (const auto& [seed, sizes] : kShapes) {
    for (const Mode& mode : kModes) run_case(seed, "wrapper", mode);
  }
}

TEST(AttentionPyTorch, MultiHeadAttention) {
  for (const auto& [seed, sizes] : kShapes) {
    for (const Mode& mode : kModes) run_case(seed, "mha", mode);
  }
}

// The book's cells, on the book's inputs, with their gradients: construct under the seed,
// w = rand(out shape), out = m(inputs), (out * w).sum().backward().
void run_book_case(const std::string& name, uint64_t seed,
                   const std::function<std::shared_ptr<Module>()>& build, const Tensor& inputs,
                   const Shape& out_shape, const Tensor& printed) {
  const std::string prefix = "book/" + name + "/";
  SCOPED_TRACE(prefix);
  manual_seed(seed);
  std::shared_ptr<Module> m = build();
  for (const auto& [key, p] : m->named_parameters()) expect_bits(p, prefix + "param/" + key);
  Tensor x = inputs.clone().requires_grad_();
  expect_bits(x, prefix + "x");
  const Tensor w = rand(out_shape);
  const Tensor out = m->forward(x);
  sum(out * w).backward();
  expect_forward_and_backward(*m, x, w, out, prefix);
  // And the 4 decimals the book prints (for batched outputs, both rows of the batch).
  const Tensor first = out.dim() == 3 ? out[0].detach() : out.detach();
  EXPECT_TRUE(allclose(first, printed, 0, 5e-5)) << first;
  if (out.dim() == 3) {
    EXPECT_TRUE(equal(out[0], out[1]));
  }
}

TEST(AttentionPyTorch, TheBooksCells) {
  run_book_case(
      "sa_v1_seed123", 123, [] { return std::make_shared<SelfAttentionV1>(3, 2); }, book_inputs(),
      {6, 2},
      tensor({{0.2996, 0.8053},
              {0.3061, 0.8210},
              {0.3058, 0.8203},
              {0.2948, 0.7939},
              {0.2927, 0.7891},
              {0.2990, 0.8040}}));
  run_book_case(
      "sa_v2_seed789", 789, [] { return std::make_shared<SelfAttentionV2>(3, 2); }, book_inputs(),
      {6, 2},
      tensor({{-0.0739, 0.0713},
              {-0.0748, 0.0703},
              {-0.0749, 0.0702},
              {-0.0760, 0.0685},
              {-0.0763, 0.0679},
              {-0.0754, 0.0693}}));
  run_book_case(
      "causal_seed123", 123, [] { return std::make_shared<CausalAttention>(3, 2, 6, 0.0); },
      book_batch(), {2, 6, 2},
      tensor({{-0.4519, 0.2216},
              {-0.5874, 0.0058},
              {-0.6300, -0.0632},
              {-0.5675, -0.0843},
              {-0.5526, -0.0981},
              {-0.5299, -0.1081}}));
  run_book_case(
      "wrapper_seed123", 123,
      [] { return std::make_shared<MultiHeadAttentionWrapper>(3, 2, 6, 0.0, 2); }, book_batch(),
      {2, 6, 4},
      tensor({{-0.4519, 0.2216, 0.4772, 0.1063},
              {-0.5874, 0.0058, 0.5891, 0.3257},
              {-0.6300, -0.0632, 0.6202, 0.3860},
              {-0.5675, -0.0843, 0.5478, 0.3589},
              {-0.5526, -0.0981, 0.5321, 0.3428},
              {-0.5299, -0.1081, 0.5077, 0.3493}}));
  run_book_case(
      "mha_seed123", 123, [] { return std::make_shared<MultiHeadAttention>(3, 2, 6, 0.0, 2); },
      book_batch(), {2, 6, 2},
      tensor({{0.3190, 0.4858},
              {0.2943, 0.3897},
              {0.2856, 0.3593},
              {0.2693, 0.3873},
              {0.2639, 0.3928},
              {0.2575, 0.4028}}));
}

TEST(AttentionPyTorch, DropoutMasksAreDrawnInForwardHeadByHead) {
  // Each head of the wrapper draws its own mask, in order: replaying the wrapper's draws by
  // hand with two separately built heads gives the same output.
  const Sizes& s = kShapes.at(123);
  manual_seed(5);
  MultiHeadAttentionWrapper wrapper(s.d_in, s.d_out, s.ctx, 0.5, 2);
  const Tensor x = rand({s.b, s.T, s.d_in});
  manual_seed(6);
  const Tensor together = wrapper(x);
  manual_seed(6);
  const Tensor head0 = (*wrapper.heads)[0]->forward(x);
  const Tensor head1 = (*wrapper.heads)[1]->forward(x);
  EXPECT_TRUE(equal(together, cat({head0, head1}, -1)));
  wrapper.eval();
  EXPECT_FALSE(equal(wrapper(x), together));  // p = 0.5: some weights were dropped
}

// ---------------------------------------------------------------------------------------------
// Gradcheck in float64, w.r.t. the input and every parameter

using Inputs = std::vector<Tensor>;

// gradcheck of m (converted to float64) on a random input of `shape`; with `reseed`, the
// forward reseeds the generator first, so that every evaluation draws the same dropout masks.
void expect_module_gradcheck(Module& m, const Shape& shape, const std::string& what,
                             bool reseed = false) {
  SCOPED_TRACE(what);
  m.to(DType::Float64);
  Inputs inputs = {rand(shape, DType::Float64).requires_grad_()};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  ASSERT_GE(inputs.size(), 4u);
  auto fn = [&](const Inputs& in) {
    if (reseed) manual_seed(2024);
    return m.forward(in[0]);
  };
  EXPECT_GRADCHECK(fn, inputs);
}

TEST(AttentionGradcheck, SelfAttentionV1) {
  manual_seed(21);
  SelfAttentionV1 m(3, 4);
  expect_module_gradcheck(m, {4, 3}, "SelfAttention_v1(3, 4)");
}

TEST(AttentionGradcheck, SelfAttentionV2) {
  manual_seed(22);
  SelfAttentionV2 plain(3, 4);
  expect_module_gradcheck(plain, {4, 3}, "SelfAttention_v2(3, 4)");
  SelfAttentionV2 biased(3, 2, true);
  expect_module_gradcheck(biased, {3, 3}, "SelfAttention_v2(3, 2, qkv_bias=True)");
}

TEST(AttentionGradcheck, CausalAttention) {
  manual_seed(23);
  CausalAttention plain(3, 4, 4, 0.0);
  expect_module_gradcheck(plain, {2, 4, 3}, "CausalAttention(3, 4, 4, 0.0), full context");
  CausalAttention biased(3, 2, 5, 0.0, true);
  expect_module_gradcheck(biased, {2, 3, 3},
                          "CausalAttention(3, 2, 5, 0.0, qkv_bias=True), 3 of 5 tokens");
}

TEST(AttentionGradcheck, MultiHeadAttentionWrapper) {
  manual_seed(24);
  MultiHeadAttentionWrapper plain(3, 2, 4, 0.0, 2);
  expect_module_gradcheck(plain, {2, 3, 3}, "MultiHeadAttentionWrapper(3, 2, 4, 0.0, 2)");
  MultiHeadAttentionWrapper biased(3, 2, 3, 0.0, 2, true);
  expect_module_gradcheck(biased, {2, 3, 3},
                          "MultiHeadAttentionWrapper(3, 2, 3, 0.0, 2, qkv_bias=True)");
}

TEST(AttentionGradcheck, MultiHeadAttention) {
  manual_seed(25);
  MultiHeadAttention plain(3, 4, 5, 0.0, 2);
  expect_module_gradcheck(plain, {2, 3, 3}, "MultiHeadAttention(3, 4, 5, 0.0, 2), 3 of 5 tokens");
  MultiHeadAttention biased(3, 4, 4, 0.0, 2, true);
  expect_module_gradcheck(biased, {2, 4, 3},
                          "MultiHeadAttention(3, 4, 4, 0.0, 2, qkv_bias=True), full context");
}

TEST(AttentionGradcheck, WithDropoutInTrainingMode) {
  // The forward reseeds, so every evaluation draws the same masks.
  manual_seed(26);
  MultiHeadAttention mha(3, 4, 5, 0.5, 2, true);
  expect_module_gradcheck(mha, {2, 3, 3}, "MultiHeadAttention(3, 4, 5, 0.5, 2), training",
                          /*reseed=*/true);
  MultiHeadAttentionWrapper wrapper(3, 2, 4, 0.5, 2);
  expect_module_gradcheck(wrapper, {2, 4, 3}, "MultiHeadAttentionWrapper(3, 2, 4, 0.5, 2)",
                          /*reseed=*/true);
  CausalAttention causal(3, 2, 4, 0.5);
  expect_module_gradcheck(causal, {2, 4, 3}, "CausalAttention(3, 2, 4, 0.5)", /*reseed=*/true);

  // The masks really dropped something: the training output is not the eval output.
  const Tensor x = rand({2, 3, 3}, DType::Float64);
  manual_seed(2024);
  const Tensor trained = mha(x);
  mha.eval();
  EXPECT_FALSE(allclose(mha(x), trained));
}

// ---------------------------------------------------------------------------------------------
// The registry: names, buffers, modes, state dicts, printing

struct RegistryCase {
  std::string name;  // the fixture's "registry/<name>/"
  std::function<std::shared_ptr<Module>()> build;
};

// registry_modules() of gen_attention.py.
std::vector<RegistryCase> registry_cases() {
  std::vector<RegistryCase> cases = {
      {"sa_v1", [] { return std::make_shared<SelfAttentionV1>(3, 2); }}};
  for (bool bias : {false, true}) {
    const std::string tag = bias ? "_bias" : "";
    cases.push_back(
        {"sa_v2" + tag, [bias] { return std::make_shared<SelfAttentionV2>(3, 2, bias); }});
    cases.push_back(
        {"causal" + tag, [bias] { return std::make_shared<CausalAttention>(3, 2, 6, 0.1, bias); }});
    cases.push_back({"wrapper" + tag, [bias] {
                       return std::make_shared<MultiHeadAttentionWrapper>(3, 2, 6, 0.1, 2, bias);
                     }});
    cases.push_back({"mha" + tag, [bias] {
                       return std::make_shared<MultiHeadAttention>(3, 4, 6, 0.1, 2, bias);
                     }});
  }
  return cases;
}

TEST(AttentionRegistry, KeyNamesAndOrderArePyTorchs) {
  for (const RegistryCase& c : registry_cases()) {
    SCOPED_TRACE(c.name);
    const std::string prefix = "registry/" + c.name + "/";
    std::shared_ptr<Module> m = c.build();
    EXPECT_EQ(keys(m->named_parameters()), fixture().keys(prefix + "named_parameters"));
    EXPECT_EQ(keys(m->named_buffers()), fixture().keys(prefix + "named_buffers"));
    EXPECT_EQ(keys(m->state_dict()), fixture().keys(prefix + "state_dict"));
    EXPECT_EQ(keys(m->named_modules(), "<root>"), fixture().keys(prefix + "named_modules"));
  }
  // Spelled out for the two multi-head modules.
  MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2, true);
  EXPECT_EQ(keys(wrapper.named_parameters())[0], "heads.0.W_query.weight");
  EXPECT_EQ(keys(wrapper.named_parameters())[1], "heads.0.W_query.bias");
  EXPECT_EQ(keys(wrapper.named_buffers()),
            (std::vector<std::string>{"heads.0.mask", "heads.1.mask"}));
  MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  EXPECT_EQ(keys(mha.named_parameters()),
            (std::vector<std::string>{"W_query.weight", "W_key.weight", "W_value.weight",
                                      "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(keys(mha.named_buffers()), (std::vector<std::string>{"mask"}));
}

TEST(AttentionRegistry, AttributesAreTheRegisteredTensors) {
  MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  const NamedTensors params = mha.named_parameters();
  EXPECT_TRUE(params[0].second.is_same(mha.W_query->weight));
  EXPECT_TRUE(params[4].second.is_same(mha.out_proj->bias));
  EXPECT_TRUE(mha.named_buffers()[0].second.is_same(mha.mask));
  SelfAttentionV1 v1(3, 2);
  EXPECT_TRUE(v1.named_parameters()[1].second.is_same(v1.W_key));
  MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2);
  EXPECT_TRUE(wrapper.named_parameters()[3].second.is_same(
      wrapper.heads->at<CausalAttention>(1)->W_query->weight));
}

TEST(AttentionRegistry, BuffersAreNotParameters) {
  for (const RegistryCase& c : registry_cases()) {
    SCOPED_TRACE(c.name);
    std::shared_ptr<Module> m = c.build();
    for (const auto& [name, buffer] : m->named_buffers()) {
      EXPECT_FALSE(buffer.requires_grad()) << name;
      for (const Tensor& p : m->parameters()) EXPECT_FALSE(p.is_same(buffer)) << name;
    }
    for (const auto& [name, p] : m->named_parameters()) {
      EXPECT_TRUE(p.is_leaf() && p.requires_grad()) << name;
    }
  }
  // The mask is the book's triu(ones(L, L), 1), and backward leaves it without a gradient.
  manual_seed(3);
  CausalAttention causal(3, 2, 4, 0.0);
  EXPECT_TRUE(equal(causal.mask, tensor({{0, 1, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 1}, {0, 0, 0, 0}})));
  sum(causal(rand({2, 4, 3}))).backward();
  EXPECT_FALSE(causal.mask.grad().defined());
  for (const auto& [name, p] : causal.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(AttentionRegistry, TrainAndEvalReachTheHeadsDropout) {
  MultiHeadAttentionWrapper wrapper(3, 2, 4, 0.5, 2);
  auto dropout_of = [&](int64_t head) { return wrapper.heads->at<CausalAttention>(head)->dropout; };
  EXPECT_TRUE(dropout_of(0)->is_training());
  wrapper.eval();
  for (const auto& [name, module] : wrapper.named_modules()) {
    EXPECT_FALSE(module->is_training()) << name;
  }
  manual_seed(8);
  const Tensor x = rand({2, 4, 3});
  EXPECT_TRUE(equal(wrapper(x), wrapper(x)));  // no dropout in eval mode
  wrapper.train();
  EXPECT_TRUE(dropout_of(1)->is_training());
  EXPECT_FALSE(equal(wrapper(x), wrapper(x)));  // a new mask each call

  MultiHeadAttention mha(3, 4, 4, 0.5, 2);
  mha.eval();
  EXPECT_FALSE(mha.dropout->is_training());
  EXPECT_FALSE(mha.out_proj->is_training());
  EXPECT_TRUE(equal(mha(x), mha(x)));
  mha.train();
  EXPECT_TRUE(mha.dropout->is_training());
}

TEST(AttentionRegistry, ReprIsPyTorchs) {
  for (const RegistryCase& c : registry_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.build()->to_string(), fixture().text("registry/" + c.name + "/repr"));
  }
  // What PyTorch prints for the two multi-head modules, spelled out.
  EXPECT_EQ(MultiHeadAttention(3, 4, 6, 0.1, 2).to_string(),
            "MultiHeadAttention(\n"
            "  (W_query): Linear(in_features=3, out_features=4, bias=False)\n"
            "  (W_key): Linear(in_features=3, out_features=4, bias=False)\n"
            "  (W_value): Linear(in_features=3, out_features=4, bias=False)\n"
            "  (out_proj): Linear(in_features=4, out_features=4, bias=True)\n"
            "  (dropout): Dropout(p=0.1, inplace=False)\n"
            ")");
  EXPECT_EQ(fixture().text("registry/wrapper/repr"),
            MultiHeadAttentionWrapper(3, 2, 6, 0.1, 2).to_string());
}

// PyTorch's parameters for seed 999 (and the mask), loaded into a module built from seed 1,
// give PyTorch's output.
TEST(AttentionRegistry, LoadStateDictFromPyTorchGivesPyTorchsOutput) {
  const Sizes& s = kShapes.at(123);
  for (const std::string& kind :
       std::vector<std::string>{"sa_v1", "sa_v2", "causal", "wrapper", "mha"}) {
    SCOPED_TRACE(kind);
    const std::string prefix = "load/" + kind + "/";
    manual_seed(1);
    std::shared_ptr<Module> m = make(kind, s, 0.5);
    m->eval();
    StateDict state;
    for (const std::string& key : fixture().keys(prefix + "state_dict")) {
      state.emplace_back(key, fixture_tensor(prefix + "state/" + key));
    }
    const Tensor x = fixture_tensor(prefix + "x");
    ASSERT_FALSE(allclose(m->forward(x), fixture_tensor(prefix + "out"), 1e-3, 1e-4))
        << "seed 1 should not give PyTorch's seed-999 output";
    const Tensor weight_before = m->named_parameters()[0].second;

    const LoadResult result = m->load_state_dict(state);
    EXPECT_TRUE(result.missing_keys.empty());
    EXPECT_TRUE(result.unexpected_keys.empty());
    for (const auto& [key, value] : m->state_dict()) expect_bits(value, prefix + "state/" + key);
    EXPECT_TRUE(m->named_parameters()[0].second.is_same(weight_before));  // copied in place
    expect_close(m->forward(x), prefix + "out");
  }
}

TEST(AttentionRegistry, StateDictMovesBetweenModules) {
  manual_seed(1);
  MultiHeadAttention source(3, 4, 6, 0.0, 2, true);
  manual_seed(2);
  MultiHeadAttention target(3, 4, 6, 0.0, 2, true);
  const Tensor x = rand({2, 5, 3});
  ASSERT_FALSE(equal(source(x), target(x)));
  target.load_state_dict(source.state_dict());
  EXPECT_TRUE(equal(source(x), target(x)));
  // A wrapper's state dict does not fit a MultiHeadAttention.
  MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2);
  const std::string message = error_of([&] { target.load_state_dict(wrapper.state_dict()); });
  EXPECT_EQ(message.rfind("Error(s) in loading state_dict for MultiHeadAttention:", 0), 0u)
      << message;
  EXPECT_NE(message.find("\"heads.0.W_query.weight\""), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(AttentionErrors, InputLongerThanContextLength) {
  CausalAttention causal(3, 2, 6, 0.0);
  EXPECT_EQ(error_of([&] {
              causal(rand({2, 7, 3}));
            }),
            "CausalAttention: input has 7 tokens but context_length is 6 (input shape [2, 7, 3])");
  MultiHeadAttentionWrapper wrapper(3, 2, 4, 0.0, 2);
  EXPECT_EQ(error_of([&] {
              wrapper(rand({1, 5, 3}));
            }),
            "CausalAttention: input has 5 tokens but context_length is 4 (input shape [1, 5, 3])");
  MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  EXPECT_EQ(
      error_of([&] {
        mha(rand({2, 8, 3}));
      }),
      "MultiHeadAttention: input has 8 tokens but context_length is 6 (input shape [2, 8, 3])");
  // Exactly context_length tokens is fine.
  EXPECT_EQ(mha(rand({2, 6, 3})).shape(), (Shape{2, 6, 4}));
}

TEST(AttentionErrors, DOutNotDivisibleByNumHeads) {
  EXPECT_EQ(error_of([] { MultiHeadAttention(3, 5, 6, 0.0, 2); }),
            "MultiHeadAttention: d_out must be divisible by num_heads (got d_out = 5, "
            "num_heads = 2)");
  EXPECT_EQ(error_of([] { MultiHeadAttention(3, 4, 6, 0.0, 0); }),
            "MultiHeadAttention: d_out must be divisible by num_heads (got d_out = 4, "
            "num_heads = 0)");
  EXPECT_EQ(error_of([] { MultiHeadAttention(3, 4, 6, 0.0, 4); }), "");
}

// Head counts and sizes at the int64 limits: Errors naming the module and the values.
TEST(AttentionErrors, SizesAtTheLimits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (const int64_t heads : {int64_t{0}, int64_t{-1}, kMin}) {
    EXPECT_EQ(
        error_of([&] { MultiHeadAttentionWrapper(3, 2, 6, 0.0, heads); }),
        "MultiHeadAttentionWrapper: num_heads must be positive, got " + std::to_string(heads));
    EXPECT_NE(error_of([&] {
                MultiHeadAttention(3, 4, 6, 0.0, heads);
              }).find("d_out must be divisible by num_heads"),
              std::string::npos);
  }
  // The heads' outputs side by side: d_out * num_heads features, refused before any head is built.
  EXPECT_EQ(error_of([] { MultiHeadAttentionWrapper(3, 2, 6, 0.0, kMax); }),
            "MultiHeadAttentionWrapper: d_out * num_heads: size calculation overflowed (2 * "
            "9223372036854775807 does not fit in int64)");
  // head_dim = d_out / num_heads: kMax heads of kMax features would be one feature each; the
  // projections' weights [kMax, 3] cannot exist.
  EXPECT_NE(error_of([] { MultiHeadAttention(3, kMax, 6, 0.0, kMax); }).find("overflow"),
            std::string::npos);
  // The causal mask is [context_length, context_length].
  EXPECT_NE(error_of([] { CausalAttention(3, 2, kMax, 0.0); }).find("overflow"), std::string::npos);
  EXPECT_NE(error_of([] { MultiHeadAttention(3, 4, int64_t{1} << 32, 0.0, 2); }).find("overflow"),
            std::string::npos);
  for (const int64_t bad : {int64_t{-1}, kMin}) {
    EXPECT_NE(error_of([&] { CausalAttention(3, 2, bad, 0.0); }), "");
    EXPECT_NE(error_of([&] { MultiHeadAttention(bad, 4, 6, 0.0, 2); }), "");
  }
}

TEST(AttentionErrors, UndefinedInputsNameTheModule) {
  const std::string undefined =
      ": expected a defined tensor, got an undefined one (a gradient that was never computed?)";
  EXPECT_EQ(error_of([] { SelfAttentionV1(3, 2)(Tensor()); }), "SelfAttentionV1" + undefined);
  EXPECT_EQ(error_of([] { SelfAttentionV2(3, 2)(Tensor()); }), "SelfAttentionV2" + undefined);
  EXPECT_EQ(error_of([] { CausalAttention(3, 2, 6, 0.0)(Tensor()); }),
            "CausalAttention" + undefined);
  EXPECT_EQ(error_of([] { MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)(Tensor()); }),
            "MultiHeadAttentionWrapper" + undefined);
  EXPECT_EQ(error_of([] { MultiHeadAttention(3, 2, 6, 0.0, 2)(Tensor()); }),
            "MultiHeadAttention" + undefined);
}

TEST(AttentionErrors, WrongInputRankOrFeatureSize) {
  CausalAttention causal(3, 2, 6, 0.0);
  EXPECT_EQ(error_of([&] {
              causal(rand({6, 3}));
            }),
            "CausalAttention: expected input of shape [batch, num_tokens, d_in], got [6, 3]");
  EXPECT_EQ(error_of([&] {
              causal(rand({2, 6, 4}));
            }),
            "CausalAttention: expected d_in = 3 features, got input of shape [2, 6, 4]");
  MultiHeadAttention mha(3, 4, 6, 0.0, 2);
  EXPECT_EQ(error_of([&] {
              mha(rand({1, 2, 6, 3}));
            }),
            "MultiHeadAttention: expected input of shape [batch, num_tokens, d_in], got "
            "[1, 2, 6, 3]");
  EXPECT_EQ(error_of([&] {
              mha(rand({2, 6, 2}));
            }),
            "MultiHeadAttention: expected d_in = 3 features, got input of shape [2, 6, 2]");
  MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2);
  EXPECT_EQ(error_of([&] {
              wrapper(rand({6, 3}));
            }),
            "CausalAttention: expected input of shape [batch, num_tokens, d_in], got [6, 3]");

  // SelfAttention_v1/v2 work on one sequence [num_tokens, d_in], as the book's (keys.T): the
  // ops they are made of name the problem.
  SelfAttentionV2 v2(3, 2);
  EXPECT_EQ(error_of([&] {
              v2(rand({6, 4}));
            }),
            "linear: input of shape [6, 4] does not end in in_features=3 (weight of shape [2, 3])");
  EXPECT_NE(error_of([&] {
              v2(rand({2, 6, 3}));
            }).find("t: expects a tensor with <= 2 dimensions"),
            std::string::npos);
  SelfAttentionV1 v1(3, 2);
  const std::string message = error_of([&] { v1(rand({6, 4})); });
  EXPECT_NE(message.find("matmul"), std::string::npos) << message;
  EXPECT_NE(message.find("[6, 4]"), std::string::npos) << message;
  EXPECT_NE(message.find("[3, 2]"), std::string::npos) << message;
}

// MultiHeadAttention's KV cache (use_cache): a call it cannot take is an Error before the cache
// moves (ptr_current_pos stays), and the next call goes on as if it had not happened.
TEST(AttentionErrors, KVCacheRefusesBeforeItMoves) {
  manual_seed(123);
  MultiHeadAttention mha(3, 4, 6, 0.5, 2);
  mha.eval();
  const Tensor x = rand({1, 5, 3});
  NoGradGuard no_grad;
  const Tensor expected = mha(x).narrow(1, 3, 1);  // the 4th token's output, without the cache
  mha(x.narrow(1, 0, 3), true);

  // Dropout would draw for the new rows only (the fused kernel and the book's lines alike).
  mha.train();
  for (bool fused : {true, false}) {
    mha.fused_attention = fused;
    EXPECT_EQ(error_of([&] { mha(x.narrow(1, 3, 1), true); }),
              "MultiHeadAttention: use_cache needs dropout off, got p = 0.5 in training mode "
              "(call eval())");
    EXPECT_EQ(mha.ptr_current_pos, 3);
  }
  mha.eval();
  mha.fused_attention = true;

  // Another batch size, another dtype.
  EXPECT_EQ(error_of([&] {
              mha(rand({2, 1, 3}), true);
            }),
            "MultiHeadAttention: the KV cache holds a batch of 1, got a batch of 2 (input shape "
            "[2, 1, 3]; reset_cache() starts again)");
  mha.double_();
  EXPECT_EQ(error_of([&] { mha(x.narrow(1, 3, 1).to(DType::Float64), true); }),
            "MultiHeadAttention: the KV cache holds float32 keys and values, got float64 ones "
            "(input of dtype float64; reset_cache() starts again)");
  mha.float_();
  EXPECT_EQ(mha.ptr_current_pos, 3);
  EXPECT_EQ(test::bits_of(mha(x.narrow(1, 3, 1), true)), test::bits_of(expected));

  // ptr_current_pos, the book's attribute, set to a length the cache does not have.
  for (int64_t bad : {int64_t{-1}, int64_t{7}}) {
    mha.ptr_current_pos = bad;
    EXPECT_EQ(error_of([&] { mha(x.narrow(1, 4, 1), true); }),
              "MultiHeadAttention: ptr_current_pos = " + std::to_string(bad) +
                  " is not a length of its KV cache (0 to 6); reset_cache() starts again");
  }
  mha.reset_cache();
  mha.ptr_current_pos = 2;
  EXPECT_EQ(error_of([&] { mha(x.narrow(1, 0, 1), true); }),
            "MultiHeadAttention: ptr_current_pos = 2 is not a length of its KV cache (0 to 0); "
            "reset_cache() starts again");
}

// ---------------------------------------------------------------------------------------------
// The chapter's exercises

TEST(Exercise31, SelfAttentionV1WithV2sWeightsGivesV2sOutput) {
  // exercise-solutions.ipynb: sa_v1 and sa_v2 both from seed 123, then
  // sa_v1.W_query = Parameter(sa_v2.W_query.weight.T), and the same for W_key and W_value.
  manual_seed(123);
  SelfAttentionV1 sa_v1(3, 2);
  manual_seed(123);
  SelfAttentionV2 sa_v2(3, 2);
  const Tensor inputs = book_inputs();
  ASSERT_FALSE(allclose(sa_v1(inputs), sa_v2(inputs), 1e-3, 1e-3));
  {
    NoGradGuard no_grad;
    sa_v1.W_query.copy_(sa_v2.W_query->weight.t());
    sa_v1.W_key.copy_(sa_v2.W_key->weight.t());
    sa_v1.W_value.copy_(sa_v2.W_value->weight.t());
  }
  EXPECT_TRUE(sa_v1.W_query.is_leaf() && sa_v1.W_query.requires_grad());
  const Tensor out_v1 = sa_v1(inputs);
  const Tensor out_v2 = sa_v2(inputs);
  EXPECT_TRUE(allclose(out_v1, out_v2, 1e-6, 1e-6)) << out_v1 << "\n" << out_v2;
  const Tensor printed = tensor({{-0.5337, -0.1051},
                                 {-0.5323, -0.1080},
                                 {-0.5323, -0.1079},
                                 {-0.5297, -0.1076},
                                 {-0.5311, -0.1066},
                                 {-0.5299, -0.1081}});
  EXPECT_TRUE(allclose(out_v1, printed, 0, 5e-5)) << out_v1;
  EXPECT_TRUE(allclose(out_v2, printed, 0, 5e-5)) << out_v2;
}

TEST(Exercise32, WrapperWithOneDimensionPerHead) {
  // MultiHeadAttentionWrapper(3, 1, 6, 0.0, num_heads=2) on the batch, seed 123: the output of
  // the current code (the solutions notebook's stored text predates the softmax dim fix).
  run_book_case(
      "ex3.2_wrapper_seed123", 123,
      [] { return std::make_shared<MultiHeadAttentionWrapper>(3, 1, 6, 0.0, 2); }, book_batch(),
      {2, 6, 2},
      tensor({{-0.5740, 0.2216},
              {-0.7320, 0.0155},
              {-0.7774, -0.0546},
              {-0.6979, -0.0817},
              {-0.6538, -0.0957},
              {-0.6424, -0.1065}}));
}

TEST(Exercise33, GPT2SizedMultiHeadAttentionHas2360064Parameters) {
  MultiHeadAttention mha(768, 768, 1024, 0.0, 12);
  int64_t count = 0;
  for (const Tensor& p : mha.parameters()) {
    if (p.requires_grad()) count += p.numel();
  }
  EXPECT_EQ(count, 2360064);  // 3 * 768 * 768 + 768 * 768 + 768
  EXPECT_EQ(mha.head_dim, 64);
  EXPECT_EQ(mha.mask.shape(), (Shape{1024, 1024}));
}

}  // namespace
}  // namespace ember::nn
