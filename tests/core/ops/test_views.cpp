// Views: new shapes and strides over the same storage. Every view here must share storage with
// its base (a write through the view shows in the base), accept negative dims, carry PyTorch's
// grad_fn name, and send gradients back to the base's shape. Sizes and steps that would overflow
// are errors before any arithmetic overflows, and a 0-d tensor has no dim to view.
//
// Expected values come from PyTorch 1.13 (/usr/bin/python3 -c 'import torch; ...').
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "core/base/error.h"
#include "core/base/grad_mode.h"
#include "core/graph/node.h"
#include "core/ops/elementwise.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::error_of;
using test::expect_error;
using test::expect_tensor;
using test::kHugeDim;
using test::kInt64Max;
using test::values;

// torch.arange(24.).reshape(2, 3, 4)
Tensor cube() { return arange(24, DType::Float32).reshape({2, 3, 4}); }

// The gradient x receives when `f(x)` is backpropagated with `upstream` as its gradient.
template <typename F>
Tensor grad_through(const Tensor& input, F&& f, const Tensor& upstream) {
  Tensor x = input.detach().clone().requires_grad_();
  Tensor y = f(x);
  y.backward(upstream);
  return x.grad();
}

// ---- view / reshape ----

TEST(ViewReshape, ViewSharesStorageAndInfersMinusOne) {
  Tensor x = cube();
  Tensor v = x.view({6, -1});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.storage(), x.storage());
  v.set({5, 3}, -1);
  EXPECT_EQ(x.at({1, 2, 3}), -1);
  EXPECT_EQ(x.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(x.view({2, -1, 2}).shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(x.view({1, 24, 1}).shape(), (Shape{1, 24, 1}));
  // 0-d <-> one element
  EXPECT_EQ(tensor(3.0).view({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(tensor({3.0}).view({}).dim(), 0);
}

TEST(ViewReshape, ViewOfATransposeThrowsLikePyTorchWhileReshapeCopies) {
  Tensor x = cube();
  Tensor t = x.transpose(0, 1);  // [3, 2, 4], not contiguous
  // x.transpose(0, 1).view(-1) -> RuntimeError: view size is not compatible with input tensor's
  // size and stride (at least one dimension spans across two contiguous subspaces). Use
  // .reshape(...) instead.
  std::string msg = error_of([&] { (void)t.view({-1}); });
  EXPECT_THAT(msg, HasSubstr("view"));
  EXPECT_THAT(msg, HasSubstr("not compatible"));
  EXPECT_THAT(msg, HasSubstr("[3, 2, 4]"));
  EXPECT_THAT(msg, HasSubstr("reshape"));
  Tensor r = t.reshape({-1});
  EXPECT_EQ(r.shape(), (Shape{24}));
  EXPECT_NE(r.storage(), x.storage());  // a copy
  // x.transpose(0, 1).reshape(-1)[:6] -> [0, 1, 2, 3, 12, 13]
  EXPECT_THAT(values(r.slice(0, 0, 6)), ElementsAre(0, 1, 2, 3, 12, 13));
  // Some views of a non-contiguous tensor are still possible: splitting the last (contiguous)
  // dim of a transpose, or merging dims that stay adjacent in memory.
  Tensor split = t.view({3, 2, 2, 2});
  EXPECT_EQ(split.storage(), x.storage());
  EXPECT_EQ(split.strides(), (Shape{4, 12, 2, 1}));
  // x.permute(1, 0, 2)[:, :, :2] is [3, 2, 2]; flattening its last two dims needs a copy.
  EXPECT_THROW((void)x.permute({1, 0, 2}).slice(2, 0, 2).view({3, 4}), Error);
}

TEST(ViewReshape, ReshapeOfAContiguousTensorIsAView) {
  Tensor x = cube();
  Tensor r = x.reshape({4, 6});
  EXPECT_EQ(r.storage(), x.storage());
  r.set({0, 0}, 99);
  EXPECT_EQ(x.at({0, 0, 0}), 99);
  EXPECT_THAT(error_of([&] {
                (void)x.reshape({5, -1});
              }),
              HasSubstr("invalid for input of size 24"));
  EXPECT_THAT(error_of([&] { (void)x.view({-1, -1}); }), HasSubstr("only one dimension"));
  EXPECT_THAT(error_of([&] { (void)x.view({7, 4}); }), HasSubstr("[7, 4]"));
}

TEST(ViewReshape, Gradients) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor v = x.view({3, 2});
  EXPECT_EQ(v.grad_fn()->name(), "ViewBackward0");
  v.backward(tensor({{1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(x.grad().shape(), (Shape{2, 3}));
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 2, 3, 4, 5, 6));
  // Reshape that must copy: the gradient still arrives in x's layout.
  // x.t().reshape(6).grad_fn -> <UnsafeViewBackward0>
  Tensor y = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor r = y.t().reshape({6});
  EXPECT_EQ(r.grad_fn()->name(), "UnsafeViewBackward0");
  r.backward(tensor({10, 20, 30, 40, 50, 60}));
  // y.t() is [[1, 4], [2, 5], [3, 6]]: element k of r is y.t()[k / 2][k % 2]
  EXPECT_THAT(values(y.grad()), ElementsAre(10, 30, 50, 20, 40, 60));
}

TEST(ViewReshape, ViewAndReshapeDoNotOverflowBeforeTheirError) {
  Tensor x = arange(4.0, DType::Float32);
  expect_error(
      [&] {
        x.view({kHugeDim, kHugeDim});
      },
      "view: shape '[4611686018427387904, "
      "4611686018427387904]' is invalid for input of size 4");
  expect_error([&] { x.view({-1, kHugeDim, 4}); }, "is invalid for input of size 4");
  expect_error([&] { x.reshape({kHugeDim, -1, kHugeDim}); }, "reshape: shape");
  expect_error([&] { x.reshape({kInt64Max, kInt64Max}); }, "is invalid for input of size 4");
  // An empty tensor: 0 elements, still no signed overflow while inferring.
  Tensor empty_t = zeros({0});
  expect_error([&] { empty_t.view({-1, kHugeDim, kHugeDim}); }, "is invalid for input of size 0");
}

// ---- transpose, t, permute ----

TEST(ViewTranspose, SwapsShapeAndStrides) {
  Tensor x = cube();
  Tensor t = x.transpose(0, -1);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_EQ(t.at({3, 2, 1}), 23);
  EXPECT_EQ(t.at({1, 0, 1}), 13);
  t.set({1, 0, 1}, -5);
  EXPECT_EQ(x.at({1, 0, 1}), -5);
  EXPECT_TRUE(equal(x.transpose(-1, 0), t));
  EXPECT_TRUE(equal(x.transpose(1, 1), x));
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(m.t().shape(), (Shape{3, 2}));
  EXPECT_THAT(values(m.t()), ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_TRUE(equal(m.mT(), m.t()));
  EXPECT_EQ(tensor({1, 2}).t().shape(), (Shape{2}));  // 1-d: itself
  EXPECT_THAT(error_of([&] { (void)x.t(); }), HasSubstr("t: "));
}

TEST(ViewTranspose, PermuteWithNegativeDims) {
  Tensor x = cube();
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(p.storage(), x.storage());
  EXPECT_TRUE(equal(x.permute({-1, -3, -2}), p));
  // x.permute(2, 0, 1)[3, 1, 2] == x[1, 2, 3] == 23
  EXPECT_EQ(p.at({3, 1, 2}), 23);
  EXPECT_THAT(error_of([&] { (void)x.permute({0, 1}); }), HasSubstr("permute"));
  EXPECT_THAT(error_of([&] { (void)x.permute({0, 1, 1}); }), HasSubstr("repeated"));
}

TEST(ViewTranspose, Gradients) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  Tensor t = x.transpose(0, 1);
  EXPECT_EQ(t.grad_fn()->name(), "TransposeBackward0");
  t.backward(tensor({{1, 2}, {3, 4}, {5, 6}}));
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 3, 5, 2, 4, 6));
  // x[0].t().grad_fn -> <TBackward0>
  EXPECT_EQ(x.t().grad_fn()->name(), "TBackward0");
  // y = x.permute(2, 0, 1); (y * w.permute(2, 0, 1)).sum().backward(); x.grad == w
  Tensor w = cube();
  Tensor g = grad_through(
      cube(),
      [](const Tensor& c) {
        return c.permute({2, 0, 1});
      },
      w.permute({2, 0, 1}));
  EXPECT_TRUE(equal(g, w));
  Tensor c = cube().requires_grad_();
  EXPECT_EQ(c.permute({2, 0, 1}).grad_fn()->name(), "PermuteBackward0");
}

// ---- unsqueeze, squeeze, flatten ----

TEST(ViewSqueeze, UnsqueezeAnywhere) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(x.unsqueeze(2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-3).shape(), (Shape{1, 2, 3}));
  Tensor u = x.unsqueeze(1);
  EXPECT_EQ(u.storage(), x.storage());
  u.set({1, 0, 2}, 60);
  EXPECT_EQ(x.at({1, 2}), 60);
  EXPECT_EQ(tensor(1.0).unsqueeze(0).shape(), (Shape{1}));
  EXPECT_THAT(error_of([&] { (void)x.unsqueeze(3); }), HasSubstr("[-3, 2]"));
  EXPECT_THAT(error_of([&] { (void)x.unsqueeze(-4); }), HasSubstr("unsqueeze"));
}

TEST(ViewSqueeze, SqueezeAllOrOneDim) {
  Tensor x = zeros({1, 3, 1, 2});
  EXPECT_EQ(x.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(x.squeeze(0).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(x.squeeze(-2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(x.squeeze(1).shape(), (Shape{1, 3, 1, 2}));  // not size 1: unchanged, as in PyTorch
  EXPECT_EQ(x.squeeze().storage(), x.storage());
  EXPECT_EQ(zeros({1, 1}).squeeze().dim(), 0);
  EXPECT_THAT(error_of([&] { (void)x.squeeze(4); }), HasSubstr("squeeze"));
}

TEST(ViewSqueeze, Gradients) {
  Tensor x = tensor({{1, 2, 3}}).requires_grad_();  // [1, 3]
  Tensor u = x.unsqueeze(-1);                       // [1, 3, 1]
  EXPECT_EQ(u.grad_fn()->name(), "UnsqueezeBackward0");
  Tensor s0 = u.squeeze();
  EXPECT_EQ(s0.grad_fn()->name(), "SqueezeBackward0");
  Tensor s1 = u.squeeze(0);
  EXPECT_EQ(s1.grad_fn()->name(), "SqueezeBackward1");
  s0.backward(tensor({1, 2, 3}));
  EXPECT_EQ(x.grad().shape(), (Shape{1, 3}));
  EXPECT_THAT(values(x.grad()), ElementsAre(1, 2, 3));
  s1.backward(tensor({{10}, {20}, {30}}));
  EXPECT_THAT(values(x.grad()), ElementsAre(11, 22, 33));
}

TEST(ViewFlatten, MergesARangeOfDims) {
  Tensor x = cube();
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.flatten(-2, -1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(1, 1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.flatten().storage(), x.storage());
  EXPECT_EQ(tensor(5.0).flatten().shape(), (Shape{1}));
  // On a transpose, flatten copies like reshape.
  Tensor ft = x.transpose(1, 2).flatten(1);
  EXPECT_EQ(ft.shape(), (Shape{2, 12}));
  // x.transpose(1, 2).flatten(1)[0, :4] -> [0, 4, 8, 1]
  EXPECT_THAT(values(ft[0].slice(0, 0, 4)), ElementsAre(0, 4, 8, 1));
  EXPECT_THAT(error_of([&] { (void)x.flatten(2, 1); }), HasSubstr("flatten"));
  Tensor g = grad_through(
      cube(), [](const Tensor& c) { return c.flatten(); }, arange(24, DType::Float32));
  EXPECT_TRUE(equal(g, cube()));
}

TEST(ViewFlatten, FlattenOfAnOverflowingExpandIsAnError) {
  Tensor e = ones({1, 1, 1}).expand({kHugeDim, 4, 4});
  expect_error([&] { e.flatten(); }, "flatten: size calculation overflowed");
}

// ---- expand ----

TEST(ViewExpand, RepeatsWithStrideZero) {
  Tensor a = tensor({1, 2, 3});
  Tensor e = a.expand({2, 3});
  EXPECT_EQ(e.shape(), (Shape{2, 3}));
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.storage(), a.storage());
  EXPECT_THAT(values(e), ElementsAre(1, 2, 3, 1, 2, 3));
  Tensor col = tensor({{1}, {2}});
  EXPECT_THAT(values(col.expand({2, 3})), ElementsAre(1, 1, 1, 2, 2, 2));
  EXPECT_EQ(col.expand({-1, 4}).shape(), (Shape{2, 4}));
  EXPECT_EQ(col.expand({3, 2, 2}).shape(), (Shape{3, 2, 2}));
  EXPECT_TRUE(equal(a.expand_as(zeros({4, 3})), a.expand({4, 3})));
  a.set({1}, 20);
  EXPECT_EQ(e.at({1, 1}), 20);
  EXPECT_THAT(error_of([&] { (void)a.expand({2, 4}); }), HasSubstr("expand"));
  EXPECT_THAT(error_of([&] { (void)a.expand({2}); }), HasSubstr("[2]"));
  EXPECT_THAT(error_of([&] { (void)col.expand({3}); }), HasSubstr("expand"));
}

TEST(ViewExpand, GradientSumsOverTheRepeats) {
  // a = torch.tensor([1., 2., 3.], requires_grad=True)
  // (a.unsqueeze(0).expand(4, 3) * torch.arange(12.).reshape(4, 3)).sum().backward()
  // a.grad -> tensor([18., 22., 26.])
  Tensor a = tensor({1, 2, 3}).requires_grad_();
  Tensor e = a.unsqueeze(0).expand({4, 3});
  EXPECT_EQ(e.grad_fn()->name(), "ExpandBackward0");
  e.backward(arange(12, DType::Float32).reshape({4, 3}));
  EXPECT_EQ(a.grad().shape(), (Shape{3}));
  EXPECT_THAT(values(a.grad()), ElementsAre(18, 22, 26));
  // Expanding to new leading dims and a size-1 dim at once.
  Tensor b = tensor({{1}, {2}}).requires_grad_();  // [2, 1]
  Tensor eb = b.expand({3, 2, 4});
  eb.backward(ones({3, 2, 4}));
  EXPECT_EQ(b.grad().shape(), (Shape{2, 1}));
  EXPECT_THAT(values(b.grad()), ElementsAre(12, 12));
}

TEST(ViewExpand, ExpandToAnOverflowingShapeCannotBeMaterialised) {
  Tensor e = ones({1, 1}).expand({int64_t{1} << 32, int64_t{1} << 32});
  EXPECT_EQ(e.stride(0), 0);
  expect_error([&] { e.contiguous(); }, "Storage size calculation overflowed");
  expect_error([&] { e.numel(); }, "overflows int64");
  expect_error([&] { e.clone(); }, "Storage size calculation overflowed");
  expect_error([&] { (e + 1.0).numel(); }, "overflow");
}

// An expanded view holds one element in storage but counts more than int64 holds: every op that
// walks all its elements counts them first, with an Error naming the op.
TEST(ViewExpand, OpsWalkingAnOverflowingViewAreErrors) {
  const int64_t big = int64_t{1} << 40;
  Tensor e = zeros({1, 1}).expand({big, big});
  expect_error([&] { e.sum(); },
               "sum: the number of elements of shape [1099511627776, "
               "1099511627776] overflows int64");
  expect_error([&] { sum(e, {0}); }, "sum: the number of elements");
  expect_error([&] { e.mean(); }, "mean: the number of elements");
  expect_error([&] { mean(e, {1}); }, "mean: the number of elements");
  expect_error([&] { max(e); }, "max: the number of elements");
  expect_error([&] { min(e, 0); }, "min: the number of elements");
  expect_error([&] { e.argmax(1); }, "argmax: the number of elements");
  expect_error([&] { var(e); }, "var: the number of elements");
  expect_error([&] { ember::std(e, 0); }, "std: the number of elements");
  expect_error([&] { e.fill_(1.0); }, "fill_: the number of elements");
  expect_error([&] { e.to_vector<float>(); }, "to_vector: the number of elements");
  expect_error([&] { equal(e, e); }, "equal: the number of elements");
  expect_error([&] { allclose(e, zeros({1})); }, "allclose: the number of elements");
  expect_error([&] { repr(e); }, "repr: the number of elements");
  // 2^60 elements count in int64, but their values do not fit in memory.
  expect_error(
      [&] {
        zeros({1, 1}).expand({int64_t{1} << 20, big}).to_vector<double>();
      },
      "to_vector: cannot allocate 1152921504606846976 values for a tensor of shape "
      "[1048576, 1099511627776]");
  expect_error(
      [&] {
        zeros({1, 1}, DType::Int64).expand({big, big}).sum();
      },
      "sum: the number of elements");
  // The gradient of expand is a sum over the expanded dims: the backward raises as well.
  Tensor x = zeros({1, 1}).requires_grad_();
  Tensor y = x.expand({big, big});
  expect_error([&] { y.backward(ones({1, 1}).expand({big, big})); }, "sum: the number of elements");
  EXPECT_FALSE(x.grad().defined());
}

TEST(ViewExpand, NegativeSizesAreErrors) {
  expect_error([] { ones({1}).expand({-2}); }, "expand: the expanded size -2 is invalid");
  expect_error([] { ones({2, 1}).expand({2, -3}); }, "expand: the expanded size -3 is invalid");
  expect_error([] { ones({1}).expand({-1, 2}); }, "expand: the expanded size -1 is invalid");
  EXPECT_EQ(ones({2, 1}).expand({-1, 4}).shape(), (Shape{2, 4}));  // -1 keeps a dim
  expect_error([] { ones({2}).view({-2}); }, "view: invalid shape dimension -2");
  expect_error([] { ones({2}).reshape({-3, 1}); }, "reshape: invalid shape dimension -3");
  expect_error([] { zeros({-1}); }, "negative dimension");
  expect_error([] { ones({2, -1}); }, "negative dimension");
  expect_error([] { full({-5}, 1.0); }, "negative dimension");
  expect_error([] { empty({3, -2}, DType::Int64); }, "negative dimension");
}

// ---- select, slice, narrow, index ----

TEST(ViewSelect, SelectAndSubscriptDropTheDim) {
  Tensor x = cube();
  Tensor r = x[1];
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  EXPECT_EQ(r.offset(), 12);
  EXPECT_EQ(r.storage(), x.storage());
  EXPECT_TRUE(equal(x[-1], r));
  Tensor col = x.select(-1, 2);  // x[..., 2]
  EXPECT_EQ(col.shape(), (Shape{2, 3}));
  EXPECT_THAT(values(col), ElementsAre(2, 6, 10, 14, 18, 22));
  Tensor s = x.select(1, -1);
  EXPECT_THAT(values(s), ElementsAre(8, 9, 10, 11, 20, 21, 22, 23));
  EXPECT_EQ(x[1][2][3].dim(), 0);
  EXPECT_EQ(x[1][2][3].item(), 23);
  col.set({1, 1}, -7);
  EXPECT_EQ(x.at({1, 1, 2}), -7);
}

TEST(ViewSelect, SliceWithNegativeBoundsAndSteps) {
  // m = torch.arange(10.)
  Tensor m = arange(10, DType::Float32);
  // m[-3:] -> [7, 8, 9]
  EXPECT_THAT(values(m.slice(0, -3, std::nullopt)), ElementsAre(7, 8, 9));
  // m[1:-1:3] -> [1, 4, 7]
  Tensor stepped = m.slice(0, 1, -1, 3);
  EXPECT_THAT(values(stepped), ElementsAre(1, 4, 7));
  EXPECT_EQ(stepped.strides(), (Shape{3}));
  EXPECT_EQ(stepped.offset(), 1);
  // m[-100:2] -> [0, 1]; m[8:100] -> [8, 9]; m[5:2] -> []
  EXPECT_THAT(values(m.slice(0, -100, 2)), ElementsAre(0, 1));
  EXPECT_THAT(values(m.slice(0, 8, 100)), ElementsAre(8, 9));
  EXPECT_EQ(m.slice(0, 5, 2).numel(), 0);
  EXPECT_EQ(m.slice(0, 5, 2).shape(), (Shape{0}));
  // Writing through a stepped slice changes the base.
  stepped.fill_(-1);
  EXPECT_THAT(values(m), ElementsAre(0, -1, 2, 3, -1, 5, 6, -1, 8, 9));
  // Along an inner dim, with a negative dim.
  Tensor x = cube();
  Tensor s = x.slice(-1, std::nullopt, std::nullopt, 2);  // x[..., ::2]
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_THAT(values(s[0]), ElementsAre(0, 2, 4, 6, 8, 10));
  EXPECT_THAT(error_of([&] { (void)m.slice(0, 0, 5, 0); }), HasSubstr("step"));
  EXPECT_THAT(error_of([&] { (void)m.slice(0, 0, 5, -1); }), HasSubstr("step"));
}

TEST(ViewSelect, Narrow) {
  Tensor x = cube();
  Tensor n = x.narrow(2, 1, 2);
  EXPECT_EQ(n.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(n.storage(), x.storage());
  EXPECT_THAT(values(n[0][0]), ElementsAre(1, 2));
  EXPECT_TRUE(equal(x.narrow(-1, -2, 2), x.slice(2, 2, 4)));
  EXPECT_THAT(error_of([&] { (void)x.narrow(0, 1, 2); }), HasSubstr("narrow"));
}

TEST(ViewSelect, IndexWithIntegersAndSlices) {
  Tensor x = cube();
  // x[:2, 1].shape -> torch.Size([2, 4])
  Tensor a = x.index({Slice(None, 2), 1});
  EXPECT_EQ(a.shape(), (Shape{2, 4}));
  EXPECT_THAT(values(a), ElementsAre(4, 5, 6, 7, 16, 17, 18, 19));
  EXPECT_EQ(a.storage(), x.storage());
  // x[1, :, 1:3] and x[-1, ::2, -1]
  EXPECT_THAT(values(x.index({1, Slice(), Slice(1, 3)})), ElementsAre(13, 14, 17, 18, 21, 22));
  EXPECT_THAT(values(x.index({-1, Slice(None, None, 2), -1})), ElementsAre(15, 23));
  // The book's mask[:n, :n].
  Tensor mask = triu(ones({6, 6}), 1).to_bool();
  Tensor sub = mask.index({Slice(None, 4), Slice(None, 4)});
  EXPECT_EQ(sub.shape(), (Shape{4, 4}));
  EXPECT_EQ(sub.dtype(), DType::Bool);
  EXPECT_THAT(sub.to_vector<int64_t>(),
              ElementsAre(0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0));
  a.set({1, 0}, 100);
  EXPECT_EQ(x.at({1, 1, 0}), 100);
  EXPECT_THAT(error_of([&] { (void)x.index({0, 0, 0, 0}); }), HasSubstr("too many indices"));
}

TEST(ViewSelect, Gradients) {
  Tensor x = cube().requires_grad_();
  EXPECT_EQ(x[1].grad_fn()->name(), "SelectBackward0");
  EXPECT_EQ(x.slice(1, 1, std::nullopt).grad_fn()->name(), "SliceBackward0");
  EXPECT_EQ(x.narrow(2, 1, 2).grad_fn()->name(), "SliceBackward0");
  EXPECT_EQ(x.index({Slice(None, 2), 1}).grad_fn()->name(), "SelectBackward0");

  // x.select(1, -1).sum().backward(): ones in x[:, 2, :], zeros elsewhere
  Tensor s = x.select(1, -1);
  s.backward(ones({2, 4}));
  EXPECT_EQ(x.grad().shape(), (Shape{2, 3, 4}));
  EXPECT_THAT(values(x.grad().select(1, 2)), ElementsAre(1, 1, 1, 1, 1, 1, 1, 1));
  EXPECT_THAT(values(x.grad().select(1, 0)), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));

  // y = x[:, 1:3:1, ::2]; (y * y).sum().backward(): 2 * x at the picked elements
  // x.grad[0] -> [[0, 0, 0, 0], [8, 0, 12, 0], [16, 0, 20, 0]]
  Tensor g = grad_through(
      cube(),
      [](const Tensor& c) { return c.slice(1, 1, 3).slice(2, std::nullopt, std::nullopt, 2); },
      cube().slice(1, 1, 3).slice(2, std::nullopt, std::nullopt, 2) * 2.0);
  EXPECT_THAT(values(g[0]), ElementsAre(0, 0, 0, 0, 8, 0, 12, 0, 16, 0, 20, 0));
  EXPECT_THAT(values(g[1]), ElementsAre(0, 0, 0, 0, 32, 0, 36, 0, 40, 0, 44, 0));
}

TEST(ViewSelect, HugeStepsAndLengthsDoNotOverflow) {
  Tensor x = arange(5.0, DType::Float64);
  // x[0::2**63-1] is [0.].
  expect_tensor(x.slice(0, 0, std::nullopt, kInt64Max), {1}, {0});
  expect_tensor(x.slice(0, 1, kInt64Max, kHugeDim), {1}, {1});
  expect_tensor(x.slice(0, -kInt64Max, kInt64Max, 2), {3}, {0, 2, 4});
  expect_error([&] { x.narrow(0, 2, kInt64Max); },
               "narrow: start (2) + length (9223372036854775807)");
  expect_error([&] { x.narrow(0, -kInt64Max, 1); }, "narrow: start out of range");
  // x.split(2**63-1) is one piece; x.chunk(2**63-1) five pieces of one.
  auto pieces = x.split(kInt64Max);
  ASSERT_EQ(pieces.size(), 1u);
  expect_tensor(pieces[0], {5}, {0, 1, 2, 3, 4});
  EXPECT_EQ(x.chunk(kInt64Max).size(), 5u);
  expect_error([&] { x.select(0, kInt64Max); },
               "select: index 9223372036854775807 is out of range");
  expect_error([&] { x.select(0, -kInt64Max); }, "is out of range");
}

TEST(ViewChains, ViewsOfViewsShareStorageAndComposeGradients) {
  Tensor x = cube();
  Tensor v = x.transpose(0, 2).select(1, 1).slice(0, 1, 3).unsqueeze(0);  // [1, 2, 2]
  EXPECT_EQ(v.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(v.storage(), x.storage());
  // x.transpose(0, 2)[:, 1][1:3] -> [[5, 17], [6, 18]]
  EXPECT_THAT(values(v), ElementsAre(5, 17, 6, 18));
  v.set({0, 1, 1}, -18);
  EXPECT_EQ(x.at({1, 1, 2}), -18);

  Tensor g = grad_through(
      cube(),
      [](const Tensor& c) { return c.transpose(0, 2).select(1, 1).slice(0, 1, 3).unsqueeze(0); },
      tensor({{{1, 2}, {3, 4}}}));
  EXPECT_EQ(g.at({0, 1, 1}), 1);
  EXPECT_EQ(g.at({1, 1, 1}), 2);
  EXPECT_EQ(g.at({0, 1, 2}), 3);
  EXPECT_EQ(g.at({1, 1, 2}), 4);
  double total = 0;
  for (double d : values(g)) total += d;
  EXPECT_EQ(total, 10);
}

TEST(ViewInPlace, WritingIntoAViewOfATensorThatRequiresGradIsRefused) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor v = y.slice(0, 0, 2);
  std::string msg = error_of([&] { v.masked_fill_(tensor({1, 0}, DType::Bool), 0); });
  EXPECT_THAT(msg, HasSubstr("masked_fill_"));
  EXPECT_THAT(msg, HasSubstr("view"));
  // A view of a plain tensor cannot take a result that requires grad either: its base would
  // change without joining the graph, and the base's gradients would be silently wrong.
  Tensor base = zeros({2, 3});
  Tensor row = base[0];
  std::string add_msg = error_of([&] { row.add_(x); });
  EXPECT_THAT(add_msg, HasSubstr("add_"));
  EXPECT_THAT(add_msg, HasSubstr("view"));
  EXPECT_THAT(error_of([&] { base.slice(0, 0, 1).copy_(x); }), HasSubstr("copy_"));
  // Without grad (e.g. an optimizer step under NoGradGuard) writing through views is fine.
  {
    NoGradGuard no_grad;
    row.add_(x);
  }
  row.add_(ones({3}));
  EXPECT_THAT(values(base), ElementsAre(2, 3, 4, 0, 0, 0));
}

TEST(View0d, ViewsThatNeedADimension) {
  Tensor s = scalar_tensor(3.0);
  expect_error([&] { s.narrow(0, 0, 1); }, "narrow() cannot be applied to a 0-dim tensor.");
  expect_error([&] { s.select(0, 0); }, "select: cannot be applied to a 0-dim tensor");
  expect_error([&] { s[0]; }, "cannot be applied to a 0-dim tensor");
  expect_error([&] { s.slice(0, 0, 1); }, "slice: cannot be applied to a 0-dim tensor");
  expect_error([&] { s.index({0}); }, "too many indices for tensor of dimension 0");
  expect_error([&] { s.index({Slice(None, 1)}); }, "too many indices for tensor of dimension 0");
  expect_error([&] { s.split(1); }, "split: expected a tensor with at least 1 dimension");
  expect_error([&] { s.chunk(1); }, "chunk: expected a tensor with at least 1 dimension");
  expect_error([&] { s.transpose(0, 1); },
               "transpose: dimension out of range (expected to be in "
               "range of [-1, 0], but got 1)");
  expect_error([&] { s.unsqueeze(2); }, "unsqueeze: dimension out of range");
  expect_error([&] { s.permute({0}); }, "permute: number of dims don't match");
}

}  // namespace
}  // namespace ember
