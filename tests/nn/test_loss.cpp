// Losses against PyTorch 1.13 (tests/fixtures/losses.txt from scripts/fixtures/gen_losses.py):
// the loss and its input gradient in every case, gradcheck of every loss in float64, the fused
// cross_entropy against the composite nll_loss(log_softmax), the errors (a reduction out of
// range), and infinite logits and empty class lists as PyTorch gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/ember.h"
#include "nn/loss.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

namespace F = nn::functional;
using test::expect_error;

const double kInf = std::numeric_limits<double>::infinity();

// case -> what -> tensor, from tests/fixtures/losses.txt ("<case>/<what>" lines, read by
// tests/fixtures.h): float64, class-index targets int64.
using Case = std::map<std::string, Tensor>;

const std::map<std::string, Case>& fixture() {
  static const std::map<std::string, Case> cases = [] {
    std::map<std::string, Case> out;
    const test::Fixture& f = test::fixture_file("losses.txt");
    for (const std::string& name : f.names()) {
      const std::size_t slash = name.find('/');
      Tensor t = f.tensor(name);
      if (is_floating(t.dtype())) t = t.to(DType::Float64);
      out[name.substr(0, slash)][name.substr(slash + 1)] = t;
    }
    return out;
  }();
  return cases;
}

using LossFn = std::function<Tensor(const Tensor& x, const Case& c)>;

Tensor get(const Case& c, const std::string& what) {
  auto it = c.find(what);
  return it == c.end() ? Tensor() : it->second;
}

nn::Reduction reduction_of(const std::string& name) {
  if (name.ends_with("_sum")) return nn::kSum;
  if (name.ends_with("_none")) return nn::kNone;
  return nn::kMean;
}

// The loss function of each fixture case, with the options the script used.
LossFn loss_for(const std::string& name) {
  const nn::Reduction r = reduction_of(name);
  auto ce = [r](double smoothing, int64_t ignore = -100) {
    return [=](const Tensor& x, const Case& c) {
      return F::cross_entropy(x, get(c, "target"),
                              F::CrossEntropyFuncOptions()
                                  .weight(get(c, "weight"))
                                  .reduction(r)
                                  .label_smoothing(smoothing)
                                  .ignore_index(ignore));
    };
  };
  if (name.starts_with("ce_smooth_noweight")) return ce(0.3);
  if (name.starts_with("ce_smooth")) return ce(0.2);
  if (name.starts_with("ce_probs")) return ce(0.1);
  if (name == "ce_ignore3") return ce(0.0, 3);
  if (name == "ce_huge")
    return [](const Tensor& x, const Case& c) {
      return F::cross_entropy(x, get(c, "target"),
                              F::CrossEntropyFuncOptions().reduction(nn::kNone));
    };
  if (name.starts_with("ce_")) return ce(0.0);
  if (name.starts_with("nll_"))
    return [r](const Tensor& x, const Case& c) {
      return F::nll_loss(x, get(c, "target"),
                         F::NLLLossFuncOptions().weight(get(c, "weight")).reduction(r));
    };
  if (name.starts_with("mse_"))
    return [r](const Tensor& x, const Case& c) { return F::mse_loss(x, get(c, "target"), r); };
  if (name.starts_with("l1_"))
    return [r](const Tensor& x, const Case& c) { return F::l1_loss(x, get(c, "target"), r); };
  if (name.starts_with("bce_"))
    return [r](const Tensor& x, const Case& c) {
      return F::binary_cross_entropy(
          x, get(c, "target"),
          F::BinaryCrossEntropyFuncOptions().weight(get(c, "weight")).reduction(r));
    };
  if (name == "bcel_huge")
    return [](const Tensor& x, const Case& c) {
      return F::binary_cross_entropy_with_logits(x, get(c, "target"),
                                                 F::BinaryCrossEntropyWithLogitsFuncOptions()
                                                     .pos_weight(get(c, "pos_weight"))
                                                     .reduction(nn::kNone));
    };
  if (name.starts_with("bcel_"))
    return [r](const Tensor& x, const Case& c) {
      return F::binary_cross_entropy_with_logits(x, get(c, "target"),
                                                 F::BinaryCrossEntropyWithLogitsFuncOptions()
                                                     .weight(get(c, "weight"))
                                                     .pos_weight(get(c, "pos_weight"))
                                                     .reduction(r));
    };
  return nullptr;
}

