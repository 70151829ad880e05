// Reductions: sum, mean, max/min, var, argmax; values, shapes, dtypes, gradients and errors; NaN
// as PyTorch propagates it; the overloads that compile and what they mean.
//
// Expected numbers are worked out by hand or printed by PyTorch 1.13 (the Python line that
// printed them is in the comment above each).
#include "core/ops/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/graph/node.h"
#include "core/kernels/cascade_sum.h"
#include "core/ops/elementwise.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

using test::expect_error;
using test::expect_values;
using test::grad_fn_name;
using test::sample_3x4;

// PyTorch's tensors for the NaN and var/std overload tests (scripts/fixtures/gen_adversarial.py).
const test::Fixture& adv() { return test::fixture_file("adversarial.txt"); }

// A dim list (var(t, {1}) is per-dim too, as torch.var(t, 1)).
using Dims = std::vector<int64_t>;

// torch.arange(24.).reshape(2, 3, 4)
Tensor arange_2x3x4() { return arange(0, 24, 1, DType::Float32).reshape({2, 3, 4}); }

// ---- sum ----

TEST(ReduceSum, AllElements) {
  Tensor s = tensor({{1, 2, 3}, {4, 5, 6}}).sum();
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::Float32);
  EXPECT_EQ(s.item(), 21.0);
}

TEST(ReduceSum, OneDimWithAndWithoutKeepdim) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor rows = x.sum(1);
  EXPECT_EQ(rows.shape(), (Shape{2}));
  expect_values(rows, {6, 15});
  Tensor columns = x.sum(0, /*keepdim=*/true);
  EXPECT_EQ(columns.shape(), (Shape{1, 3}));
  expect_values(columns, {5, 7, 9});
  expect_values(x.sum(-1), {6, 15});
}

TEST(ReduceSum, SeveralDims) {
  Tensor x = arange_2x3x4();
  // torch.arange(24.).reshape(2, 3, 4).sum([0, 2])  ->  tensor([ 60.,  92., 124.])
  Tensor s = sum(x, {0, 2});
  EXPECT_EQ(s.shape(), (Shape{3}));
  expect_values(s, {60, 92, 124});
  // x.sum([2, 0], keepdim=True).shape  ->  torch.Size([1, 3, 1])
  Tensor kept = sum(x, {2, 0}, /*keepdim=*/true);
  EXPECT_EQ(kept.shape(), (Shape{1, 3, 1}));
  expect_values(kept, {60, 92, 124});
  // x.sum(1)  ->  tensor([[12., 15., 18., 21.], [48., 51., 54., 57.]])
  expect_values(x.sum(1), {12, 15, 18, 21, 48, 51, 54, 57});
  expect_values(sum(x, {-1, -2}), {66, 210});
  // Reduced dims around a dim of size 1 are still one block; a kept size-1 dim stays.
  Tensor y = arange(0, 6, 1, DType::Float32).reshape({2, 1, 3});
  Tensor around = sum(y, {0, 2});
  EXPECT_EQ(around.shape(), (Shape{1}));
  expect_values(around, {15});
  expect_values(sum(y, {0, 1}), {3, 5, 7});
  expect_values(sum(y, {1}), {0, 1, 2, 3, 4, 5});
}

TEST(ReduceSum, NonContiguousInput) {
  // x.transpose(0, 2).sum(1)  ->  [[12., 48.], [15., 51.], [18., 54.], [21., 57.]]
  Tensor s = arange_2x3x4().transpose(0, 2).sum(1);
  EXPECT_EQ(s.shape(), (Shape{4, 2}));
  expect_values(s, {12, 48, 15, 51, 18, 54, 21, 57});
  // A transposed matrix summed over its rows reads the original's columns in order.
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  expect_values(m.t().sum(0), {6, 15});
  expect_values(m.t().sum(1), {5, 7, 9});
  expect_values(m.t().sum(), {21});
  // A broadcast (stride 0) input: each of the 4 copies of a row.
  expect_values(tensor({1, 2, 3}).expand({4, 3}).sum(0), {4, 8, 12});
}

