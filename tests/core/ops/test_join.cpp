// Shape ops that join and pick: cat, stack, index_select, gather, unsafe_view, split, chunk.
//
// Oracle values come from /usr/bin/python3 (torch 1.13) with this helper, which pattern()
// reproduces exactly:
//   P = lambda *shape, seed=0: torch.tensor([((i * 7 + seed * 13) % 17) / 8 - 1
//           for i in range(math.prod(shape))], dtype=torch.float64).reshape(shape)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/graph/node.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::book_inputs;
using test::error_of;
using test::kHugeDim;
using test::pattern;

// Joins only move values: they must come back to within 1e-12.
void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& expected) {
  test::expect_tensor(t, shape, expected, 1e-12);
}

Tensor index_tensor(const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape, DType::Int64);
}

// ---------------------------------------------------------------------------------------------
// cat

TEST(JoinCat, ValuesGradFnAndGradientSlices) {
  // x1 = P(2,3, seed=1); x2 = P(2,1, seed=2) (both requires_grad); c = torch.cat([x1, x2], -1)
  // c.backward(P(2,4, seed=3)); print(c, x1.grad, x2.grad)
  Tensor x1 = pattern({2, 3}, 1).requires_grad_();
  Tensor x2 = pattern({2, 1}, 2).requires_grad_();
  Tensor c = cat({x1, x2}, -1);
  EXPECT_EQ(c.grad_fn()->name(), "CatBackward0");
  expect_values(c, {2, 4}, {0.625, -0.625, 0.25, 0.125, -1.0, -0.125, 0.75, 1.0});
  c.backward(pattern({2, 4}, 3));
  expect_values(x1.grad(), {2, 3}, {-0.375, 0.5, -0.75, 1.0, -0.25, 0.625});
  expect_values(x2.grad(), {2, 1}, {0.125, -0.625});
}

TEST(JoinCat, BookHeadsConcatenatedOnTheLastDim) {
  // MultiHeadAttentionWrapper: torch.cat([head(x) for head in heads], dim=-1) on [2, 6, 2]s.
  Tensor head0 = pattern({2, 6, 2}, 1, DType::Float32);
  Tensor head1 = pattern({2, 6, 2}, 2, DType::Float32);
  Tensor both = cat({head0, head1}, -1);
  ASSERT_EQ(both.shape(), (Shape{2, 6, 4}));
  EXPECT_TRUE(equal(both.slice(2, 0, 2), head0));
  EXPECT_TRUE(equal(both.slice(2, 2, 4), head1));
  EXPECT_EQ(both.dtype(), DType::Float32);
}

TEST(JoinCat, DimZeroNonContiguousAndOnlySomeInputsRequireGrad) {
  Tensor a = pattern({3, 2}, 1).t();  // [2, 3], transposed storage
  Tensor b = pattern({1, 3}, 2).requires_grad_();
  Tensor c = cat({a, b});
  ASSERT_EQ(c.shape(), (Shape{3, 3}));
  EXPECT_TRUE(equal(c.slice(0, 0, 2), a));
  EXPECT_TRUE(equal(c.slice(0, 2, 3), b));
  c.backward(ones({3, 3}, DType::Float64));
  expect_values(b.grad(), {1, 3}, {1, 1, 1});
}

TEST(JoinCat, PromotesDtypesAndSkipsLegacyEmptyVectors) {
  // torch.cat([torch.ones(2,3, dtype=torch.float64), torch.ones(1,3)]).dtype == torch.float64
  EXPECT_EQ(cat({ones({2, 3}, DType::Float64), ones({1, 3})}).dtype(), DType::Float64);
  // torch.cat([torch.empty(0), torch.ones(2,3)]).shape == [2, 3]; the empty one gets grad []
  Tensor empty_vector = zeros({0}).requires_grad_();
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor c = cat({empty_vector, x}, 1);
  ASSERT_EQ(c.shape(), (Shape{2, 3}));
  sum(c).backward();
  EXPECT_EQ(empty_vector.grad().shape(), (Shape{0}));
  expect_values(x.grad(), {2, 3}, std::vector<double>(6, 1.0));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).shape(), (Shape{0}));
}