TEST(Loss, MatchesPyTorchFixtures) {
  ASSERT_GT(fixture().size(), 40u);
  int target_grads = 0;
  for (const auto& [name, c] : fixture()) {
    SCOPED_TRACE(name);
    LossFn fn = loss_for(name);
    ASSERT_TRUE(fn) << "no loss for case " << name;
    const bool f32 = name.ends_with("_f32");
    Tensor x = get(c, "input").to(f32 ? DType::Float32 : DType::Float64).detach();
    x.requires_grad_();
    // A floating target (probabilities, regression values) is differentiated too, as PyTorch's.
    Case inputs = c;
    Tensor target_leaf;
    if (c.count("target_grad")) {
      target_leaf = get(c, "target").to(x.dtype()).detach().requires_grad_();
      inputs["target"] = target_leaf;
    }
    Tensor loss = fn(x, inputs);
    Tensor expected_loss = get(c, "loss"), expected_grad = get(c, "grad");
    ASSERT_EQ(loss.shape(), expected_loss.shape());
    const double tol = f32 ? 1e-3 : 1e-12;  // f32: values near 4e3 (1 ulp is 5e-4)
    test::expect_values(loss, test::values(expected_loss), tol);
    sum(loss).backward();
    ASSERT_TRUE(x.grad().defined());
    test::expect_values(x.grad(), test::values(expected_grad), f32 ? 1e-6 : 1e-12);
    if (target_leaf.defined()) {
      ASSERT_TRUE(target_leaf.grad().defined());
      test::expect_values(target_leaf.grad(), test::values(get(c, "target_grad")), 1e-12);
      ++target_grads;
    }
  }
  EXPECT_EQ(target_grads, 17);  // ce_probs, mse, l1, bce, bcel: every floating target
}

TEST(Loss, AllIgnoredMeanIsNan) {
  const Case& c = fixture().at("ce_all_ignored");
  Tensor loss = F::cross_entropy(get(c, "input"), get(c, "target"));
  EXPECT_TRUE(std::isnan(loss.item()));
}

TEST(Loss, FusedCrossEntropyEqualsComposite) {
  Tensor x = test::pattern({4, 5}, 1) * 3.0;
  Tensor t = from_vector({0, -100, 4, 2}, {4}, DType::Int64);
  Tensor w = from_vector({0.5, 1.0, 2.0, 1.5, 0.25}, {5}, DType::Float64);
  for (nn::Reduction r : {nn::kMean, nn::kSum, nn::kNone}) {
    Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
    Tensor fused = F::cross_entropy(a, t, F::CrossEntropyFuncOptions().weight(w).reduction(r));
    Tensor composite =
        F::nll_loss(log_softmax(b, 1), t, F::NLLLossFuncOptions().weight(w).reduction(r));
    EXPECT_EQ(test::grad_fn_name(fused), "CrossEntropyLossBackward0");
    test::expect_allclose(fused, composite, 1e-12, 1e-12);
    sum(fused).backward();
    sum(composite).backward();
    test::expect_allclose(a.grad(), b.grad(), 1e-12, 1e-12);
  }
}

// Enough positions x classes (> 2^16) for the parallel path: 1 and 2 threads give the same bits
// (each position is one thread's work), forward and backward.
TEST(Loss, CrossEntropySameBitsAtOneAndTwoThreads) {
  const int saved = get_num_threads();
  manual_seed(5);
  Tensor x = randn({64, 50, 30});  // N = 64, C = 50, 30 positions each
  Tensor t = randint(0, 50, {64, 30});
  std::vector<Tensor> losses, grads;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor a = x.detach().requires_grad_();
    Tensor loss = F::cross_entropy(a, t, F::CrossEntropyFuncOptions().label_smoothing(0.1));
    loss.backward();
    losses.push_back(loss);
    grads.push_back(a.grad());
  }
  set_num_threads(saved);
  EXPECT_EQ(losses[0].item(), losses[1].item());
  EXPECT_TRUE(equal(grads[0], grads[1]));
}

TEST(Loss, Gradcheck) {
  using autograd::gradcheck;
  Tensor x = test::pattern({3, 4}, 1).requires_grad_();
  Tensor t = from_vector({2, -100, 0}, {3}, DType::Int64);
  Tensor w = from_vector({0.5, 1.0, 2.0, 1.5}, {4}, DType::Float64);
  Tensor probs = softmax(test::pattern({3, 4}, 2), 1).requires_grad_();
  Tensor y = ((test::pattern({3, 4}, 6) + 1.0) / 2.0).requires_grad_();
  Tensor xb = sigmoid(test::pattern({3, 4}, 7) * 3.0).detach().requires_grad_();
  Tensor pw = from_vector({3.0, 0.5, 1.0, 2.0}, {4}, DType::Float64);
  for (nn::Reduction r : {nn::kMean, nn::kSum, nn::kNone}) {
    auto ce = F::CrossEntropyFuncOptions().weight(w).reduction(r).label_smoothing(0.2);
    auto check_fn = [](const std::function<Tensor(const std::vector<Tensor>&)>& f,
                       const std::vector<Tensor>& in) {
      auto result = gradcheck(f, in);
      EXPECT_TRUE(result.ok) << result.report;
    };
    check_fn([&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], t, ce); }, {x});
    check_fn([&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1], ce); },
             {x, probs});
    check_fn(
        [&](const std::vector<Tensor>& in) {
          return F::nll_loss(in[0], t, F::NLLLossFuncOptions().weight(w).reduction(r));
        },
        {x});
    check_fn([&](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1], r); }, {x, y});
    check_fn([&](const std::vector<Tensor>& in) { return F::l1_loss(in[0], in[1], r); }, {x, y});
    check_fn(
        [&](const std::vector<Tensor>& in) {
          return F::binary_cross_entropy(in[0], in[1],
                                         F::BinaryCrossEntropyFuncOptions().reduction(r));
        },
        {xb, y});
    check_fn(
        [&](const std::vector<Tensor>& in) {
          return F::binary_cross_entropy_with_logits(
              in[0], in[1],
              F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(pw).reduction(r));
        },
        {x, y});
  }
  // [N, C, d] logits.
  Tensor x3 = test::pattern({2, 3, 2}, 3).requires_grad_();
  Tensor t3 = from_vector({0, 2, 1, -100}, {2, 2}, DType::Int64);
  auto result = gradcheck(
      [&](const std::vector<Tensor>& in) {
        return F::cross_entropy(in[0], t3, F::CrossEntropyFuncOptions().label_smoothing(0.1));
      },
      {x3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(Loss, Modules) {
  Tensor x = test::pattern({4, 5}, 1);
  Tensor t = from_vector({0, 3, 4, 1}, {4}, DType::Int64);
  Tensor w = from_vector({0.5, 1.0, 2.0, 1.5, 0.25}, {5}, DType::Float64);
  nn::CrossEntropyLoss criterion(nn::CrossEntropyFuncOptions().weight(w));
  EXPECT_EQ(test::keys(criterion.named_buffers()), std::vector<std::string>{"weight"});
  EXPECT_EQ(criterion(x, t).item(),
            F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w)).item());
  nn::NLLLoss nll;
  EXPECT_EQ(nll(log_softmax(x, 1), t).item(), F::cross_entropy(x, t).item());
  nn::MSELoss mse(nn::kSum);
  EXPECT_EQ(mse(x, zeros_like(x)).item(), sum(x * x).item());
  nn::L1Loss l1;
  EXPECT_EQ(l1(x, zeros_like(x)).item(), mean(abs(x)).item());
  Tensor p = sigmoid(x), y = (x.detach() + 1.0) / 2.0;
  nn::BCELoss bce;
  nn::BCEWithLogitsLoss bcel;
  EXPECT_NEAR(bce(p, y).item(), bcel(x, y).item(), 1e-12);
}