TEST(ReduceLayout, StridedInputsGiveWhatTheirContiguousCopiesGive) {
  // Permuted, transposed, sliced and broadcast views go through other kernel layouts (read in
  // memory order, or permuted and copied); the results must not tell.
  Tensor base = arange(0, 120, 1, DType::Float32).reshape({2, 3, 4, 5});
  const std::vector<Tensor> views = {base.permute({2, 0, 3, 1}), base.transpose(1, 3),
                                     base.slice(3, 1, 4), tensor({1, 2, 3}).expand({2, 4, 3}),
                                     base.reshape({6, 4, 5}).transpose(0, 2)};
  const std::vector<std::vector<int64_t>> dim_lists = {{0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const Tensor& view : views) {
    Tensor copy = view.contiguous();
    for (const auto& dims : dim_lists) {
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE("view " + shape_str(view.shape()) + ", dims " + shape_str(dims) +
                     (keepdim ? ", keepdim" : ""));
        Tensor s = sum(view, dims, keepdim);
        EXPECT_TRUE(s.is_contiguous());
        EXPECT_TRUE(equal(s, sum(copy, dims, keepdim)));
        EXPECT_TRUE(equal(mean(view, dims, keepdim), mean(copy, dims, keepdim)));
        EXPECT_TRUE(allclose(var(view, dims, Correction(1), keepdim),
                             var(copy, dims, Correction(1), keepdim)));
        ValuesIndices m = max(view, dims[0], keepdim), expected = max(copy, dims[0], keepdim);
        EXPECT_TRUE(m.values.is_contiguous());
        EXPECT_TRUE(equal(m.values, expected.values));
        EXPECT_TRUE(equal(m.indices, expected.indices));
        EXPECT_TRUE(
            equal(min(view, dims[0], keepdim).indices, min(copy, dims[0], keepdim).indices));
        EXPECT_TRUE(equal(argmax(view, dims[0], keepdim), argmax(copy, dims[0], keepdim)));
      }
    }
    EXPECT_TRUE(equal(view.sum(), copy.sum()));
    EXPECT_TRUE(equal(argmax(view), argmax(copy)));
  }
}

TEST(ReduceSum, IntegerAndBoolSumToInt64) {
  Tensor ints = arange(6);
  Tensor total = ints.sum();
  EXPECT_EQ(total.dtype(), DType::Int64);
  EXPECT_EQ(total.item(), 15.0);
  // torch.tensor([[True, False], [True, True]]).sum(0)  ->  tensor([2, 1])
  Tensor flags = tensor({{1, 0}, {1, 1}}, DType::Bool);
  Tensor counts = flags.sum(0);
  EXPECT_EQ(counts.dtype(), DType::Int64);
  expect_values(counts, {2, 1});
  EXPECT_EQ(flags.sum().item(), 3.0);
}

TEST(ReduceSum, EmptyDimListReducesEverything) {
  // PyTorch 1.13: x.sum(dim=[]) -> tensor(15., grad_fn=<SumBackward1>)
  Tensor x = arange(0, 6, 1, DType::Float32).reshape({2, 3}).requires_grad_();
  Tensor s = sum(x, {});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 15.0);
  EXPECT_EQ(grad_fn_name(s), "SumBackward1");
  EXPECT_EQ(sum(x, {}, /*keepdim=*/true).shape(), (Shape{1, 1}));
}

TEST(ReduceSum, EmptyTensorsSumToZero) {
  EXPECT_EQ(zeros({0}).sum().item(), 0.0);
  Tensor s = zeros({0, 3}).sum(0);
  EXPECT_EQ(s.shape(), (Shape{3}));
  expect_values(s, {0, 0, 0});
  EXPECT_EQ(zeros({0, 3}).sum(1).shape(), (Shape{0}));
}

TEST(ReduceSum, ZeroDimTensor) {
  // torch.tensor(3.).sum(0)  ->  tensor(3.)
  Tensor x = scalar_tensor(3.0);
  EXPECT_EQ(x.sum(0).shape(), Shape{});
  EXPECT_EQ(x.sum(0).item(), 3.0);
  EXPECT_EQ(x.sum(-1, /*keepdim=*/true).item(), 3.0);
  EXPECT_EQ(x.sum().item(), 3.0);
}

// The one-row entry the fused kernels use gives cascade_sum's bits for a {1, n} row, for every
// length around the vector width and the cascade's chunk sizes.
TEST(ReduceSum, CascadeRowSumIsCascadeSumOfOneRow) {
  ember::manual_seed(3);
  for (int64_t n : {0,  1,  2,   3,   4,   5,   7,   8,   9,   15,  16,  17,   24,   31,   32,  33,
                    64, 65, 100, 128, 255, 256, 257, 511, 512, 513, 768, 1000, 2047, 2048, 4099}) {
    // Values of many magnitudes (another order of additions would round differently), and -0s.
    ember::Tensor x = ember::randn({n}) * ember::exp(ember::randn({n}) * 4.0);
    if (n % 3 == 0) x = ember::full({n}, -0.0);
    const float* xf = x.data_ptr<float>();
    float expected = 0;
    ember::kernels::cascade_sum(xf, ember::Shape{1, n}, ember::Shape{n, 1}, &expected,
                                ember::Shape{1, 0});
    EXPECT_EQ(std::bit_cast<uint32_t>(ember::kernels::cascade_row_sum(xf, n)),
              std::bit_cast<uint32_t>(expected))
        << "n = " << n;
    ember::Tensor xd = x.to(ember::DType::Float64) * 1.1;
    double expected_d = 0;
    ember::kernels::cascade_sum(xd.data_ptr<double>(), ember::Shape{1, n}, ember::Shape{n, 1},
                                &expected_d, ember::Shape{1, 0});
    EXPECT_EQ(std::bit_cast<uint64_t>(ember::kernels::cascade_row_sum(xd.data_ptr<double>(), n)),
              std::bit_cast<uint64_t>(expected_d))
        << "n = " << n;
  }
}

