// The GPT model of chapter 4 (nn/gpt.h) against PyTorch 1.13 running the book's classes.
//
// Expected values come from tests/fixtures/gpt.txt, written by scripts/fixtures/gen_gpt.py (its
// docstring lists the entries) and read by tests/fixtures.h. Both sides start from manual_seed(123)
// and build the model (which draws every weight), run the book's batch in training mode (dropout
// drawn as PyTorch draws it), then in eval mode, then generate greedily. Weights must match bit for
// bit; logits (sums in another order) to 1e-5.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/base/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/tensor/random.h"
#include "nn/attention.h"
#include "nn/gpt.h"
#include "tests/fixtures.h"
#include "tests/nn/gpt_test_util.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

using test::error_of;
using test::expect_error;
using test::tiny_gpt_config;
using ::testing::HasSubstr;

// ---- the fixture (tests/fixtures/gpt.txt: see scripts/fixtures/gen_gpt.py for its entries) ----

const test::Fixture& gpt_fixture() { return test::fixture_file("gpt.txt"); }

// Every parameter has PyTorch's name, shape, checksums and elements (all of them, or a few
// sampled ones), in order.
void expect_weights(const GPTModel& model, const std::string& m) {
  const test::Fixture& f = gpt_fixture();
  const NamedTensors params = model.named_parameters();
  const std::vector<std::string>& keys = f.keys(m + "/params");
  ASSERT_EQ(params.size(), keys.size());
  int64_t numel = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [key, p] = params[i];
    SCOPED_TRACE(key);
    ASSERT_EQ(key, keys[i]);
    const std::string prefix = m + "/param/" + key;
    numel += p.numel();
    const std::vector<float> v = p.to_vector<float>();
    double sum = 0, sumsq = 0, wsum = 0, scale = 0;
    for (std::size_t j = 0; j < v.size(); ++j) {
      const double x = v[j], w = static_cast<double>(j % 97 + 1);
      sum += x;
      sumsq += x * x;
      wsum += x * w;
      scale += std::abs(x) * w;
    }
    // Float64 sums of the same float32 values, in another order: equal to rounding.
    const std::vector<double> sums = f.tensor(prefix + "/sums").to_vector<double>();
    ASSERT_EQ(sums.size(), 3u);
    const double tol = 1e-11 * (scale + 1);
    EXPECT_NEAR(sum, sums[0], tol);
    EXPECT_NEAR(sumsq, sums[1], tol);
    EXPECT_NEAR(wsum, sums[2], tol);
    if (f.has(prefix)) {
      f.expect_exact(p, prefix);
      continue;
    }
    ASSERT_EQ(p.shape(), Shape(f.tensor(prefix + "/shape").to_vector<int64_t>()));
    f.expect_exact(index_select(p.reshape({-1}), 0, f.tensor(prefix + "/index")),
                   prefix + "/value");
  }
  EXPECT_EQ(numel, f.tensor(m + "/numel").item<int64_t>());
}

// The sampled logits of every row [b, t] of `mode` equal PyTorch's to 1e-5.
void expect_logit_rows(const Tensor& logits, const std::string& m, const std::string& mode) {
  const test::Fixture& f = gpt_fixture();
  const Shape shape(f.tensor(m + "/logits/shape").to_vector<int64_t>());
  ASSERT_EQ(logits.shape(), shape);
  const Tensor index = f.tensor(m + "/logits/index");
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t t = 0; t < shape[1]; ++t) {
      const std::string name =
          m + "/logits/" + mode + "/" + std::to_string(b) + "/" + std::to_string(t);
      f.expect_near(index_select(logits.index({b, t}), 0, index), name, 0, 1e-5);
    }
  }
}

// ---- the tiny model: every weight and every logit ----