// An expanded input with more elements than int64 counts, or too large for memory, is an Error
// naming the op (the allocator's, raised before any vector of C classes is made), never
// std::length_error or std::bad_alloc. An empty input makes nothing per class or per position
// (EmptyInputsWithHugeDimsGivePyTorchsAnswers).
TEST(Loss, HugeClassCountsAreErrors) {
  // [2^40, 2^40] expanded: more elements than int64 counts.
  const int64_t big = int64_t{1} << 40;
  expect_error(
      [&] {
        F::cross_entropy(zeros({1, 1}).expand({big, big}), zeros({1}, DType::Int64).expand({big}));
      },
      "cross_entropy: the number of elements of shape [1099511627776, 1099511627776] overflows "
      "int64");
  // [2^40] and [2^16, 2^40] expanded: 2^40 classes, 2^56 elements, more than memory holds.
  expect_error([&] { F::cross_entropy(zeros({1}).expand({big}), zeros({}, DType::Int64)); },
               "not enough memory");
  expect_error(
      [&] {
        F::nll_loss(zeros({1, 1}).expand({int64_t{1} << 16, big}),
                    zeros({1}, DType::Int64).expand({int64_t{1} << 16}));
      },
      "not enough memory");
}

TEST(Loss, Errors) {
  Tensor x = test::pattern({4, 5}, 1);
  Tensor t = from_vector({0, 3, 4, 1}, {4}, DType::Int64);
  expect_error(
      [&] {
        F::cross_entropy(x, from_vector({0, 5, 1, 1}, {4}, DType::Int64));
      },
      "cross_entropy: target 5 is out of bounds for 5 classes");
  expect_error(
      [&] {
        F::cross_entropy(x, from_vector({0, 1, 1}, {3}, DType::Int64));
      },
      "cross_entropy: expected target of shape [4] for input of shape [4, 5], got [3]");
  expect_error([&] { F::cross_entropy(x, t.to(DType::Float64)); },
               "expected int64 class indices as target, got float64");
  expect_error(
      [&] {
        F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(ones({4}, DType::Float64)));
      },
      "cross_entropy: expected weight of shape [5] and dtype float64");
  expect_error(
      [&] { F::cross_entropy(x, softmax(x, 1), F::CrossEntropyFuncOptions().ignore_index(1)); },
      "ignore_index (1) is not supported for class probability targets");
  expect_error([&] { F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(1.5)); },
               "label_smoothing must be in [0, 1]");
  expect_error([&] { F::cross_entropy(scalar_tensor(1.0), t); }, "cross_entropy: expected input");
  expect_error([&] { F::nll_loss(x.to(DType::Int64), t); },
               "nll_loss: expected a floating point input");
  expect_error([&] { F::binary_cross_entropy(x, sigmoid(x)); },
               "binary_cross_entropy: all elements of input should be between 0 and 1");
  expect_error([&] { F::binary_cross_entropy(sigmoid(x), sigmoid(x).sum(0)); },
               "binary_cross_entropy: target of shape [5] must have the input's shape [4, 5]");
  expect_error([&] { F::mse_loss(x, ones({3}, DType::Float64)); }, "mse_loss");
  expect_error([&] { F::cross_entropy(Tensor(), t); },
               "cross_entropy: input and target must be defined");
  expect_error([&] { F::l1_loss(x, Tensor()); }, "l1_loss: input and target must be defined");
  expect_error([&] { F::binary_cross_entropy_with_logits(Tensor(), x); },
               "binary_cross_entropy_with_logits: input and target must be defined");
  expect_error(
      [&] {
        F::binary_cross_entropy_with_logits(
            x, sigmoid(x),
            F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(ones({3}, DType::Float64)));
      },
      "binary_cross_entropy_with_logits");
}

