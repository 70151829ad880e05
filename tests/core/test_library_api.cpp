// The libtorch-style API (core half): TensorOptions and the dtype constants,
// from_vector for float/double/int64, OrderedDict, sampling and selection with PyTorch's
// numbers (tests/fixtures/sampling.txt, from scripts/fixtures/gen_sampling.py), and the test
// helpers (assert_close with torch.testing's report, EXPECT_TENSOR_CLOSE, EXPECT_GRADCHECK).
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/testing.h"
#include "core/testing_gtest.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

// PyTorch's sampling results (scripts/fixtures/gen_sampling.py).
const test::Fixture& sampling() { return test::fixture_file("sampling.txt"); }

using test::error_of;
using ::testing::HasSubstr;

// ---- TensorOptions ----

TEST(TensorOptions, FactoriesTakeDtypeAndRequiresGrad) {
  Tensor r = rand({2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true));
  EXPECT_EQ(r.dtype(), DType::Float64);
  EXPECT_TRUE(r.requires_grad());
  EXPECT_TRUE(r.is_leaf());
  EXPECT_EQ(r.shape(), (Shape{2, 3}));

  Tensor z = zeros({4}, kInt64);  // a dtype alone still picks the DType overload
  EXPECT_EQ(z.dtype(), DType::Int64);
  EXPECT_FALSE(z.requires_grad());
  EXPECT_EQ(ones({2}, TensorOptions(kFloat64)).dtype(), DType::Float64);
  EXPECT_TRUE(full({2}, 3.0, TensorOptions().requires_grad(true)).requires_grad());
  EXPECT_EQ(empty({1}, TensorOptions().dtype(kBool)).dtype(), DType::Bool);
  EXPECT_TRUE(eye(3, TensorOptions().dtype(kDouble).requires_grad(true)).requires_grad());
  EXPECT_EQ(randn({3}, TensorOptions().dtype(kFloat)).dtype(), DType::Float32);
  EXPECT_EQ(kLong, DType::Int64);

  // The same draws as the DType overload.
  manual_seed(7);
  Tensor a = rand({5}, TensorOptions().dtype(kFloat64));
  manual_seed(7);
  Tensor b = rand({5}, DType::Float64);
  EXPECT_TRUE(equal(a, b));
}

TEST(TensorOptions, RequiresGradNeedsAFloatingDtype) {
  // torch.zeros(2, dtype=torch.long, requires_grad=True)
  EXPECT_THAT(error_of([] { (void)zeros({2}, TensorOptions().dtype(kInt64).requires_grad(true)); }),
              HasSubstr("zeros: only Tensors of floating point dtype can require gradients"));
}

TEST(FromVector, FloatDoubleAndInt64) {
  Tensor f = from_vector(std::vector<float>{0.1f, 2.5f}, {2});
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0.1f, 2.5f}));

  Tensor d = from_vector(std::vector<double>{0.1, 2.5}, {2, 1}, TensorOptions().dtype(kFloat64));
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0.1, 2.5}));
  EXPECT_EQ(from_vector(std::vector<double>{1, 2}, {2}).dtype(), DType::Float32);  // as before

  // int64 values are exact, even those a double cannot hold.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor i = from_vector(std::vector<int64_t>{big, std::numeric_limits<int64_t>::max(), -3}, {3});
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(i.to_vector<int64_t>(),
            (std::vector<int64_t>{big, std::numeric_limits<int64_t>::max(), -3}));
  EXPECT_EQ(from_vector(std::vector<int64_t>{1, 2}, {2}, kFloat64).to_vector<double>(),
            (std::vector<double>{1, 2}));
  EXPECT_TRUE(
      from_vector(std::vector<float>{1}, {1}, TensorOptions().requires_grad(true)).requires_grad());
  EXPECT_THAT(error_of([] {
                (void)from_vector(std::vector<int64_t>{1, 2, 3}, {2, 2});
              }),
              HasSubstr("3 values cannot fill shape [2, 2]"));
}

// ---- OrderedDict ----