TEST(GPTModel, TinyModelMatchesPyTorchWeightsAndLogits) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  expect_weights(model, "tiny");
  if (HasFatalFailure()) return;

  Tensor batch = tensor({{1, 15, 3, 7, 0}, {4, 4, 9, 12, 2}}, DType::Int64);
  for (const std::string mode : {"train", "eval"}) {
    SCOPED_TRACE(mode);
    if (mode == "eval") model.eval();
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = model.forward(batch);
    }
    gpt_fixture().expect_near(logits, "tiny/logits/" + mode, 0, 1e-5);
    expect_logit_rows(logits, "tiny", mode);
  }
}

TEST(GPTModel, NamesAndReprFollowTheBook) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  const NamedTensors params = model.named_parameters();
  EXPECT_EQ(params.front().first, "tok_emb.weight");
  EXPECT_EQ(params[2].first, "trf_blocks.0.att.W_query.weight");
  EXPECT_EQ(params.back().first, "out_head.weight");
  const std::string repr = model.to_string();
  EXPECT_NE(repr.find("(ff): FeedForward(\n"), std::string::npos) << repr;
  EXPECT_NE(repr.find("(1): GELU()"), std::string::npos) << repr;
  EXPECT_NE(repr.find("(final_norm): LayerNorm()"), std::string::npos) << repr;
  EXPECT_NE(repr.find("(out_head): Linear(in_features=8, out_features=16, bias=False)"),
            std::string::npos)
      << repr;
}

// ---- GPT_CONFIG_124M: the book's numbers (one test: building 163M parameters takes a while) --

TEST(GPTModel, Config124MMatchesPyTorchAndTheBook) {
  manual_seed(123);
  GPTModel model(GPT_CONFIG_124M);
  int64_t total = 0;
  for (const Tensor& p : model.parameters()) total += p.numel();
  EXPECT_EQ(total, 163009536);
  expect_weights(model, "124M");
  if (HasFatalFailure()) return;

  // The book's batch, "Every effort moves you" and "Every day holds a", first in training mode
  // (as the book prints it), then in eval mode.
  Tensor batch = tensor({{6109, 3626, 6100, 345}, {6109, 1110, 6622, 257}}, DType::Int64);
  for (const std::string mode : {"train", "eval"}) {
    SCOPED_TRACE(mode);
    if (mode == "eval") model.eval();
    NoGradGuard no_grad;
    Tensor logits = model.forward(batch);
    EXPECT_EQ(logits.shape(), (Shape{2, 4, 50257}));
    expect_logit_rows(logits, "124M", mode);
  }

  // "Hello, I am" and six greedy tokens.
  Tensor out = generate_text_simple(model, tensor({{15496, 11, 314, 716}}, DType::Int64), 6,
                                    GPT_CONFIG_124M.context_length);
  const std::vector<int64_t> book = {15496, 11, 314, 716, 27018, 24086, 47843, 30961, 42348, 7267};
  EXPECT_EQ(out.to_vector<int64_t>(), book);
  EXPECT_EQ(gpt_fixture().tensor("124M/generate").to_vector<int64_t>(), book);
}

// ---- the book's LayerNorm and GELU ----

TEST(GPTLayerNorm, MatchesTheLibraryLayerNorm) {
  manual_seed(1);
  Tensor x = randn({2, 3, 8});
  GPTLayerNorm book(8);
  LayerNorm library(8);
  EXPECT_EQ(book.named_parameters()[0].first, "scale");
  EXPECT_EQ(book.named_parameters()[1].first, "shift");
  test::expect_allclose(book.forward(x), library.forward(x), 1e-5, 1e-6);
  Tensor y = book.forward(x);
  // Mean 0 and biased variance 1 along the last dim (eps aside).
  test::expect_allclose(y.mean(-1), zeros({2, 3}), 0, 1e-6);
  test::expect_allclose(var(y, {-1}, Correction(0)), ones({2, 3}), 1e-4, 1e-4);
  expect_error([&] { book.forward(randn({2, 7})); }, "LayerNorm: expected input with last dim 8");
}