// mse_loss and l1_loss broadcast input and target to their common shape, both ways, as PyTorch
// does (with its warning): an input [2, 1] and a target [3] make a [2, 3] difference.
TEST(Loss, MseAndL1BroadcastInputAndTargetBothWays) {
  // x = torch.tensor([[0.5], [-1.25]], dtype=torch.float64, requires_grad=True)
  // t = torch.tensor([1.0, 0.25, -2.0], dtype=torch.float64, requires_grad=True)
  auto x = [] { return from_vector({0.5, -1.25}, {2, 1}, DType::Float64).requires_grad_(); };
  auto t = [] { return from_vector({1.0, 0.25, -2.0}, {3}, DType::Float64).requires_grad_(); };
  struct Expected {
    nn::Reduction reduction;
    Shape shape;
    std::vector<double> loss, dx, dt;
  };
  // F.mse_loss(x, t, reduction=r), backward with ones: the loss, x.grad, t.grad.
  const std::vector<Expected> mse = {
      {nn::kMean,
       {},
       {2.40625},
       {0.7499999999999999, -1.0},
       {0.9166666666666666, 0.4166666666666667, -1.0833333333333333}},
      {nn::kSum, {}, {14.4375}, {4.5, -6.0}, {5.5, 2.5, -6.5}},
      {nn::kNone,
       {2, 3},
       {0.25, 0.0625, 6.25, 5.0625, 2.25, 0.5625},
       {4.5, -6.0},
       {5.5, 2.5, -6.5}},
  };
  for (const Expected& e : mse) {
    Tensor input = x(), target = t();
    Tensor loss = F::mse_loss(input, target, e.reduction);
    test::expect_tensor(loss, e.shape, e.loss, 1e-12);
    loss.backward(ones_like(loss));
    test::expect_tensor(input.grad(), {2, 1}, e.dx, 1e-12);
    test::expect_tensor(target.grad(), {3}, e.dt, 1e-12);
  }
  {  // The other way round: F.mse_loss(t, x), the same numbers.
    Tensor input = t(), target = x();
    Tensor loss = F::mse_loss(input, target);
    test::expect_tensor(loss, {}, {2.40625}, 1e-12);
    loss.backward();
    test::expect_values(input.grad(), mse[0].dt, 1e-12);
    test::expect_values(target.grad(), mse[0].dx, 1e-12);
  }
  {  // F.l1_loss(x, t)
    Tensor input = x(), target = t();
    Tensor loss = F::l1_loss(input, target);
    test::expect_tensor(loss, {}, {1.2916666666666667}, 1e-12);
    loss.backward();
    test::expect_values(input.grad(), {0.16666666666666666, -0.16666666666666666}, 1e-12);
    test::expect_values(target.grad(), {0.3333333333333333, 0.0, -0.3333333333333333}, 1e-12);
  }
  for (nn::Reduction r : {nn::kMean, nn::kSum, nn::kNone}) {
    for (bool swap : {false, true}) {
      std::vector<Tensor> in = {x(), t()};
      if (swap) std::swap(in[0], in[1]);
      auto mse_result = autograd::gradcheck(
          [r](const std::vector<Tensor>& a) { return F::mse_loss(a[0], a[1], r); }, in);
      EXPECT_TRUE(mse_result.ok) << mse_result.report;
      auto l1_result = autograd::gradcheck(
          [r](const std::vector<Tensor>& a) { return F::l1_loss(a[0], a[1], r); }, in);
      EXPECT_TRUE(l1_result.ok) << l1_result.report;
    }
  }
  // Shapes that do not broadcast are still refused, naming both.
  expect_error(
      [&] {
        F::mse_loss(x(), ones({2, 3, 4}, DType::Float64));
      },
      "mse_loss: shapes [2, 1] and [2, 3, 4] cannot be broadcast together");
}

TEST(Loss, LossesRefuseAReductionOutOfRange) {
  const auto bad = static_cast<nn::Reduction>(7);
  Tensor x = full({2, 3}, 0.5), t = zeros({2}, DType::Int64);
  expect_error([&] { F::cross_entropy(x, t, F::CrossEntropyFuncOptions().reduction(bad)); },
               "cross_entropy: 7 is not a valid value for reduction");
  expect_error([&] { F::nll_loss(x, t, F::NLLLossFuncOptions().reduction(bad)); },
               "nll_loss: 7 is not a valid value for reduction");
  expect_error([&] { F::mse_loss(x, x, F::MSELossFuncOptions(bad)); }, "mse_loss: 7 is not");
  expect_error([&] { F::l1_loss(x, x, F::L1LossFuncOptions(bad)); }, "l1_loss: 7 is not");
  expect_error(
      [&] { F::binary_cross_entropy(x, x, F::BinaryCrossEntropyFuncOptions().reduction(bad)); },
      "binary_cross_entropy: 7 is not");
  expect_error(
      [&] {
        F::binary_cross_entropy_with_logits(
            x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(bad));
      },
      "binary_cross_entropy_with_logits: 7 is not");
}