TEST(OrderedDict, LooksUpByNameAndKeepsInsertionOrder) {
  OrderedDict<std::string, int> dict;
  dict.insert("b", 1);
  dict.insert("a", 2);
  dict.insert("c", 3);
  EXPECT_EQ(dict.size(), 3u);
  EXPECT_EQ(dict["a"], 2);
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(dict.values(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(dict[std::size_t{2}].key(), "c");
  EXPECT_EQ(dict[0].value(), 1);
  EXPECT_TRUE(dict.contains("c"));
  EXPECT_FALSE(dict.contains("d"));
  EXPECT_EQ(dict.find("d"), nullptr);
  ASSERT_NE(dict.find("b"), nullptr);
  *dict.find("b") = 10;
  std::vector<std::string> seen;
  for (const auto& [key, value] : dict) seen.push_back(key + "=" + std::to_string(value));
  EXPECT_EQ(seen, (std::vector<std::string>{"b=10", "a=2", "c=3"}));
  EXPECT_THAT(error_of([&] { (void)dict["zz"]; }), HasSubstr("Key 'zz' is not defined"));
  EXPECT_THAT(error_of([&] { dict.insert("a", 5); }), HasSubstr("Key 'a' already defined"));
  EXPECT_THAT(error_of([&] { (void)dict[std::size_t{3}]; }), HasSubstr("index 3 is out of range"));
  dict.insert_or_assign("a", 7);
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(dict["a"], 7);
}

// ---- sampling: PyTorch's numbers for the same seed ----

TEST(Sampling, RandintMatchesPyTorch) {
  manual_seed(1);
  EXPECT_TENSOR_CLOSE(randint(0, 10, {20}), sampling().tensor("randint_0_10"));
  EXPECT_TENSOR_CLOSE(randint(-5, 5, {3, 4}), sampling().tensor("randint_m5_5"));
  EXPECT_TENSOR_CLOSE(randint(7, {2, 5}), sampling().tensor("randint_high7"));
  EXPECT_TENSOR_CLOSE(randint(0, int64_t{1} << 40, {5}), sampling().tensor("randint_big"));
  EXPECT_TENSOR_CLOSE_TOL(randint(0, 100, {4}, kFloat32), sampling().tensor("randint_f32"), 0.0,
                          0.0);
  EXPECT_THAT(error_of([] { (void)randint(3, 3, {2}); }),
              HasSubstr("expects 'from' to be less than 'to'"));
}

// randint's sizes are checked as every factory's, in its own name: a count or byte count
// beyond int64 or memory, and a negative size, are ember::Errors.
TEST(Sampling, RandintSizesAreCheckedAsAFactorys) {
  EXPECT_THAT(error_of([] { (void)randint(0, 10, {int64_t{1} << 61}); }),
              HasSubstr("randint: Storage size calculation overflowed with "
                        "sizes=[2305843009213693952] and itemsize=8"));
  EXPECT_THAT(error_of([] { (void)randint(0, 10, {int64_t{1} << 40}); }),
              HasSubstr("randint: cannot allocate a tensor of shape [1099511627776]"));
  EXPECT_THAT(error_of([] {
                (void)randint(0, 10, {2, -1});
              }),
              HasSubstr("randint: Trying to create tensor with negative dimension -1"));
}

TEST(Sampling, MultinomialWithReplacementMatchesPyTorch) {
  manual_seed(2);
  Tensor p = rand({8});
  EXPECT_TENSOR_CLOSE(multinomial(p, 20, true), sampling().tensor("mult_repl_1d"));
  Tensor p2 = rand({3, 5});
  EXPECT_TENSOR_CLOSE(multinomial(p2, 10, true), sampling().tensor("mult_repl_2d"));
  Tensor p3 = rand({6}, kFloat64);
  EXPECT_TENSOR_CLOSE(multinomial(p3, 7, true), sampling().tensor("mult_repl_f64"));
  Tensor p4 = tensor({0.0, 3.0, 0.0, 1.0});
  Tensor draws = multinomial(p4, 12, true);
  EXPECT_TENSOR_CLOSE(draws, sampling().tensor("mult_repl_zeros"));
}

TEST(Sampling, MultinomialWithoutReplacementMatchesPyTorch) {
  manual_seed(3);
  Tensor p = rand({10});
  EXPECT_TENSOR_CLOSE(multinomial(p, 4), sampling().tensor("mult_norepl_1d"));
  Tensor p2 = rand({4, 6});
  Tensor all = multinomial(p2, 6);
  EXPECT_TENSOR_CLOSE(all, sampling().tensor("mult_norepl_2d_all"));
  EXPECT_TENSOR_CLOSE(multinomial(p, 1), sampling().tensor("mult_one"));
  EXPECT_TENSOR_CLOSE(multinomial(p2, 1, true), sampling().tensor("mult_one_repl"));
  Tensor p3 = rand({2, 7}, kFloat64);
  EXPECT_TENSOR_CLOSE(multinomial(p3, 3), sampling().tensor("mult_norepl_f64"));
  // Without replacement each row is a permutation when all categories are drawn.
  Tensor sorted_rows = sort(all, 1).values;
  EXPECT_TENSOR_CLOSE(sorted_rows, arange(6).unsqueeze(0).expand({4, 6}).contiguous());
}

TEST(Sampling, MultinomialRejectsWhatPyTorchRejects) {
  EXPECT_THAT(error_of([] {
                (void)multinomial(tensor({0.5, 0.5}), 3);
              }),
              HasSubstr("cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
  EXPECT_THAT(error_of([] {
                (void)multinomial(tensor({0.5, -0.1}), 1);
              }),
              HasSubstr("probability tensor contains either `inf`, `nan` or element < 0"));
  EXPECT_THAT(error_of([] {
                (void)multinomial(tensor({0.0, 0.0}), 2, true);
              }),
              HasSubstr("sum of probabilities <= 0"));
  EXPECT_THAT(error_of([] {
                (void)multinomial(tensor({0.0, 0.0}), 1);
              }),
              HasSubstr("sum of probabilities <= 0"));
  EXPECT_THAT(error_of([] { (void)multinomial(arange(3), 1); }),
              HasSubstr("multinomial only supports floating-point dtypes for input, got: int64"));
  EXPECT_THAT(error_of([] {
                (void)multinomial(ones({1, 1, 2}), 1);
              }),
              HasSubstr("prob_dist must be 1 or 2 dim"));
  EXPECT_THAT(error_of([] { (void)multinomial(ones({2}), 0, true); }),
              HasSubstr("cannot sample n_sample <= 0 samples"));
}

// ---- selection ----

TEST(Selection, SortArgsortTopkMatchPyTorch) {
  manual_seed(4);
  Tensor x = rand({4, 6});
  ValuesIndices s = sort(x);
  EXPECT_TENSOR_CLOSE_TOL(s.values, sampling().tensor("sort_values"), 0.0, 0.0);
  EXPECT_TENSOR_CLOSE(s.indices, sampling().tensor("sort_indices"));
  s = sort(x, 0, /*descending=*/true);
  EXPECT_TENSOR_CLOSE_TOL(s.values, sampling().tensor("sort_d0_desc_values"), 0.0, 0.0);
  EXPECT_TENSOR_CLOSE(s.indices, sampling().tensor("sort_d0_desc_indices"));
  EXPECT_TENSOR_CLOSE(argsort(x, -1, true), sampling().tensor("argsort_desc"));
  ValuesIndices k = topk(x, 3);
  EXPECT_TENSOR_CLOSE_TOL(k.values, sampling().tensor("topk3_values"), 0.0, 0.0);
  EXPECT_TENSOR_CLOSE(k.indices, sampling().tensor("topk3_indices"));
  k = topk(x, 2, 0, /*largest=*/false);
  EXPECT_TENSOR_CLOSE_TOL(k.values, sampling().tensor("topk2_d0_smallest_values"), 0.0, 0.0);
  EXPECT_TENSOR_CLOSE(k.indices, sampling().tensor("topk2_d0_smallest_indices"));
}

TEST(Selection, SortIsStableAndPutsNaNLast) {
  Tensor t = tensor({3.0, 1.0, 3.0, NAN, 1.0, 2.0, 3.0, 1.0});
  EXPECT_TENSOR_CLOSE(sort(t).indices, sampling().tensor("sort_ties_indices"));
  EXPECT_TENSOR_CLOSE(sort(t, -1, true).indices, sampling().tensor("sort_ties_desc_indices"));
  EXPECT_TRUE(std::isnan(sort(t).values.to_vector<double>().back()));
  // int64 keys are compared as integers (2^53 and 2^53 + 1 differ).
  const int64_t big = int64_t{1} << 53;
  Tensor ints = from_vector(std::vector<int64_t>{big + 1, big, -1}, {3});
  EXPECT_EQ(argsort(ints).to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
}

TEST(Selection, WhereAndNonzeroMatchPyTorch) {
  manual_seed(5);
  Tensor c = gt(rand({3, 4}), 0.5);
  std::vector<Tensor> idx = where(c);
  ASSERT_EQ(idx.size(), 2u);
  EXPECT_TENSOR_CLOSE(idx[0], sampling().tensor("where_rows"));
  EXPECT_TENSOR_CLOSE(idx[1], sampling().tensor("where_cols"));
  EXPECT_TENSOR_CLOSE(nonzero(c), sampling().tensor("nonzero"));
  EXPECT_EQ(nonzero(scalar_tensor(2.0)).shape(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(zeros({2, 0})).shape(), (Shape{0, 2}));
  // A 0-d condition: one index tensor, [0] when true and empty when false (PyTorch's).
  const std::vector<Tensor> yes = where(scalar_tensor(2.0)), no = where(scalar_tensor(0.0));
  ASSERT_EQ(yes.size(), 1u);
  ASSERT_EQ(no.size(), 1u);
  EXPECT_EQ(yes[0].dtype(), DType::Int64);
  EXPECT_EQ(yes[0].to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(no[0].shape(), (Shape{0}));
}

TEST(Selection, ErrorsNameTheOp) {
  EXPECT_THAT(error_of([] {
                (void)topk(ones({2, 3}), 4);
              }),
              HasSubstr("topk: selected index k out of range"));
  EXPECT_THAT(error_of([] {
                (void)sort(ones({2, 3}), 2);
              }),
              HasSubstr("sort: dimension out of range"));
  EXPECT_THAT(error_of([] { (void)sort(Tensor()); }), HasSubstr("sort: expected a defined tensor"));
}

TEST(Selection, SortAndTopkValuesAreDifferentiable) {
  manual_seed(6);
  Tensor x = rand({3, 5}, TensorOptions().dtype(kFloat64).requires_grad(true));
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return sort(in[0], 1, true).values; }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return topk(in[0], 2, 0).values; }, {x});
}

// ---- test helpers ----

std::string close_message(const Tensor& a, const Tensor& b, std::optional<double> rtol = {},
                          std::optional<double> atol = {}) {
  return error_of([&] { testing::assert_close(a, b, rtol, atol); });
}

TEST(AssertClose, ReportsLikeTorchTesting) {
  // torch.testing.assert_close(torch.tensor([1., 2.5, 3.]), torch.tensor([1., 2., 3.]))
  EXPECT_EQ(close_message(tensor({1.0, 2.5, 3.0}), tensor({1.0, 2.0, 3.0})),
            "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
            "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
            "Greatest relative difference: 0.25 at index (1,) (up to 1.3e-06 allowed)");
  EXPECT_EQ(close_message(tensor({{1.0, 2.0}, {3.0, 4.1}}, kFloat64),
                          tensor({{1.0, 2.0}, {3.5, 4.0}}, kFloat64)),
            "Tensor-likes are not close!\n\nMismatched elements: 2 / 4 (50.0%)\n"
            "Greatest absolute difference: 0.5 at index (1, 0) (up to 1e-07 allowed)\n"
            "Greatest relative difference: 0.14285714285714285 at index (1, 0) (up to 1e-07 "
            "allowed)");
  EXPECT_EQ(close_message(from_vector(std::vector<int64_t>{1, 5, 3}, {3}),
                          from_vector(std::vector<int64_t>{1, 2, 3}, {3})),
            "Tensor-likes are not equal!\n\nMismatched elements: 1 / 3 (33.3%)\n"
            "Greatest absolute difference: 3 at index (1,)\n"
            "Greatest relative difference: 1.5 at index (1,)");
  EXPECT_EQ(close_message(tensor({1.0, 2.0}), tensor({1.0, 2.0, 3.0})),
            "The values for attribute 'shape' do not match: torch.Size([2]) != torch.Size([3]).");
  EXPECT_EQ(close_message(tensor({1.0, 2.0}), tensor({1.0, 2.0}, kFloat64)),
            "The values for attribute 'dtype' do not match: torch.float32 != torch.float64.");
  EXPECT_EQ(close_message(tensor({1.0, 2.1}), tensor({1.0, 2.0}), 0.01, 0.0),
            "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
            "Greatest absolute difference: 0.09999990463256836 at index (1,) (up to 0.0 "
            "allowed)\n"
            "Greatest relative difference: 0.04999995231628418 at index (1,) (up to 0.01 "
            "allowed)");
  EXPECT_EQ(close_message(tensor({1.0, NAN}), tensor({1.0, NAN})),
            "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
            "Greatest absolute difference: nan at index (1,) (up to 1e-05 allowed)\n"
            "Greatest relative difference: nan at index (1,) (up to 1.3e-06 allowed)");
  EXPECT_EQ(close_message(tensor({0.0, 1.0}), tensor({0.0, 0.0})),
            "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
            "Greatest absolute difference: 1.0 at index (1,) (up to 1e-05 allowed)\n"
            "Greatest relative difference: inf at index (1,) (up to 1.3e-06 allowed)");
}

TEST(AssertClose, PassesWithinTheDefaultsAndAsksForBothTolerances) {
  EXPECT_EQ(close_message(tensor({1.0, 2.0}), tensor({1.000001, 2.0})), "");
  EXPECT_EQ(close_message(tensor({1.0, 2.0}, kFloat64), tensor({1.00000001, 2.0}, kFloat64)), "");
  EXPECT_NE(close_message(tensor({1.0, 2.0}, kFloat64), tensor({1.000001, 2.0}, kFloat64)), "");
  EXPECT_EQ(close_message(tensor({INFINITY}), tensor({INFINITY})), "");
  EXPECT_EQ(error_of([] { testing::assert_close(tensor({NAN}), tensor({NAN}), {}, {}, true); }),
            "");
  EXPECT_THAT(close_message(tensor({1.0}), tensor({1.0}), 0.1),
              HasSubstr("both 'rtol' and 'atol' must be either specified or omitted"));
}

TEST(GTestMacros, FailuresShowTheReport) {
  EXPECT_TENSOR_CLOSE(tensor({1.0, 2.0}), tensor({1.0, 2.0}));
  EXPECT_NONFATAL_FAILURE(EXPECT_TENSOR_CLOSE(tensor({1.0, 2.5}), tensor({1.0, 2.0})),
                          "Greatest absolute difference: 0.5 at index (1,)");
  EXPECT_NONFATAL_FAILURE(EXPECT_TENSOR_CLOSE_TOL(tensor({1.0, 2.5}), tensor({1.0, 2.0}), 0.1, 0.1),
                          "Mismatched elements: 1 / 2 (50.0%)");
}

// A backward that is wrong by a factor 2: y = x^2 with dy/dx = 4x.
struct WrongSquare : autograd::OpFunction<WrongSquare> {
  static constexpr const char* name = "WrongSquareBackward";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return x * x;
  }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad * saved(0) * 4.0}; }
};

TEST(GTestMacros, GradcheckPassesAndItsFailureShowsTheWorstElement) {
  Tensor x = tensor({0.5, -1.5, 2.0}, kFloat64).requires_grad_();
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return (in[0] * in[0]).sum(); }, {x});
  EXPECT_NONFATAL_FAILURE(
      EXPECT_GRADCHECK(
          [](const std::vector<Tensor>& in) { return autograd::apply<WrongSquare>(in[0]); }, {x}),
      "gradcheck(");
}