// A sum down the rows of a wide matrix (a bias's gradient: [768, 512] summed over dim 0) adds
// the rows a whole row at a time (multi_column_sum); each column must keep the chain of additions
// multi_row_sum gives it, 32 columns at a time (PyTorch's order), for row counts around the
// cascade's levels and widths around its blocks. Values of many magnitudes, so that another
// order of additions would round differently.
template <typename T>
void expect_column_sums_keep_the_strip_order() {
  using Vec = kernels::cascade::Lanes<T, kernels::cascade::kLanes<T>>;
  constexpr int64_t L = kernels::cascade::kLanes<T>;
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> exponent(-4, 4);
  for (int64_t rows : {1, 2, 15, 16, 17, 255, 256, 257, 768, 4097, 70001}) {
    for (int64_t cols : {4 * L, 8 * L, 4 * L + 3, 64 * L, 68 * L + L + 1, 132 * L}) {
      if (rows * cols > 4000000) continue;
      std::vector<T> x(rows * cols);
      for (T& v : x) v = static_cast<T>(normal(rng) * std::pow(10.0, exponent(rng)));
      std::vector<T> out(cols, T(0));
      kernels::cascade_sum(x.data(), Shape{rows, cols}, Shape{cols, 1}, out.data(), Shape{0, 1});
      for (int64_t j = 0; j + 4 * L <= cols; j += 4 * L) {
        auto sums = kernels::cascade::multi_row_sum<Vec, 4>(x.data() + j, cols, L, rows);
        for (int r = 0; r < 4; ++r)
          for (int64_t k = 0; k < L; ++k)
            ASSERT_EQ(out[j + r * L + k], T(0) + sums[r].v[k])
                << rows << " x " << cols << ", column " << j + r * L + k;
      }
    }
  }
}

TEST(ReduceSum, ColumnSumsKeepTheStripOrder) {
  expect_column_sums_keep_the_strip_order<float>();
  expect_column_sums_keep_the_strip_order<double>();
}

TEST(ReduceSum, Float32SumIsAccurate) {
  // A million float32 0.1s: a naive float accumulator drifts by about 1%.
  Tensor x = full({1000000}, 0.1);
  const double exact = 1000000 * static_cast<double>(0.1f);
  EXPECT_NEAR(x.sum().item(), exact, exact * 1e-6);
  EXPECT_NEAR(x.reshape({1000, 1000}).sum(0).sum().item(), exact, exact * 1e-6);
}

TEST(ReduceSum, GradFnNames) {
  Tensor x = ones({2, 3}).requires_grad_();
  EXPECT_EQ(grad_fn_name(x.sum()), "SumBackward0");
  EXPECT_EQ(grad_fn_name(x.sum(1)), "SumBackward1");
  EXPECT_EQ(grad_fn_name(sum(x, {0, 1})), "SumBackward1");
}