TEST(Loss, CrossEntropyOfInfiniteLogitsAndNoClasses) {
  const auto none = F::CrossEntropyFuncOptions().reduction(nn::Reduction::None);
  // PyTorch 1.13: [nan, 1.4076058864593506] for target 0 and for target 1 (log_softmax of a row
  // holding +inf is nan everywhere).
  Tensor x = tensor({{kInf, 0.0, 1.0}, {0.0, 1.0, 2.0}});
  for (int64_t first : {0, 1}) {
    const std::vector<double> loss =
        F::cross_entropy(x, from_vector({static_cast<double>(first), 1.0}, {2}, DType::Int64), none)
            .to_vector<double>();
    EXPECT_TRUE(std::isnan(loss[0])) << "target " << first;
    EXPECT_NEAR(loss[1], 1.4076058864593506, 1e-6);
  }
  // The float32 road's backward too: PyTorch 1.13 gives nan for the whole +inf row and
  // [0.0900, -0.7553, 0.6652] for the other (target 1).
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor xg = x.to(dtype).detach().requires_grad_();
    F::cross_entropy(xg, from_vector({1.0, 1.0}, {2}, DType::Int64), none).sum().backward();
    const std::vector<double> g = xg.grad().to_vector<double>();
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(g[k])) << dtype_name(dtype) << " " << k;
    EXPECT_NEAR(g[3], 0.0900, 1e-4);
    EXPECT_NEAR(g[4], -0.7553, 1e-4);
    EXPECT_NEAR(g[5], 0.6652, 1e-4);
  }
  // -inf logits: inf at the -inf class, finite elsewhere (PyTorch: [inf], [1.31326162815094]).
  Tensor y = tensor({{-kInf, 0.0, 1.0}});
  EXPECT_EQ(F::cross_entropy(y, zeros({1}, DType::Int64), none).item(), kInf);
  EXPECT_NEAR(F::cross_entropy(y, ones({1}, DType::Int64), none).item(), 1.31326162815094, 1e-6);
  // No classes: any class index is out of bounds; no rows: [], nan (mean), 0 (sum).
  expect_error([] { F::cross_entropy(zeros({2, 0}), zeros({2}, DType::Int64)); }, "out of bounds");
  EXPECT_EQ(F::cross_entropy(zeros({0, 3}), zeros({0}, DType::Int64), none).numel(), 0);
  EXPECT_TRUE(std::isnan(F::cross_entropy(zeros({0, 3}), zeros({0}, DType::Int64)).item()));
  EXPECT_EQ(F::cross_entropy(zeros({0, 3}), zeros({0}, DType::Int64),
                             F::CrossEntropyFuncOptions().reduction(nn::Reduction::Sum))
                .item(),
            0.0);
  // Probabilities over no classes: PyTorch divides by input.numel() / C = 0 / 0: nan.
  EXPECT_TRUE(std::isnan(F::cross_entropy(zeros({2, 0}), zeros({2, 0})).item()));
}

// Label smoothing and class-probability targets take -log p_c as log sum exp(x - m) - (x_c - m),
// as PyTorch's log_softmax: a row of equal huge logits loses nothing (m + log 3 - x_c would
// round log 3 away beside 3e38).
TEST(Loss, CrossEntropySmoothingOfHugeLogitsKeepsTheLogOfTheSum) {
  const auto none = F::CrossEntropyFuncOptions().reduction(nn::Reduction::None);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // x = torch.tensor([[-3e38, -3e38, -3e38], [1e30, 1e30, 0.]], dtype=dtype)
    // F.cross_entropy(x, torch.tensor([0, 2]), label_smoothing=0.2, reduction='none')
    //   -> [1.0986123, 8.6666667e+29] (float32 and float64); the same on x.unsqueeze(2)
    const Tensor x = tensor({{-3e38, -3e38, -3e38}, {1e30, 1e30, 0.0}}, dtype);
    const Tensor t = from_vector(std::vector<int64_t>{0, 2}, {2});
    for (const Tensor& loss :
         {F::cross_entropy(x, t, F::CrossEntropyFuncOptions(none).label_smoothing(0.2)),
          F::cross_entropy(x.unsqueeze(2), t.unsqueeze(1),
                           F::CrossEntropyFuncOptions(none).label_smoothing(0.2))}) {
      const std::vector<double> v = loss.to_vector<double>();
      EXPECT_NEAR(v[0], 1.0986122886681098, 1e-6) << dtype_name(dtype);
      EXPECT_NEAR(v[1], 8.666666666666667e+29, 1e23) << dtype_name(dtype);
    }
    // Probabilities: -(log_softmax(x) * y).sum(1) -> [1.0986123, 1e+30]
    const Tensor y = tensor({{1.0, 0.0, 0.0}, {0.0, 0.0, 1.0}}, dtype);
    const std::vector<double> v = F::cross_entropy(x, y, none).to_vector<double>();
    EXPECT_NEAR(v[0], 1.0986122886681098, 1e-6) << dtype_name(dtype);
    EXPECT_NEAR(v[1], 1e30, 1e23) << dtype_name(dtype);
  }
}