// core/ember.h is everything of core: the nn ops and the fused attention too, which the API
// table of core/ops/README.md lists (this file includes nothing else of core's ops).
TEST(EmberHeader, DeclaresTheNnOpsAndTheFusedAttention) {
  // torch.nn.functional.linear(x, w, b) with x = [[1, 2]], w = [[1, 0], [0, 1], [1, 1]],
  // b = [0.5, 0, -1]: [[1.5, 2, 2]], grad_fn AddmmBackward0
  Tensor x = tensor({{1.0, 2.0}}).requires_grad_();
  Tensor y = linear(x, tensor({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}}), tensor({0.5, 0.0, -1.0}));
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>({1.5f, 2.0f, 2.0f}));
  EXPECT_EQ(y.grad_fn()->name(), "AddmmBackward0");
  // One head of dim 1, two tokens: row 0 sees key 0 only (v[0] = 4); row 1's scores [0, ln 3]
  // weigh v as [1/4, 3/4]: 4 / 4 + 8 * 3 / 4 = 7.
  Tensor q = tensor({0.0, 1.0}, kFloat64).view({1, 1, 2, 1});
  Tensor k = tensor({0.0, std::log(3.0)}, kFloat64).view({1, 1, 2, 1});
  Tensor v = tensor({4.0, 8.0}, kFloat64).view({1, 1, 2, 1});
  const std::vector<double> out = causal_attention(q, k, v).to_vector<double>();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_DOUBLE_EQ(out[0], 4.0);
  EXPECT_NEAR(out[1], 7.0, 1e-12);
}

}  // namespace
}  // namespace ember