TEST(GPTGELU, MatchesTheTanhApproximation) {
  Tensor x = tensor({-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0});
  GPTGELU book;
  test::expect_allclose(book.forward(x), gelu(x, "tanh"), 1e-6, 1e-7);
  // 0.5 * 1 * (1 + tanh(sqrt(2 / pi) * 1.044715)) = 0.841192
  EXPECT_NEAR(book.forward(tensor({1.0})).item(), 0.8411920, 1e-6);
}

// ---- gradients (float64, central differences) ----

// gradcheck of `module` (converted to float64) with respect to an input of `shape` and every
// parameter: the parameters are passed as inputs, so gradcheck perturbs them in place.
void expect_gradcheck(Module& module, const Shape& shape) {
  module.to(DType::Float64);
  module.eval();
  manual_seed(7);
  std::vector<Tensor> inputs = {randn(shape, DType::Float64).requires_grad_()};
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  auto fn = [&](const std::vector<Tensor>& in) { return module.forward(in[0]); };
  const autograd::GradcheckResult result = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(result.ok) << result.report;
}

GPTConfig gradcheck_config() {
  GPTConfig cfg = tiny_gpt_config();
  cfg.emb_dim = 4;
  cfg.context_length = 4;
  cfg.n_layers = 1;
  return cfg;
}

TEST(GPTGradcheck, LayerNorm) {
  manual_seed(3);
  GPTLayerNorm m(5);
  // Non-trivial scale and shift.
  {
    NoGradGuard no_grad;
    m.scale.copy_(randn({5}));
    m.shift.copy_(randn({5}));
  }
  expect_gradcheck(m, {2, 3, 5});
}

TEST(GPTGradcheck, GELU) {
  GPTGELU m;
  expect_gradcheck(m, {3, 4});
}

TEST(GPTGradcheck, FeedForward) {
  manual_seed(4);
  FeedForward m(gradcheck_config());
  expect_gradcheck(m, {2, 3, 4});
}

TEST(GPTGradcheck, TransformerBlock) {
  manual_seed(5);
  TransformerBlock m(gradcheck_config());
  expect_gradcheck(m, {2, 3, 4});
}

TEST(GPTGradcheck, GPTModelParameters) {
  manual_seed(6);
  GPTModel model(gradcheck_config());
  model.to(DType::Float64);
  model.eval();
  Tensor ids = tensor({{1, 2, 3}, {15, 0, 7}}, DType::Int64);
  std::vector<Tensor> inputs = model.parameters();
  auto fn = [&](const std::vector<Tensor>&) { return model.forward(ids); };
  const autograd::GradcheckResult result = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(result.ok) << result.report;
}

// ---- generation ----

TEST(GPTGenerate, TopKOneAndTemperatureZeroAreGreedy) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  Tensor start = tensor({{1, 2}, {3, 4}}, DType::Int64);
  Tensor greedy = generate_text_simple(model, start, 10, 8);  // longer than the context: cropped
  EXPECT_EQ(greedy.shape(), (Shape{2, 12}));
  EXPECT_EQ(generate(model, start, 10, 8).to_vector<int64_t>(), greedy.to_vector<int64_t>());
  EXPECT_EQ(generate(model, start, 10, 8, 1.5, 1).to_vector<int64_t>(),
            greedy.to_vector<int64_t>());
}

// Chapter 5's generate (temperature, top-k, multinomial) draws PyTorch's tokens for the same seed.
TEST(GPTGenerate, SamplingMatchesPyTorch) {
  const test::Fixture& f = gpt_fixture();
  const std::vector<std::string>& seeds = f.keys("tiny/samples");
  ASSERT_EQ(seeds.size(), 3u);
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  for (const std::string& seed : seeds) {
    SCOPED_TRACE("seed " + seed);
    const std::string prefix = "tiny/sample/" + seed + "/";
    manual_seed(std::stoull(seed));
    std::optional<int64_t> top_k;
    if (const int64_t k = f.tensor(prefix + "top_k").item<int64_t>(); k > 0) top_k = k;
    Tensor out = generate(model, tensor({{1, 2, 3}}, DType::Int64), 12, 8,
                          f.tensor(prefix + "temperature").item<double>(), top_k);
    f.expect_exact(out.reshape({-1}), prefix + "ids");
  }
}