// PyTorch multiplies every class's log p_c by its coefficient when the target is probabilities or
// smoothed (-(log p * y * w).sum(), -(log p * w).sum()): a -inf logit of coefficient 0 makes the
// loss nan. Its mean over a total weight of 0 is nan (the nll part's 0 / 0), with a nan gradient
// at every position not ignored; an ignored position's gradient is 0 whatever the upstream one.
TEST(Loss, CrossEntropyZeroCoefficientsAndZeroTotalWeightAsPyTorch) {
  const Tensor w = tensor({1.0, 0.0, 2.0}, DType::Float64);
  // x = torch.tensor([[0., -inf, 1.]], dtype=torch.float64)
  // F.cross_entropy(x, torch.tensor([[1., 0, 0]], dtype=torch.float64)) -> nan
  // F.cross_entropy(x, torch.tensor([0]), weight=w, label_smoothing=0.1) -> nan
  const Tensor x = tensor({{0.0, -kInf, 1.0}}, DType::Float64);
  EXPECT_TRUE(std::isnan(F::cross_entropy(x, tensor({{1.0, 0.0, 0.0}}, DType::Float64)).item()));
  EXPECT_TRUE(
      std::isnan(F::cross_entropy(x, zeros({1}, DType::Int64),
                                  F::CrossEntropyFuncOptions().weight(w).label_smoothing(0.1))
                     .item()));
  // x = torch.tensor([[0., 0, 1], [0., 1, 2]], dtype=torch.float64, requires_grad=True)
  // l = F.cross_entropy(x, torch.tensor([1, 1]), weight=torch.tensor([1., 0, 2]),
  //                     label_smoothing=0.1); l.backward() -> l nan, x.grad all nan
  const Tensor x2 = tensor({{0.0, 0.0, 1.0}, {0.0, 1.0, 2.0}}, DType::Float64);
  Tensor xg = x2.detach().requires_grad_();
  Tensor l = F::cross_entropy(xg, from_vector(std::vector<int64_t>{1, 1}, {2}),
                              F::CrossEntropyFuncOptions().weight(w).label_smoothing(0.1));
  EXPECT_TRUE(std::isnan(l.item()));
  l.backward();
  for (double g : xg.grad().to_vector<double>()) EXPECT_TRUE(std::isnan(g));
  // l = F.cross_entropy(x, torch.tensor([-100, -100]), label_smoothing=0.2); l.backward()
  //   -> l nan, x.grad all 0
  xg = x2.detach().requires_grad_();
  l = F::cross_entropy(xg, from_vector(std::vector<int64_t>{-100, -100}, {2}),
                       F::CrossEntropyFuncOptions().label_smoothing(0.2));
  EXPECT_TRUE(std::isnan(l.item()));
  l.backward();
  for (double g : xg.grad().to_vector<double>()) EXPECT_EQ(g, 0.0);
  // l = F.cross_entropy(x, torch.tensor([-100, 2]), label_smoothing=0.2, reduction='sum')
  // l.backward(torch.tensor(inf)) -> x.grad[0] == [0, 0, 0] (the ignored row)
  xg = x2.detach().requires_grad_();
  l = F::cross_entropy(
      xg, from_vector(std::vector<int64_t>{-100, 2}, {2}),
      F::CrossEntropyFuncOptions().label_smoothing(0.2).reduction(nn::Reduction::Sum));
  l.backward(scalar_tensor(kInf, DType::Float64));
  const std::vector<double> g = xg.grad().to_vector<double>();
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  EXPECT_EQ(g[2], 0.0);
}

// A float32 sum past the largest float is inf, as PyTorch's, not an Error from converting it.
TEST(Loss, CrossEntropyFloat32SumOverflowsToInf) {
  // F.cross_entropy(torch.tensor([[3e38, 0, 1], [3e38, 3e38, -3e38]]), torch.tensor([1, 0]),
  //                 weight=torch.tensor([1., 3., 2.]), label_smoothing=0.3, reduction='sum')
  //   -> tensor(inf)
  const Tensor x = tensor({{3e38, 0.0, 1.0}, {3e38, 3e38, -3e38}});
  const Tensor loss = F::cross_entropy(x, from_vector(std::vector<int64_t>{1, 0}, {2}),
                                       F::CrossEntropyFuncOptions()
                                           .weight(tensor({1.0, 3.0, 2.0}))
                                           .label_smoothing(0.3)
                                           .reduction(nn::Reduction::Sum));
  EXPECT_EQ(loss.dtype(), DType::Float32);
  EXPECT_EQ(loss.item(), kInf);
}