TEST(JoinCat, Errors) {
  EXPECT_EQ(error_of([] {
              cat({ones({2, 3}), ones({2, 4})});
            }),
            "cat: shapes [2, 3] and [2, 4] must match except in dimension 0 (tensor 1 differs in "
            "dimension 1)");
  EXPECT_EQ(error_of([] {
              cat({ones({2, 3}), ones({3})});
            }),
            "cat: tensors must have the same number of dimensions, got shapes [2, 3] and [3] "
            "(tensor 1)");
  EXPECT_EQ(error_of([] { cat({scalar_tensor(1.0)}); }),
            "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  EXPECT_EQ(error_of([] { cat({}); }), "cat: expected a non-empty list of tensors");
  EXPECT_EQ(error_of([] {
              cat({ones({2, 3})}, 2);
            }),
            "cat: dimension out of range (expected to be in range of [-2, 1], but got 2)");
}

// ---------------------------------------------------------------------------------------------
// stack

TEST(JoinStack, BookBatchOfTwoInputs) {
  // batch = torch.stack((inputs, inputs), dim=0); batch.shape == [2, 6, 3]
  Tensor inputs = book_inputs();
  Tensor batch = stack({inputs, inputs});
  ASSERT_EQ(batch.shape(), (Shape{2, 6, 3}));
  EXPECT_TRUE(equal(batch[0], inputs));
  EXPECT_TRUE(equal(batch[1], inputs));
  EXPECT_EQ(batch.grad_fn(), nullptr);
}

TEST(JoinStack, InnerDimGradFnAndGradients) {
  // x1 = P(2,3, seed=1); x2 = P(2,3, seed=2); c = torch.stack([x1, x2], 1)
  // c.backward(P(2,2,3, seed=3)); print(c, x1.grad, x2.grad)
  Tensor x1 = pattern({2, 3}, 1).requires_grad_();
  Tensor x2 = pattern({2, 3}, 2).requires_grad_();
  Tensor c = stack({x1, x2}, 1);
  EXPECT_EQ(c.grad_fn()->name(), "StackBackward0");
  expect_values(c, {2, 2, 3},
                {0.625, -0.625, 0.25, 0.125, 1.0, -0.25, -1.0, -0.125, 0.75, 0.625, -0.625, 0.25});
  c.backward(pattern({2, 2, 3}, 3));
  expect_values(x1.grad(), {2, 3}, {-0.375, 0.5, -0.75, 0.625, -0.625, 0.25});
  expect_values(x2.grad(), {2, 3}, {0.125, 1.0, -0.25, -1.0, -0.125, 0.75});
  // dim = -1 appends the new dim: torch.stack([x1, x2], -1).shape == [2, 3, 2]
  Tensor last = stack({x1, x2}, -1);
  ASSERT_EQ(last.shape(), (Shape{2, 3, 2}));
  EXPECT_TRUE(equal(last.select(2, 1), x2));
}

TEST(JoinStack, Errors) {
  EXPECT_EQ(error_of([] {
              stack({ones({2, 3}), ones({2, 4})});
            }),
            "stack: expects each tensor to be equal size, got [2, 3] at entry 0 and [2, 4] at "
            "entry 1");
  EXPECT_EQ(error_of([] { stack({}); }), "stack: expected a non-empty list of tensors");
}

// ---------------------------------------------------------------------------------------------
// index_select

TEST(JoinIndexSelect, RowsLikeAnEmbeddingLookup) {
  Tensor weight = book_inputs().requires_grad_();
  Tensor rows = weight.detach();
  Tensor picked = index_select(weight, 0, index_tensor({5, 0, 5}, {3}));
  EXPECT_EQ(picked.grad_fn()->name(), "IndexSelectBackward0");
  ASSERT_EQ(picked.shape(), (Shape{3, 3}));
  EXPECT_TRUE(equal(picked[0], rows[5]));
  EXPECT_TRUE(equal(picked[1], rows[0]));
  EXPECT_TRUE(equal(picked[2], rows[5]));
  // Row 5 was picked twice: its gradient is the sum of both.
  picked.backward(ones({3, 3}));
  expect_values(weight.grad(), {6, 3}, {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2});
}

TEST(JoinIndexSelect, InnerDimRepeatedIndicesAccumulate) {
  // t = P(2,4, seed=1); y = t.index_select(1, torch.tensor([3, 1, 3]))
  // y.backward(P(2,3, seed=3)); print(y, t.grad)
  Tensor t = pattern({2, 4}, 1).requires_grad_();
  Tensor y = index_select(t, 1, index_tensor({3, 1, 3}, {3}));
  expect_values(y, {2, 3}, {-1.0, -0.625, -1.0, 0.375, 0.75, 0.375});
  y.backward(pattern({2, 3}, 3));
  expect_values(t.grad(), {2, 4}, {0.0, 0.5, 0.0, -1.125, 0.0, 1.0, 0.0, -0.125});
}

// index_select of a 0-d tensor is one node, as PyTorch's: its grad_fn is IndexSelectBackward0
// with the leaf's AccumulateGrad next (x = torch.tensor(5., dtype=torch.float64,
// requires_grad=True); x.index_select(0, torch.tensor([0])).grad_fn.next_functions ->
// ((AccumulateGrad, 0),), the same for the index torch.tensor(0)), and gradcheck and
// gradgradcheck pass for a 1-d and a 0-d index (True, True in PyTorch 1.13).
TEST(JoinIndexSelect, ZeroDimTensorIsOneIndexSelectNode) {
  Tensor x = scalar_tensor(5.0, DType::Float64).requires_grad_();
  for (const Tensor& index : {index_tensor({0}, {1}), scalar_tensor(0, DType::Int64)}) {
    SCOPED_TRACE(index.dim());
    Tensor y = index_select(x, 0, index);
    ASSERT_TRUE(y.grad_fn());
    EXPECT_EQ(y.grad_fn()->name(), "IndexSelectBackward0");
    ASSERT_EQ(y.grad_fn()->next_functions.size(), 2u);
    ASSERT_TRUE(y.grad_fn()->next_functions[0]);
    EXPECT_EQ(y.grad_fn()->next_functions[0]->name(), "AccumulateGrad");
    const auto fn = [&](const std::vector<Tensor>& in) { return index_select(in[0], -1, index); };
    const autograd::GradcheckResult first = autograd::gradcheck(fn, {x});
    EXPECT_TRUE(first.ok) << first.report;
    const autograd::GradcheckResult second = autograd::gradgradcheck(fn, {x});
    EXPECT_TRUE(second.ok) << second.report;
  }
}

// A 0-d tensor takes dim 0 or -1 and an index of one element, 0, as PyTorch's; the result is 0-d
// and its gradient flows back.
TEST(JoinIndexSelect, ZeroDimTensorTakesIndexZero) {
  // x = torch.tensor(5., requires_grad=True); y = x.index_select(0, torch.tensor([0]))
  // -> tensor(5.); (y * 3).backward(); x.grad -> tensor(3.)
  Tensor x = scalar_tensor(5.0).requires_grad_();
  Tensor y = index_select(x, 0, index_tensor({0}, {1}));
  EXPECT_EQ(y.dim(), 0);
  EXPECT_EQ(y.item<float>(), 5.0f);
  (y * 3.0).backward();
  EXPECT_EQ(x.grad().item<float>(), 3.0f);
  // x.index_select(-1, torch.tensor(0)) -> tensor(5.)
  EXPECT_EQ(index_select(x, -1, scalar_tensor(0, DType::Int64)).item<float>(), 5.0f);
  // x.index_select(0, torch.tensor([1])) -> index out of range in self
  test::expect_error([&] { (void)index_select(x, 0, index_tensor({1}, {1})); },
                     "index_select: index 1 is out of bounds");
  // x.index_select(1, torch.tensor([0])) -> Dimension out of range
  test::expect_error([&] { (void)index_select(x, 1, index_tensor({0}, {1})); },
                     "index_select: dimension out of range");
  // PyTorch reads past the element for [0, 0] or an empty index: an Error here.
  test::expect_error(
      [&] {
        (void)index_select(x, 0, index_tensor({0, 0}, {2}));
      },
      "index_select: a 0-d tensor takes an index of one element, got 2");
}

TEST(JoinIndexSelect, NonContiguousInputAndScalarIndex) {
  Tensor t = pattern({4, 3}, 2).t();                     // [3, 4], transposed storage
  Tensor y = index_select(t, 1, index_tensor({2}, {}));  // a 0-d index picks one column
  ASSERT_EQ(y.shape(), (Shape{3, 1}));
  EXPECT_TRUE(equal(y, t.slice(1, 2, 3)));
}

TEST(JoinIndexSelect, Errors) {
  Tensor t = ones({4, 3});
  EXPECT_EQ(error_of([&] {
              index_select(t, 0, index_tensor({1, 5}, {2}));
            }),
            "index_select: index 5 is out of bounds for dimension 0 with size 4");
  EXPECT_EQ(error_of([&] { index_select(t, 1, index_tensor({-1}, {1})); }),
            "index_select: index -1 is out of bounds for dimension 1 with size 3");
  EXPECT_EQ(error_of([&] { index_select(t, 0, ones({2})); }),
            "index_select: expected an int64 index tensor, got float32");
  EXPECT_EQ(error_of([&] {
              index_select(t, 0, index_tensor({0, 0, 0, 0}, {2, 2}));
            }),
            "index_select: index must be a 1-D tensor, got shape [2, 2]");
}

// ---------------------------------------------------------------------------------------------
// gather

TEST(JoinGather, AlongRowsAndColumnsWithScatterAddBackward) {
  // t = torch.arange(6.).reshape(2, 3); torch.gather(t, 1, torch.tensor([[2, 0], [1, 1]]))
  // -> [[2., 0.], [4., 4.]]
  Tensor t = arange(0, 6, 1, DType::Float64).reshape({2, 3}).requires_grad_();
  Tensor y = gather(t, 1, index_tensor({2, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(y.grad_fn()->name(), "GatherBackward0");
  expect_values(y, {2, 2}, {2, 0, 4, 4});
  y.backward(ones({2, 2}, DType::Float64));  // column 1 of row 1 was picked twice
  expect_values(t.grad(), {2, 3}, {1, 0, 1, 0, 2, 0});

  // t = P(3,4, seed=1); g = torch.gather(t, 0, torch.tensor([[2,0,1,2],[0,0,2,1]]))
  // g.backward(P(2,4, seed=3)); print(g, t.grad)
  Tensor u = pattern({3, 4}, 1).requires_grad_();
  Tensor g = gather(u, 0, index_tensor({2, 0, 1, 2, 0, 0, 2, 1}, {2, 4}));
  expect_values(g, {2, 4}, {-0.875, -0.625, -0.5, -0.375, 0.625, -0.625, 0.875, 0.375});
  g.backward(pattern({2, 4}, 3));
  expect_values(u.grad(), {3, 4},
                {1.0, 0.25, 0.0, 0.0, 0.0, 0.0, -0.75, -0.625, -0.375, 0.0, 0.625, 0.125});
}

TEST(JoinGather, NonContiguousInputAndSmallerIndex) {
  Tensor t = pattern({3, 2}, 4).t();  // [2, 3], transposed storage
  // An index smaller than the input in the other dim reads only the first row.
  Tensor y = gather(t, 1, index_tensor({2, 2, 0}, {1, 3}));
  expect_values(y, {1, 3}, {t.at({0, 2}), t.at({0, 2}), t.at({0, 0})});
}

TEST(JoinGather, Errors) {
  Tensor t = ones({2, 3});
  EXPECT_EQ(error_of([&] {
              gather(t, 1, index_tensor({3}, {1, 1}));
            }),
            "gather: index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_EQ(error_of([&] {
              gather(t, 1, index_tensor({0, 1, 1}, {3, 1}));
            }),
            "gather: index [3, 1] must not be larger than input [2, 3] apart from dimension 1");
  EXPECT_EQ(error_of([&] { gather(t, 1, index_tensor({0}, {1})); }),
            "gather: index [1] must have the same number of dimensions as input [2, 3]");
}

// ---------------------------------------------------------------------------------------------
// unsafe_view

TEST(JoinUnsafeView, SharesStorageButIsNotAView) {
  Tensor x = pattern({2, 6}, 1).requires_grad_();
  Tensor doubled = x * 2.0;
  Tensor y = unsafe_view(doubled, {3, -1});
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.grad_fn()->name(), "UnsafeViewBackward0");
  EXPECT_EQ(y.storage(), doubled.storage());
  EXPECT_FALSE(y.impl()->is_view);
  EXPECT_TRUE(equal(y.reshape({2, 6}), doubled));
  // In place on it is allowed (as on matmul's result in PyTorch), and backward reshapes.
  y.masked_fill_(zeros({3, 4}).to_bool(), 0.0);
  y.backward(pattern({3, 4}, 3));
  EXPECT_TRUE(equal(x.grad(), mul(pattern({2, 6}, 3), 2.0)));
}

TEST(JoinUnsafeView, CopiesANonContiguousInput) {
  Tensor x = pattern({3, 4}, 2).t();  // [4, 3]
  Tensor y = unsafe_view(x, {12});
  EXPECT_TRUE(equal(y, x.contiguous().reshape({12})));
  EXPECT_EQ(error_of([&] { unsafe_view(x, {5}); }),
            "unsafe_view: shape [5] is invalid for input of size 12");
}

// ---------------------------------------------------------------------------------------------
// split and chunk

std::vector<Shape> shapes_of(const std::vector<Tensor>& pieces) {
  std::vector<Shape> shapes;
  for (const Tensor& p : pieces) shapes.push_back(p.shape());
  return shapes;
}

TEST(JoinSplit, SplitAndChunkSizesAsPyTorch) {
  Tensor five = arange(5);
  // torch.arange(5).split(2) -> sizes 2, 2, 1; .chunk(3) -> 2, 2, 1
  EXPECT_EQ(shapes_of(five.split(2)), (std::vector<Shape>{{2}, {2}, {1}}));
  EXPECT_EQ(shapes_of(five.chunk(3)), (std::vector<Shape>{{2}, {2}, {1}}));
  // torch.arange(6).chunk(4) -> only 3 chunks of 2
  EXPECT_EQ(shapes_of(arange(6).chunk(4)), (std::vector<Shape>{{2}, {2}, {2}}));
  // torch.empty(0).split(2) -> one empty piece; torch.empty(0).chunk(3) -> three
  EXPECT_EQ(shapes_of(zeros({0}).split(2)), (std::vector<Shape>{{0}}));
  EXPECT_EQ(shapes_of(zeros({0}).chunk(3)), (std::vector<Shape>{{0}, {0}, {0}}));
  std::vector<Tensor> pieces = five.split(2);
  EXPECT_EQ(pieces[2].to_vector<int64_t>(), (std::vector<int64_t>{4}));
}

TEST(JoinSplit, PiecesAreViewsAndGradientsFlowBack) {
  // Splitting a fused q/k/v projection along the last dim.
  Tensor qkv = pattern({2, 6}, 1).requires_grad_();
  std::vector<Tensor> parts = qkv.chunk(3, -1);
  ASSERT_EQ(parts.size(), 3u);
  for (const Tensor& p : parts) {
    EXPECT_EQ(p.shape(), (Shape{2, 2}));
    EXPECT_EQ(p.storage(), qkv.storage());
  }
  EXPECT_EQ(parts[1].at({1, 0}), qkv.at({1, 2}));
  Tensor loss = sum(parts[0]) + sum(mul(parts[2], 3.0));
  loss.backward();
  expect_values(qkv.grad(), {2, 6}, {1, 1, 0, 0, 3, 3, 1, 1, 0, 0, 3, 3});
}

// All the pieces of a split share one SplitBackward0 (as in PyTorch), which makes x's gradient
// once: its backward is linear in the number of pieces, not a full-size gradient per piece.
TEST(JoinSplit, ManyPiecesShareOneBackwardNode) {
  const int64_t n = 2000;
  Tensor x = arange(n, DType::Float64).requires_grad_();
  std::vector<Tensor> pieces = x.split(1);
  ASSERT_EQ(pieces.size(), static_cast<std::size_t>(n));
  const autograd::Node* split = pieces[0].grad_fn()->next_functions[0].get();
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->name(), "SplitBackward0");
  EXPECT_EQ(split->next_functions[0], autograd::gradient_edge(x));
  for (const Tensor& piece : pieces) {
    ASSERT_EQ(piece.grad_fn()->name(), "SplitBackward0");
    ASSERT_EQ(piece.grad_fn()->next_functions[0].get(), split);
    ASSERT_TRUE(piece.storage() == x.storage());
  }
  // Every third piece gets no gradient: its slice of x.grad is 0; piece k gets k + 1.
  Tensor loss = zeros({}, DType::Float64);
  for (int64_t k = 0; k < n; ++k) {
    if (k % 3 != 2) loss = loss + pieces[k] * static_cast<double>(k + 1);
  }
  loss.sum().backward();
  std::vector<double> expected(n);
  for (int64_t k = 0; k < n; ++k) expected[k] = k % 3 != 2 ? static_cast<double>(k + 1) : 0.0;
  EXPECT_EQ(x.grad().to_vector<double>(), expected);
}