TEST(GPTGenerate, SamplingIsReproducibleAndRespectsTopK) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  Tensor start = tensor({{1, 2, 3}}, DType::Int64);
  manual_seed(9);
  Tensor a = generate(model, start, 20, 8, 2.0);
  manual_seed(9);
  Tensor b = generate(model, start, 20, 8, 2.0);
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  // A high temperature spreads the choices over several ids.
  std::vector<int64_t> ids = a.to_vector<int64_t>();
  std::map<int64_t, int> seen;
  for (std::size_t i = 3; i < ids.size(); ++i) seen[ids[i]]++;
  EXPECT_GT(seen.size(), 3u);
  // With top_k = 2 every new id is one of the two largest logits of its step.
  manual_seed(10);
  Tensor c = generate(model, start, 12, 8, 5.0, 2);
  std::vector<int64_t> c_ids = c.to_vector<int64_t>();
  NoGradGuard no_grad;
  for (std::size_t n = 3; n < c_ids.size(); ++n) {
    std::vector<double> context(c_ids.begin() + std::max<std::ptrdiff_t>(0, n - 8),
                                c_ids.begin() + static_cast<std::ptrdiff_t>(n));
    Tensor logits = model.forward(
        from_vector(context, {1, static_cast<int64_t>(context.size())}, DType::Int64));
    std::vector<float> last = logits.index({0, -1}).to_vector<float>();
    int larger = 0;
    for (float v : last) larger += v > last[static_cast<std::size_t>(c_ids[n])];
    EXPECT_LE(larger, 1) << "token " << n << " = " << c_ids[n] << " is not in the top 2";
  }
}

TEST(GPTGenerate, StopsAtEos) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  Tensor start = tensor({{1, 2}}, DType::Int64);
  Tensor greedy = generate(model, start, 1, 8);
  const int64_t first = greedy.to_vector<int64_t>().back();
  EXPECT_EQ(generate(model, start, 5, 8, 0.0, std::nullopt, first).shape(), (Shape{1, 2}));
}

// A batch of no rows has none to stop: with eos_id it gets its max_new_tokens columns, as without.
TEST(GPTGenerate, AnEmptyBatchGetsItsColumnsWithEos) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  const Tensor none = zeros({0, 2}, DType::Int64);
  EXPECT_EQ(generate(model, none, 5, 8).shape(), (Shape{0, 7}));
  EXPECT_EQ(generate(model, none, 5, 8, 0.0, std::nullopt, 3).shape(), (Shape{0, 7}));
  EXPECT_EQ(generate(model, none, 5, 8, 1.0, 2, 3, nullptr, true).shape(), (Shape{0, 7}));
}

// A batch of no rows returns at once whatever max_new_tokens is: its steps give empty columns and
// draw nothing, so only the first runs (its checks still hold: an eos_id past the vocabulary).
TEST(GPTGenerate, AnEmptyBatchDoesNotStepThroughAHugeMaxNewTokens) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  const Tensor none = zeros({0, 2}, DType::Int64);
  const int64_t huge = int64_t{1} << 50;
  for (bool use_cache : {false, true}) {
    manual_seed(5);
    EXPECT_EQ(generate(model, none, huge, 8, 1.0, 2, std::nullopt, nullptr, use_cache).shape(),
              (Shape{0, 2 + huge}));
    const double after = rand({1}).item();
    manual_seed(5);
    EXPECT_EQ(after, rand({1}).item());  // nothing was drawn
    expect_error([&] { generate(model, none, huge, 8, 0.0, std::nullopt, 16, nullptr, use_cache); },
                 "generate: eos_id must be in [0, vocab_size = 16), got 16");
  }
  EXPECT_EQ(generate_text_simple(model, none, huge, 8).shape(), (Shape{0, 2 + huge}));
  EXPECT_EQ(generate_text_simple(model, none, 1, 8).shape(), (Shape{0, 3}));
}