// mse_loss is floating point only, as PyTorch's kernel over the promoted dtype ("mse_cpu" not
// implemented for 'Long'), for every reduction; an integer input with a floating target, or the
// other way round, computes in the floating dtype. (l1_loss is PyTorch's composite
// (input - target).abs(): int64 gives int64 with None and Sum, as in PyTorch.)
TEST(Loss, MseLossOfIntegersIsAnErrorForEveryReduction) {
  Tensor i = from_vector({1, -2, 3}, {3}, DType::Int64);
  Tensor b = from_vector({1, 0, 1}, {3}, DType::Bool);
  for (nn::Reduction r : {nn::kNone, nn::kMean, nn::kSum}) {
    SCOPED_TRACE(static_cast<int>(r));
    expect_error([&] { F::mse_loss(i, i, r); },
                 "mse_loss: not implemented for int64 (input int64 [3], target int64 [3])");
    expect_error([&] { F::mse_loss(i, b, r); }, "mse_loss: not implemented for int64");
    expect_error([&] { F::mse_loss(b, b, r); }, "mse_loss: not implemented for bool");
  }
  // torch.nn.functional.mse_loss(torch.tensor([1, 2]), torch.tensor([1., 3.])): 0.5000
  EXPECT_EQ(F::mse_loss(from_vector({1, 2}, {2}, DType::Int64), tensor({1.0, 3.0})).item(), 0.5);
  EXPECT_EQ(F::mse_loss(tensor({1.0, 2.0}), from_vector({1, 0}, {2}, DType::Bool)).item(), 2.0);
  EXPECT_EQ(F::l1_loss(i, i, nn::kSum).dtype(), DType::Int64);
  // torch.nn.functional.l1_loss(torch.tensor([1., 2.]), torch.tensor([True, False])): the `-`
  // operator's "Subtraction, the `-` operator, with a bool tensor is not supported".
  expect_error(
      [&] {
        F::l1_loss(tensor({1.0, 2.0}), from_vector({1, 0}, {2}, DType::Bool));
      },
      "with a bool tensor is not supported");
}

// An input with no elements, whatever its other dims ([0, 2^62] classes, [2^31, 0] positions),
// gives PyTorch 1.13's answer at once, with nothing made per class or per position:
//   F.cross_entropy(torch.zeros(0, 2**62), torch.zeros(0, dtype=torch.long)): nan (mean),
//   0 (sum), [] (none); the same for nll_loss and for probability targets of the input's shape.
TEST(Loss, EmptyInputsWithHugeDimsGivePyTorchsAnswers) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const Tensor none = zeros({0}, DType::Int64);
  for (int64_t c : {int64_t{1} << 31, int64_t{1} << 32, int64_t{1} << 61, max}) {
    SCOPED_TRACE(c);
    Tensor x = zeros({0, c}).requires_grad_();
    EXPECT_TRUE(std::isnan(F::cross_entropy(x, none).item()));
    EXPECT_TRUE(std::isnan(F::nll_loss(x, none).item()));
    EXPECT_EQ(F::cross_entropy(x, none, F::CrossEntropyFuncOptions().reduction(nn::kSum)).item(),
              0.0);
    EXPECT_EQ(F::nll_loss(x, none, F::NLLLossFuncOptions().reduction(nn::kSum)).item(), 0.0);
    EXPECT_EQ(F::cross_entropy(x, none, F::CrossEntropyFuncOptions().reduction(nn::kNone)).shape(),
              Shape{0});
    EXPECT_EQ(F::nll_loss(x, none, F::NLLLossFuncOptions().reduction(nn::kNone)).shape(), Shape{0});
    // Label smoothing and [N, C, d] inputs take the same road.
    EXPECT_TRUE(std::isnan(
        F::cross_entropy(x, none, F::CrossEntropyFuncOptions().label_smoothing(0.1)).item()));
    EXPECT_TRUE(std::isnan(F::cross_entropy(zeros({2, c, 0}), zeros({2, 0}, DType::Int64)).item()));
    // The gradient is the input's zeros (no elements).
    F::cross_entropy(x, none, F::CrossEntropyFuncOptions().reduction(nn::kSum)).backward();
    EXPECT_EQ(x.grad().shape(), (Shape{0, c}));
    x.set_grad(Tensor());
    F::nll_loss(x, none, F::NLLLossFuncOptions().reduction(nn::kSum)).backward();
    EXPECT_EQ(x.grad().shape(), (Shape{0, c}));
    // A weight is still checked against C.
    expect_error([&] { F::cross_entropy(x, none, F::CrossEntropyFuncOptions().weight(ones({3}))); },
                 "cross_entropy: expected weight of shape [" + std::to_string(c) + "]");
  }
  // Probability targets: F.cross_entropy(torch.zeros(2**31, 0), torch.zeros(2**31, 0)): nan.
  const Tensor p = zeros({int64_t{1} << 31, 0});
  EXPECT_TRUE(std::isnan(F::cross_entropy(p, p).item()));
  EXPECT_EQ(F::cross_entropy(p, p, F::CrossEntropyFuncOptions().reduction(nn::kSum)).item(), 0.0);
  // No classes and every target ignored: nan, 0 and zeros per position.
  const Tensor ignored = full({2}, int64_t{-100}, DType::Int64);
  EXPECT_TRUE(std::isnan(F::nll_loss(zeros({2, 0}), ignored).item()));
  EXPECT_EQ(
      F::cross_entropy(zeros({2, 0}), ignored, F::CrossEntropyFuncOptions().reduction(nn::kNone))
          .to_vector<double>(),
      (std::vector<double>{0, 0}));
  // A target that is not ignored is still out of bounds for no classes.
  expect_error([] { F::nll_loss(zeros({2, 0}), zeros({2}, DType::Int64)); }, "out of bounds");
}