// The same bits as narrowing each piece out (SliceBackward0 per piece), in any dim, with uneven
// pieces and a piece without gradient; and a second backward through the same graph.
TEST(JoinSplit, SplitGradientsAreTheNarrowGradientsBitForBit) {
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE(dim);
    Tensor a = pattern({5, 7}, 3).requires_grad_(), b = pattern({5, 7}, 3).requires_grad_();
    std::vector<Tensor> split = a.split(3, dim);
    const int64_t size = a.size(dim);
    Tensor loss_a = zeros({}, DType::Float64), loss_b = zeros({}, DType::Float64);
    for (std::size_t k = 0; k + 1 < split.size(); ++k) {  // the last piece gets no gradient
      const int64_t start = static_cast<int64_t>(k) * 3;
      Tensor narrowed = b.narrow(dim, start, std::min<int64_t>(3, size - start));
      Tensor weight = pattern(split[k].shape(), static_cast<int>(k) + 5);
      loss_a = loss_a + sum(mul(exp(split[k]), weight));
      loss_b = loss_b + sum(mul(exp(narrowed), weight));
    }
    loss_a.backward({}, /*retain_graph=*/true);
    loss_b.backward();
    EXPECT_EQ(test::values(a.grad()), test::values(b.grad()));
    loss_a.backward();  // the pieces' gradients of the first pass are gone: 2x, not 3x
    EXPECT_EQ(test::values(a.grad()), test::values(b.grad() * 2.0));
  }
}