// top_k and eos_id that no vocabulary allows are Errors before any step (max_new_tokens = 0
// too); those past the model's vocabulary, once its logits tell its size. An eos_id the model
// cannot draw would never stop generation.
TEST(GPTGenerate, TopKAndEosIdOutOfRangeAreErrors) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  const Tensor ids = zeros({1, 2}, DType::Int64);
  for (int64_t steps : {0, 3}) {
    for (int64_t top_k : {int64_t{0}, int64_t{-1}}) {
      expect_error([&] { generate(model, ids, steps, 8, 1.0, top_k); },
                   "generate: top_k must be >= 1, got " + std::to_string(top_k));
    }
    expect_error([&] { generate(model, ids, steps, 8, 0.0, std::nullopt, -1); },
                 "generate: eos_id must be >= 0, got -1");
  }
  for (bool use_cache : {false, true}) {
    expect_error([&] { generate(model, ids, 3, 8, 0.0, std::nullopt, 16, nullptr, use_cache); },
                 "generate: eos_id must be in [0, vocab_size = 16), got 16");
  }
  EXPECT_EQ(generate(model, ids, 3, 8, 1.0, 16, 15).size(0), 1);  // the largest allowed
}

// A temperature that leaves softmax(logits / temperature) no distribution is an Error naming
// generate, the temperature and the bound it breaks, where PyTorch's book code stops in
// multinomial ("probability tensor contains either `inf`, `nan` or element < 0"). PyTorch 1.13
// with the last logits [0.5, -1, 2, 0, ...] (temperature rounded to float32 as it divides):
//   logits / 1e-300, 1e-310, 1e-40, 1e-46 (top_k or not): inf or nan in the row: the error
//   topk-masked logits / 1e300 and / 3.5e38: -inf / inf = nan: the error
//   logits / 1e300 (no top_k): [0, -0, 0, ...], uniform; topk-masked / 1e38 and / 1e-38: fine
TEST(GPTGenerate, TemperaturesThatLeaveNoDistributionAreErrors) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  model.eval();
  std::vector<double> row(16, 0.0);
  row[0] = 0.5;
  row[1] = -1.0;
  row[2] = 2.0;
  Tensor last = from_vector(row, {16});
  auto handle = model.register_forward_hook(
      [&](Module&, const TensorList&, const Tensor& output) -> std::optional<Tensor> {
        return output * 0.0 + last;
      });
  const Tensor ids = zeros({2, 2}, DType::Int64);
  for (bool use_cache : {false, true}) {
    SCOPED_TRACE(use_cache);
    const auto run = [&](double temperature, std::optional<int64_t> top_k) {
      return generate(model, ids, 2, 8, temperature, top_k, std::nullopt, nullptr, use_cache);
    };
    for (double t : {1e-300, 1e-310, 1e-40, 1e-46}) {
      for (std::optional<int64_t> top_k : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
        std::ostringstream temperature;
        temperature << t;
        expect_error([&] { run(t, top_k); },
                     "generate: temperature " + temperature.str() +
                         " makes logits / temperature overflow float32 (the largest |logit| of "
                         "row 0 is 2, and float32 holds up to 3.40282e+38), so softmax(logits / "
                         "temperature) has no distribution to sample from; expected a "
                         "temperature >= 5.87747e-39, or 0 for greedy decoding");
      }
    }
    for (double t : {1e300, 3.5e38}) {
      std::ostringstream temperature;
      temperature << t;
      expect_error([&] { run(t, 2); },
                   "generate: temperature " + temperature.str() +
                       " is inf in float32 (above its largest value 3.40282e+38), and the logits "
                       "top_k set to -inf divided by it are nan, so softmax(logits / "
                       "temperature) has no distribution to sample from; expected a temperature "
                       "<= 3.40282e+38");
    }
    EXPECT_EQ(run(1e300, std::nullopt).shape(), (Shape{2, 4}));
    const std::vector<int64_t> top2 = run(1e38, 2).narrow(1, 2, 2).to_vector<int64_t>();
    for (int64_t id : top2) EXPECT_TRUE(id == 0 || id == 2) << id;
    EXPECT_EQ(run(1e-38, 2).narrow(1, 2, 2).to_vector<int64_t>(), std::vector<int64_t>(4, 2));
    EXPECT_EQ(model.current_pos, 0);  // the cache is given back, error or not
  }
  // Logits that no temperature helps: the model's.
  row[3] = NAN;
  last = from_vector(row, {16});
  expect_error([&] { generate(model, ids, 2, 8, 1.0); },
               "generate: the logits of row 0 hold nan (the model's output), so softmax(logits / "
               "temperature) has no distribution to sample from; expected finite logits");
  row[3] = INFINITY;
  last = from_vector(row, {16});
  expect_error([&] { generate(model, ids, 2, 8, 1.0); }, "the logits of row 0 hold inf");
  handle.remove();
}