TEST(ReduceSum, BackwardBroadcastsTheGradient) {
  Tensor x = ones({2, 3}).requires_grad_();
  x.sum().backward();
  EXPECT_EQ(x.grad().shape(), (Shape{2, 3}));
  expect_values(x.grad(), {1, 1, 1, 1, 1, 1});

  Tensor y = ones({2, 3}).requires_grad_();
  y.sum(1).backward(tensor({2, 3}));  // each row gets its output's gradient
  expect_values(y.grad(), {2, 2, 2, 3, 3, 3});

  Tensor z = ones({2, 3, 4}).requires_grad_();
  sum(z, {0, 2}, /*keepdim=*/true).backward(tensor({{{1}, {2}, {3}}}));
  EXPECT_EQ(z.grad().shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(z.grad().at({1, 2, 3}), 3.0);
  EXPECT_EQ(z.grad().at({0, 1, 0}), 2.0);
}

TEST(ReduceSum, EngineSumsBroadcastGradientsWithIt) {
  // (a + b).sum() with b broadcast over a's rows: b's gradient is summed over them.
  Tensor a = ones({4, 3}).requires_grad_();
  Tensor b = tensor({1, 2, 3}).requires_grad_();
  (a + b).sum().backward();
  expect_values(b.grad(), {4, 4, 4});
  expect_values(a.grad(), std::vector<double>(12, 1.0));
}

TEST(ReduceSum, Errors) {
  Tensor x = ones({2, 3});
  expect_error([&] { x.sum(2); },
               "sum: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  expect_error([&] { sum(x, {0, -2}); }, "sum: dim 0 appears multiple times in the list of dims");
  expect_error([&] { sum(x, {1, 1}); }, "input shape [2, 3]");
  expect_error([&] { scalar_tensor(3.0).sum(1); },
               "sum: dimension out of range (expected to be in range of [-1, 0], but got 1)");
  expect_error([&] { sum(scalar_tensor(3.0), {0, 0}); }, "appears multiple times");
}

// ---- mean ----

TEST(ReduceMean, Values) {
  Tensor x = arange_2x3x4();
  EXPECT_EQ(x.mean().item(), 11.5);
  // x.mean([0, 2])  ->  tensor([ 7.5000, 11.5000, 15.5000])
  expect_values(mean(x, {0, 2}), {7.5, 11.5, 15.5});
  Tensor kept = x.mean(-1, /*keepdim=*/true);
  EXPECT_EQ(kept.shape(), (Shape{2, 3, 1}));
  expect_values(kept, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  EXPECT_EQ(mean(x.to(DType::Float64), {1}).dtype(), DType::Float64);
}

TEST(ReduceMean, EmptyGivesNan) {
  // torch.empty(0).mean() -> tensor(nan); torch.empty(0, 3).mean(0) -> tensor([nan, nan, nan])
  EXPECT_TRUE(std::isnan(zeros({0}).mean().item()));
  expect_values(zeros({0, 3}).mean(0), {kNan, kNan, kNan});
}

TEST(ReduceMean, NonFloatIsAnError) {
  expect_error([] { arange(6).mean(); },
               "mean(): could not infer output dtype. Input dtype must be either a floating point "
               "or complex dtype. Got: int64");
  expect_error([] { ones({2}, DType::Bool).mean(0); }, "Got: bool (input shape [2])");
  expect_error([] { ones({2, 3}).mean(3); }, "mean: dimension out of range");
}

TEST(ReduceMean, Backward) {
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor m = x.mean();
  EXPECT_EQ(grad_fn_name(m), "MeanBackward0");
  m.backward();
  expect_values(x.grad(), std::vector<double>(6, 1.0 / 6));

  Tensor y = ones({2, 3}).requires_grad_();
  Tensor rows = y.mean(1);
  EXPECT_EQ(grad_fn_name(rows), "MeanBackward1");
  rows.backward(tensor({3, 6}));  // 3/3 and 6/3
  expect_values(y.grad(), {1, 1, 1, 2, 2, 2});
}

// ---- max and min ----

TEST(ReduceMax, AllElements) {
  Tensor a = sample_3x4();
  Tensor m = max(a);
  EXPECT_EQ(m.shape(), Shape{});
  EXPECT_NEAR(m.item(), 2.5, 1e-7);
  EXPECT_NEAR(min(a).item(), -2.0, 1e-7);
  EXPECT_EQ(max(arange(6)).item(), 5.0);
  EXPECT_EQ(max(arange(6)).dtype(), DType::Int64);
  // torch.tensor([[True, False], [True, True]]).min()  ->  tensor(False)
  EXPECT_EQ(min(tensor({{1, 0}, {1, 1}}, DType::Bool)).item(), 0.0);
  EXPECT_TRUE(std::isnan(max(tensor({1.0, kNan, 3.0})).item()));
  EXPECT_EQ(max(tensor({-kInf, -kInf})).item(), -kInf);
}

TEST(ReduceMax, AlongADim) {
  // a.max(1)  ->  values=tensor([2.5000, 2.5000, 1.3000]), indices=tensor([2, 3, 3])
  Tensor a = sample_3x4();
  ValuesIndices by_row = max(a, 1);
  EXPECT_EQ(by_row.values.shape(), (Shape{3}));
  EXPECT_EQ(by_row.indices.dtype(), DType::Int64);
  expect_values(by_row.values, {2.5, 2.5, 1.3});
  expect_values(by_row.indices, {2, 3, 3});
  // a.min(0)  ->  values=tensor([-2.0000, -1.2000, -0.6000, 0.7000]), indices=tensor([2, 0, 1, 0])
  ValuesIndices by_column = min(a, 0);
  expect_values(by_column.values, {-2.0, -1.2, -0.6, 0.7});
  expect_values(by_column.indices, {2, 0, 1, 0});
  // a.t().max(1)  ->  values=tensor([1.1000, 0.9000, 2.5000, 2.5000]), indices=tensor([1, 2, 0, 1])
  ValuesIndices transposed = max(a.t(), 1);
  expect_values(transposed.values, {1.1, 0.9, 2.5, 2.5});
  expect_values(transposed.indices, {1, 2, 0, 1});
  ValuesIndices kept = max(a, -1, /*keepdim=*/true);
  EXPECT_EQ(kept.values.shape(), (Shape{3, 1}));
  EXPECT_EQ(kept.indices.shape(), (Shape{3, 1}));
}

TEST(ReduceMax, TiesGiveTheFirstIndexAndNanWins) {
  expect_values(max(tensor({{1, 3, 3}, {2, 2, 2}}), 1).indices, {1, 0});
  expect_values(min(tensor({{1, 3, 1}}), 1).indices, {0});
  // torch.tensor([float('nan'), 1., float('nan')]).min(0) -> values=tensor(nan), indices=tensor(0)
  ValuesIndices with_nan = min(tensor({kNan, 1.0, kNan}), 0);
  EXPECT_TRUE(std::isnan(with_nan.values.item()));
  EXPECT_EQ(with_nan.indices.item(), 0.0);
  EXPECT_EQ(max(tensor({1.0, kNan, kNan}), 0).indices.item(), 1.0);
}

TEST(ReduceMax, ZeroDimTensor) {
  // torch.tensor(3.).max(0, keepdim=True) -> values=tensor(3.), indices=tensor(0)
  ValuesIndices r = max(scalar_tensor(3.0), 0, /*keepdim=*/true);
  EXPECT_EQ(r.values.shape(), Shape{});
  EXPECT_EQ(r.values.item(), 3.0);
  EXPECT_EQ(r.indices.item(), 0.0);
}

TEST(ReduceMax, AllBackwardSharesTiesEvenly) {
  // x = torch.tensor([1., 2., 2.]); torch.max(x).backward() -> x.grad = [0.0000, 0.5000, 0.5000]
  Tensor x = tensor({1, 2, 2}).requires_grad_();
  Tensor m = max(x);
  EXPECT_EQ(grad_fn_name(m), "MaxBackward1");
  m.backward();
  expect_values(x.grad(), {0, 0.5, 0.5});
  // The same with nan as the max: the nan elements share it.
  Tensor y = tensor({1.0, kNan, kNan}).requires_grad_();
  max(y).backward();
  expect_values(y.grad(), {0, 0.5, 0.5});
  Tensor z = tensor({{4, 1}, {1, 3}}).requires_grad_();
  Tensor low = min(z);
  EXPECT_EQ(grad_fn_name(low), "MinBackward1");
  (low * 6.0).backward();
  expect_values(z.grad(), {0, 3, 3, 0});
}

TEST(ReduceMax, DimBackwardGoesToTheIndex) {
  // x = torch.tensor([1., 2., 2.]); torch.max(x, 0)[0].backward() -> x.grad = [0., 1., 0.]
  Tensor x = tensor({1, 2, 2}).requires_grad_();
  Tensor v = max(x, 0).values;
  EXPECT_EQ(grad_fn_name(v), "MaxBackward0");
  v.backward();
  expect_values(x.grad(), {0, 1, 0});

  Tensor a = sample_3x4().requires_grad_();
  max(a, 1).values.backward(tensor({1, 2, 3}));
  expect_values(a.grad(), {0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 3});

  Tensor b = sample_3x4().requires_grad_();
  ValuesIndices low = min(b, 0, /*keepdim=*/true);
  EXPECT_EQ(grad_fn_name(low.values), "MinBackward0");
  EXPECT_FALSE(low.indices.requires_grad());
  low.values.backward(tensor({{1, 2, 3, 4}}));
  expect_values(b.grad(), {0, 2, 0, 4, 0, 0, 3, 0, 1, 0, 0, 0});
}

TEST(ReduceMax, EmptyErrors) {
  expect_error([] { max(zeros({0})); },
               "max(): Expected reduction dim to be specified for input.numel() == 0.");
  expect_error([] { min(zeros({2, 0})); }, "min(): Expected reduction dim");
  expect_error(
      [] {
        max(zeros({0, 3}), 0);
      },
      "max(): Expected reduction dim 0 to have non-zero size. (input shape [0, 3])");
  // Reducing a non-empty dim of an empty tensor is fine: torch.empty(0, 3).max(1) -> empty.
  ValuesIndices r = max(zeros({0, 3}), 1);
  EXPECT_EQ(r.values.shape(), (Shape{0}));
  EXPECT_EQ(r.indices.shape(), (Shape{0}));
  expect_error([] { max(ones({2, 3}), 3); }, "max: dimension out of range");
}

TEST(ReduceMax, ReductionsWithNanMatchPyTorch) {
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

// ---- var ----

TEST(ReduceVar, Values) {
  Tensor a = sample_3x4();
  // a.var()  ->  tensor(1.78992426)
  Tensor all = var(a);
  EXPECT_EQ(all.shape(), Shape{});
  EXPECT_NEAR(all.item(), 1.78992426, 1e-6);
  // a.var(1)  ->  tensor([2.31583333, 1.69666672, 2.16666651])
  expect_values(var(a, Dims{1}), {2.31583333, 1.69666672, 2.16666651});
  // torch.var(a, 0, correction=0)  ->  tensor([1.72666669, 0.80222225, 1.72666669, 0.56000000])
  expect_values(var(a, Dims{0}, Correction(0)), {1.72666669, 0.80222225, 1.72666669, 0.56});
  // torch.var(a, [0, 1], keepdim=True)  ->  tensor([[1.78992426]])
  Tensor kept = var(a, Dims{0, 1}, Correction(1), /*keepdim=*/true);
  EXPECT_EQ(kept.shape(), (Shape{1, 1}));
  expect_values(kept, {1.78992426});
  expect_values(var(a.t(), Dims{1}), {1.72666669 * 1.5, 0.80222225 * 1.5, 1.72666669 * 1.5, 0.84});
}

TEST(ReduceVar, TwoPassIsAccurateForALargeMean) {
  // float32 values near 10^4 with a spread of 0.1: E[x^2] - E[x]^2 would lose every digit.
  // torch.tensor([10000.1, 10000.2, 10000.3, 10000.4]).double().var() -> 0.016731897989908855
  Tensor b = tensor({10000.1, 10000.2, 10000.3, 10000.4});
  EXPECT_NEAR(var(b).item(), 0.016731897989908855, 0.016731897989908855 * 1e-6);
  EXPECT_NEAR(var(b.reshape({2, 2}), Dims{0, 1}).item(), 0.016731897989908855, 1e-8);
}

TEST(ReduceVar, EdgeCases) {
  // torch.tensor([1.]).var() -> tensor(nan); torch.empty(0).var() -> tensor(nan)
  EXPECT_TRUE(std::isnan(var(tensor({1.0})).item()));
  EXPECT_TRUE(std::isnan(var(zeros({0})).item()));
  // torch.var(torch.tensor([1., 2.]), None, correction=3) -> tensor(inf) (divisor max(0, n - 3))
  EXPECT_EQ(var(tensor({1, 2}), Correction(3)).item(), kInf);
  // torch.tensor(3.).var(0) -> tensor(nan)
  EXPECT_TRUE(std::isnan(var(scalar_tensor(3.0), Dims{0}).item()));
  expect_error([] { var(arange(6)); },
               "var: std and var only support floating point and complex dtypes (got int64");
  expect_error([] { var(ones({2, 3}), Dims{0, 0}); }, "var: dim 0 appears multiple times");
}

TEST(ReduceVar, Backward) {
  // x = a.clone().requires_grad_(); torch.var(x, 1).backward(torch.tensor([1., 2., 3.]))
  Tensor x = sample_3x4().requires_grad_();
  Tensor v = var(x, Dims{1});
  EXPECT_EQ(grad_fn_name(v), "VarBackward0");
  v.backward(tensor({1, 2, 3}));
  expect_values(x.grad(), {-0.18333332, -1.18333340, 1.28333330, 0.08333334,  //
                           0.33333334, -0.60000002, -1.93333340, 2.20000005,  //
                           -4.19999981, 1.60000002, 0.20000005, 2.39999986});
  // torch.var(x).backward()
  Tensor y = sample_3x4().requires_grad_();
  Tensor w = var(y);
  EXPECT_EQ(grad_fn_name(w), "VarBackward0");
  w.backward();
  expect_values(y.grad(), {-0.03787879, -0.31060606, 0.36212122, 0.03484849,  //
                           0.10757577, -0.01969697, -0.20151515, 0.36212122,  //
                           -0.45606059, 0.07121212, -0.05606061, 0.14393939});
  // torch.var(x, 0, correction=2) on [1., 2., 2.]: 2 (x - 5/3) / 1 -> [-1.3333, 0.6667, 0.6667]
  Tensor z = tensor({1, 2, 2}).requires_grad_();
  var(z, Dims{0}, Correction(2)).backward();
  expect_values(z.grad(), {-4.0 / 3, 2.0 / 3, 2.0 / 3});
}

// ---- overloads: what compiles, and what it means ----

// An integer or a braced list must not bind to the wrong parameter: var(x, {1}) and var(x, 1) are
// per-dim as torch.var(x, 1); a flag takes a bool only and a dim an integer only (core/base/args.h),
// so the calls that would silently mean something else do not compile. Each static_assert states
// whether a call compiles; the tests below say what the calls that compile mean.
// var / std
static_assert(EMBER_COMPILES(var(x)));
static_assert(EMBER_COMPILES(var(x, 1)));                   // dim 1
static_assert(EMBER_COMPILES(var(x, {1})));                 // dim 1 as well
static_assert(EMBER_COMPILES(var(x, {0, 2})));              // dims
static_assert(EMBER_COMPILES(var(x, true)));                // unbiased
static_assert(EMBER_COMPILES(var(x, 1, false, true)));      // dim, unbiased, keepdim
static_assert(EMBER_COMPILES(var(x, {1}, Correction(0))));  // an explicit correction
static_assert(EMBER_COMPILES(var(x, Correction(2))));
static_assert(!EMBER_COMPILES(var(x, 1.5)));           // a dim is an integer
static_assert(!EMBER_COMPILES(var(x, {1}, 2)));        // 2 is not a flag...
static_assert(!EMBER_COMPILES(var(x, {1}, 0, true)));  // ...nor is 0
static_assert(!EMBER_COMPILES(var(x, 1, 1)));
static_assert(!EMBER_COMPILES(var(x, {1}, {0})));  // correction must be named
static_assert(EMBER_COMPILES(std(x, 1)));
static_assert(EMBER_COMPILES(std(x, {0, 1}, false, true)));
static_assert(!EMBER_COMPILES(std(x, {1}, 2)));
static_assert(!EMBER_COMPILES(std(x, 0.5)));
static_assert(EMBER_COMPILES(x.var(1)));
static_assert(EMBER_COMPILES(x.var(-1, false, true)));
static_assert(!EMBER_COMPILES(x.var(1, 0)));
static_assert(!EMBER_COMPILES(x.std(true)));  // a flag where the dim goes
static_assert(!EMBER_COMPILES(x.std(1.0)));

// sum / mean / max / min / argmax: keepdim is a bool, the dim an integer.
static_assert(EMBER_COMPILES(x.sum(0, true)));
static_assert(!EMBER_COMPILES(x.sum(0, 1)));  // torch: TypeError (not keepdim=True)
static_assert(!EMBER_COMPILES(x.sum(true)));  // would be dim 1
static_assert(!EMBER_COMPILES(x.mean(0.5)));
static_assert(!EMBER_COMPILES(x.argmax(0, 1)));
static_assert(EMBER_COMPILES(sum(x, {0, 1}, true)));
static_assert(!EMBER_COMPILES(sum(x, {0}, 1)));
static_assert(!EMBER_COMPILES(mean(x, {0}, 0)));
static_assert(EMBER_COMPILES(max(x, 1, true)));
static_assert(!EMBER_COMPILES(max(x, true)));  // would be dim 1
static_assert(!EMBER_COMPILES(min(x, 0, 1)));
static_assert(!EMBER_COMPILES(argmax(x, false)));
static_assert(!EMBER_COMPILES(argmax(x, 1.0)));

// sort / argsort / topk: the dim an integer, descending / largest / sorted a bool (torch.sort(x,
// True): TypeError); softmax, log_softmax, cat, stack, index_select and gather take an integer
// dim only (torch.softmax(x, True): TypeError), not a bool that would be dim 1.
static_assert(EMBER_COMPILES(sort(x, 0, true)));
static_assert(!EMBER_COMPILES(sort(x, true)));  // would be dim 1, ascending
static_assert(!EMBER_COMPILES(sort(x, 0, 1)));
static_assert(EMBER_COMPILES(argsort(x, -1, true)));
static_assert(!EMBER_COMPILES(argsort(x, true)));
static_assert(EMBER_COMPILES(topk(x, 2, 0, false)));
static_assert(!EMBER_COMPILES(topk(x, 2, false)));  // would be dim 0, largest
static_assert(!EMBER_COMPILES(topk(x, true)));
static_assert(!EMBER_COMPILES(topk(x, 2, 0, 0)));
static_assert(EMBER_COMPILES(softmax(x, -1)));
static_assert(!EMBER_COMPILES(softmax(x, true)));
static_assert(!EMBER_COMPILES(log_softmax(x, false)));
static_assert(!EMBER_COMPILES(x.softmax(true)));
static_assert(!EMBER_COMPILES(cat({x, x}, true)));
static_assert(!EMBER_COMPILES(stack({x, x}, true)));
static_assert(!EMBER_COMPILES(index_select(x, true, x)));
static_assert(!EMBER_COMPILES(gather(x, false, x)));

TEST(ReduceVar, VarOfABracedDimIsPerDimLikeTorchVar) {
  // torch.var(x, 1): per-dim, unbiased.
  Tensor x = adv().tensor("var/in/x");
  adv().expect_exact(var(x, 1), "var/var_dim1/out");
  adv().expect_exact(var(x, {1}), "var/var_dim1/out");
  adv().expect_exact(var(x, std::vector<int64_t>{1}), "var/var_dim1/out");
  adv().expect_exact(x.var(1), "var/var_dim1/out");
  adv().expect_exact(var(x, {0, 2}, false, true), "var/var_dims02_biased_keep/out");
  adv().expect_exact(var(x, false), "var/var_all_biased/out");
  adv().expect_exact(var(x, {1}, Correction(2)), "var/var_correction2/out");
}

TEST(ReduceVar, StdOverloads) {
  Tensor x = adv().tensor("var/in/x");
  adv().expect_exact(std(x), "var/std_all/out");
  adv().expect_exact(std(x, 1), "var/std_dim1/out");
  adv().expect_exact(x.std(1), "var/std_dim1/out");
  adv().expect_exact(x.std(-1, true, true), "var/std_dim_neg1_keep/out");
  adv().expect_exact(std(x, {0, 2}, false), "var/std_dims02_biased/out");
}

// ---- argmax ----

// std's gradient where std is 0 is 0, as PyTorch 1.13's std_backward (grad / (2 std) masked to 0
// where std == 0), not (x - mean) / 0 = nan; a single element under correction 1 stays nan.
TEST(ReduceVar, StdGradientOfAConstantRowIsZero) {
  // x = torch.tensor([[1., 1], [1, 3]], dtype=torch.float64, requires_grad=True)
  // x.std(1).sum().backward() -> [[0., 0.], [-0.7071067811865475, 0.7071067811865475]]
  Tensor x = tensor({{1.0, 1.0}, {1.0, 3.0}}, DType::Float64).requires_grad_();
  x.std(1).sum().backward();
  const std::vector<double> gx = x.grad().to_vector<double>();
  EXPECT_EQ(gx[0], 0.0);
  EXPECT_EQ(gx[1], 0.0);
  EXPECT_NEAR(gx[2], -0.7071067811865475, 1e-15);
  EXPECT_NEAR(gx[3], 0.7071067811865475, 1e-15);
  // torch.tensor([2., 2, 2], dtype=torch.float64).std(unbiased=False) -> grad [0., 0., 0.]
  Tensor y = tensor({2.0, 2.0, 2.0}, DType::Float64).requires_grad_();
  ember::std(y, false).backward();
  EXPECT_EQ(y.grad().to_vector<double>(), std::vector<double>(3, 0.0));
  // torch.std(torch.tensor([5.], dtype=torch.float64), dim=0) -> grad [nan]
  Tensor z = tensor({5.0}, DType::Float64).requires_grad_();
  ember::std(z, 0).backward();
  EXPECT_TRUE(std::isnan(z.grad().item()));
}

TEST(ReduceArgmax, Values) {
  Tensor a = sample_3x4();
  // a.argmax() -> tensor(2); a.argmax(0) -> tensor([1, 2, 0, 1])
  Tensor flat = argmax(a);
  EXPECT_EQ(flat.shape(), Shape{});
  EXPECT_EQ(flat.dtype(), DType::Int64);
  EXPECT_EQ(flat.item(), 2.0);
  expect_values(argmax(a, 0), {1, 2, 0, 1});
  // a.argmax(1, keepdim=True) -> tensor([[2], [3], [3]])
  Tensor kept = a.argmax(1, /*keepdim=*/true);
  EXPECT_EQ(kept.shape(), (Shape{3, 1}));
  expect_values(kept, {2, 3, 3});
  // Flattened in row-major order of the logical shape, whatever the strides.
  EXPECT_EQ(argmax(a.t()).item(), 6.0);
  // torch.tensor([[1., 3.], [3., 1.]]).argmax() -> tensor(1) (the first of the ties)
  EXPECT_EQ(argmax(tensor({{1, 3}, {3, 1}})).item(), 1.0);
  EXPECT_EQ(argmax(tensor({kNan, 1.0, kNan})).item(), 0.0);
  EXPECT_EQ(argmax(arange(5)).item(), 4.0);
  EXPECT_EQ(argmax(scalar_tensor(3.0)).item(), 0.0);
}

TEST(ReduceArgmax, IsNotDifferentiable) {
  Tensor x = sample_3x4().requires_grad_();
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_FALSE(x.argmax(1).requires_grad());
}

TEST(ReduceArgmax, Errors) {
  expect_error([] { argmax(zeros({0})); },
               "argmax(): Expected reduction dim to be specified for input.numel() == 0.");
  expect_error(
      [] {
        argmax(zeros({0, 3}), 0);
      },
      "argmax(): Expected reduction dim 0 to have non-zero size.");
  EXPECT_EQ(argmax(zeros({0, 3}), 1).shape(), (Shape{0}));
  expect_error([] { argmax(ones({2}, DType::Bool)); }, "argmax: not implemented for bool");
  expect_error(
      [] {
        ones({2, 3}).argmax(-3);
      },
      "argmax: dimension out of range (expected to be in range of [-2, 1], but got -3)");
}

}  // namespace
}  // namespace ember