// PyTorch's losses are not differentiable in their weights, and refuse one that requires grad
// (with grad mode on) rather than leave its .grad empty:
//   F.nll_loss(x, t, weight=w): "The function 'nll_loss_forward' is not differentiable with
//   respect to argument 'weight'. This input cannot have requires_grad True."
// cross_entropy with class probabilities is a composite there, differentiable in its weight.
TEST(Loss, WeightsThatRequireGradAreRefusedOrDifferentiatedAsInPyTorch) {
  Tensor x = test::pattern({3, 4}, 1).requires_grad_();
  Tensor y = softmax(test::pattern({3, 4}, 2), 1);
  Tensor w = ones({4}, x.dtype()).requires_grad_();
  Tensor t = from_vector({0, 1, 2}, {3}, DType::Int64);
  const std::string refused = "not differentiable with respect to argument 'weight' (shape [4])";
  expect_error([&] { F::nll_loss(x, t, F::NLLLossFuncOptions().weight(w)); },
               "nll_loss: " + refused);
  expect_error([&] { F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w)); },
               "cross_entropy: " + refused);
  expect_error(
      [&] { F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w).label_smoothing(0.1)); },
      "cross_entropy: " + refused);
  expect_error(
      [&] { F::binary_cross_entropy(sigmoid(x), y, F::BinaryCrossEntropyFuncOptions().weight(w)); },
      "binary_cross_entropy: " + refused);
  expect_error(
      [&] {
        F::binary_cross_entropy_with_logits(
            x, y, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(w));
      },
      "binary_cross_entropy_with_logits: not differentiable with respect to argument "
      "'pos_weight'");
  expect_error(
      [&] {
        F::binary_cross_entropy_with_logits(x, y,
                                            F::BinaryCrossEntropyWithLogitsFuncOptions().weight(w));
      },
      "binary_cross_entropy_with_logits: " + refused);
  // Under no_grad, or with the weight detached, they run.
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(std::isfinite(F::nll_loss(x, t, F::NLLLossFuncOptions().weight(w)).item()));
  }
  EXPECT_TRUE(std::isfinite(F::nll_loss(x, t, F::NLLLossFuncOptions().weight(w.detach())).item()));

  // Class probabilities: the weight's gradient, PyTorch 1.13's:
  //   torch.manual_seed(0); x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
  //   y = torch.softmax(torch.randn(2, 3, dtype=torch.float64), 1)
  //   w = torch.rand(3, dtype=torch.float64, requires_grad=True)
  //   F.cross_entropy(x, y, weight=w, label_smoothing=0.2, reduction=r).sum().backward()
  const Tensor xp = from_vector({1.5409961082440433, -0.2934289057609464, -2.1787893820745574,
                                 0.5684312772806678, -1.084522342424021, -1.3985953953708767},
                                {2, 3}, DType::Float64);
  const Tensor yp = from_vector({0.34844430791689035, 0.5381610676915901, 0.11339462439151957,
                                 0.2762496091314664, 0.22769636301556356, 0.4960540278529701},
                                {2, 3}, DType::Float64);
  const Tensor wp = from_vector({0.35526675833930643, 0.6219052486795277, 0.48184840078170854}, {3},
                                DType::Float64);
  const std::vector<double> mean_grad = {0.07032726760239408, 0.7392635459685193,
                                         0.8281973434963258};
  const std::vector<double> sum_grad = {0.14065453520478816, 1.4785270919370386,
                                        1.6563946869926516};
  for (nn::Reduction r : {nn::kMean, nn::kSum, nn::kNone}) {
    SCOPED_TRACE(static_cast<int>(r));
    Tensor wg = wp.detach().requires_grad_();
    F::cross_entropy(xp, yp,
                     F::CrossEntropyFuncOptions().weight(wg).label_smoothing(0.2).reduction(r))
        .sum()
        .backward();
    ASSERT_TRUE(wg.grad().defined());
    const std::vector<double> got = wg.grad().to_vector<double>();
    const std::vector<double>& want = r == nn::kMean ? mean_grad : sum_grad;
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 1e-12) << c;
  }
  // And its second derivatives, through the weight too.
  auto fn = [&](const std::vector<Tensor>& in) {
    return F::cross_entropy(in[0], softmax(in[1], 1),
                            F::CrossEntropyFuncOptions().weight(in[2]).label_smoothing(0.1));
  };
  const std::vector<Tensor> inputs = {xp.detach().requires_grad_(), yp.detach().requires_grad_(),
                                      wp.detach().requires_grad_()};
  EXPECT_TRUE(autograd::gradcheck(fn, inputs).ok);
  EXPECT_TRUE(autograd::gradgradcheck(fn, inputs).ok);
}

}  // namespace
}  // namespace ember