// ---- errors ----

TEST(GPTModel, BadInputsAreErrors) {
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  expect_error(
      [&] {
        model.forward(tensor({{1.0, 2.0}}));
      },
      "GPTModel: expected token ids of dtype int64 and shape [batch, num_tokens], got "
      "float32 of shape [1, 2]");
  expect_error(
      [&] {
        model.forward(zeros({1, 9}, DType::Int64));
      },
      "GPTModel: input has 9 tokens, expected 1 to context_length = 8");
  expect_error([&] { model.forward(full({1, 2}, 16, DType::Int64)); }, "16");
  expect_error([&] { model.forward(Tensor()); }, "GPTModel: expected a defined tensor");
  expect_error([&] { model.trf_blocks->forward(Tensor()); },
               "TransformerBlock: expected a defined tensor");
  expect_error([&] { generate_text_simple(model, zeros({3}, DType::Int64), 1, 8); },
               "generate_text_simple: expected token ids of dtype int64 and shape [batch, n]");
  expect_error(
      [&] {
        generate(model, zeros({1, 2}, DType::Int64), 1, 8, -1.0);
      },
      "generate: temperature must be finite and >= 0, got -1");
  expect_error(
      [&] {
        generate(model, zeros({1, 2}, DType::Int64), 1, 8, 1.0, 17);
      },
      "generate: top_k must be in [1, vocab_size = 16], got 17");
  expect_error(
      [&] {
        generate(model, zeros({1, 2}, DType::Int64), 1, 0);
      },
      "context_size must be >= 1");
  GPTConfig bad = tiny_gpt_config();
  bad.n_heads = 3;
  expect_error([&] { GPTModel m(bad); }, "GPTModel: emb_dim (8) must be divisible by n_heads (3)");
  EXPECT_EQ(error_of([&] { model.forward(zeros({1, 8}, DType::Int64)); }), "");
}