TEST(JoinSplit, Errors) {
  EXPECT_EQ(error_of([] { arange(5).split(0); }),
            "split: split_size can only be 0 if dimension size is 0, but got dimension size of 5");
  EXPECT_EQ(error_of([] { arange(5).chunk(0); }),
            "chunk: number of chunks must be greater than 0, got 0");
}

TEST(JoinSplit, SplittingIntoMorePiecesThanMemoryCanListIsAnError) {
  test::expect_error(
      [] {
        zeros({0, kHugeDim}).split(2, 1);
      },
      "split: cannot hold 2305843009213693952 pieces of a tensor of shape [0, "
      "4611686018427387904] (their views would take more than the ");
  test::expect_error([] { zeros({0}).chunk(kHugeDim, 0); }, "chunk: cannot hold");
  EXPECT_EQ(zeros({0}).chunk(3, 0).size(), 3u);  // PyTorch: 3 empty pieces
  // Counts a vector could reserve but whose views would not fit in memory (fuzz_ops: chunk of an
  // empty dim into 2^32 pieces asked for 64 GB and aborted under ASan; in release, with
  // overcommit, it would go on making views until memory ran out).
  test::expect_error([] { zeros({0}).chunk(int64_t{1} << 32, 0); },
                     "chunk: cannot hold 4294967296 pieces of a tensor of shape [0]");
  test::expect_error(
      [] {
        zeros({0, int64_t{1} << 40}).split(1, 1);
      },
      "split: cannot hold 1099511627776 pieces");
}

}  // namespace
}  // namespace ember