// Sizes at the int64 limits are Errors naming the op and the values, before anything runs.
TEST(GPTModel, SizesAtTheLimitsAreErrors) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  manual_seed(123);
  GPTModel model(tiny_gpt_config());
  const Tensor ids = zeros({1, 2}, DType::Int64);
  // The output would hold 2 + max_new_tokens ids per row.
  for (const int64_t n : {kMax, kMax - 1}) {
    const std::string values = "(2 + " + std::to_string(n) + " does not fit in int64)";
    expect_error([&] { generate(model, ids, n, 8); },
                 "generate: size calculation overflowed " + values);
    expect_error([&] { generate_text_simple(model, ids, n, 8); },
                 "generate_text_simple: size calculation overflowed " + values);
  }
  // An output that would not fit in memory could never be returned: an Error before any step,
  // not steps until memory runs out (eos_id or not).
  const std::string huge = std::to_string(kMax / 16);
  expect_error([&] { generate_text_simple(model, ids, kMax / 16, 8); },
               "generate_text_simple: the output, [batch, n + max_new_tokens] = [1, 2 + " + huge +
                   "] int64 ids, would take more than the ");
  expect_error([&] { generate(model, ids, kMax / 16, 8, 0.0, std::nullopt, 3); },
               "generate: the output, [batch, n + max_new_tokens] = [1, 2 + " + huge +
                   "] int64 ids, would take more than the ");
  EXPECT_EQ(generate(model, ids, 0, kMax).shape(), (Shape{1, 2}));  // the largest context: all ids
  EXPECT_EQ(generate_text_simple(model, ids, 1, kMax).shape(), (Shape{1, 3}));
  for (const int64_t n : {int64_t{-1}, kMin}) {
    expect_error([&] { generate(model, ids, n, 8); },
                 "generate: max_new_tokens must be >= 0, got " + std::to_string(n));
    expect_error([&] { generate(model, ids, 1, n); },
                 "generate: context_size must be >= 1, got " + std::to_string(n));
  }
  // FeedForward's hidden layer is 4 * emb_dim wide.
  GPTConfig wide = tiny_gpt_config();
  wide.emb_dim = kMax / 4 + 1;
  expect_error([&] { FeedForward ff(wide); },
               "FeedForward: 4 * emb_dim: size calculation overflowed (4 * 2305843009213693952 "
               "does not fit in int64)");
  // Sizes the model's tensors cannot have: the tensor API's Errors, never a wrapped size.
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, kMin}) {
    GPTConfig c = tiny_gpt_config();
    c.context_length = bad;
    expect_error([&] { GPTModel m(c); }, "GPTModel: expected positive sizes");
  }
  for (const auto field :
       {&GPTConfig::vocab_size, &GPTConfig::context_length, &GPTConfig::emb_dim}) {
    GPTConfig c = tiny_gpt_config();
    c.*field = kMax;
    c.n_heads = 1;
    EXPECT_NE(error_of([&] { GPTModel m(c); }).find("overflow"), std::string::npos);
  }
}

// A huge n_layers of small blocks is an Error once the first block is built, before the rest
// (made one by one, they would run for days before memory ran out); so is a huge num_heads of
// the wrapper's small heads.
TEST(GPTModel, TooManyLayersOrHeadsForMemoryAreErrors) {
  GPTConfig c = tiny_gpt_config();
  c.n_layers = int64_t{1} << 40;
  const std::string message = error_of([&] { GPTModel m(c); });
  EXPECT_THAT(message,
              HasSubstr("GPTModel: the configuration (vocab_size=" + std::to_string(c.vocab_size) +
                        ", context_length=" + std::to_string(c.context_length)));
  EXPECT_THAT(message, HasSubstr("n_layers=1099511627776) needs about "));
  EXPECT_THAT(message, HasSubstr(" MiB of memory this machine has"));
  EXPECT_THAT(error_of([] { MultiHeadAttentionWrapper(3, 2, 6, 0.0, int64_t{1} << 40); }),
              HasSubstr("MultiHeadAttentionWrapper: 1099511627776 heads of d_in=3, d_out=2, "
                        "context_length=6 need about "));
  // What fits is built as before.
  c.n_layers = 3;
  GPTModel m(c);
  EXPECT_EQ(m.trf_blocks->size(), 3);
  EXPECT_EQ(MultiHeadAttentionWrapper(3, 2, 6, 0.0, 4).heads->size(), 4);
}

}  // namespace
}  // namespace ember::nn
