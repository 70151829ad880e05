// Shapes and sizes (core/base/shape.h) as the ops use them: a zero dim makes a tensor empty
// whatever its other dims, and every op on such a tensor finishes without overflowing; a dim of a
// 0-d tensor is wrapped as PyTorch wraps it. (The factories' size checks are tested in
// tests/core/tensor/test_tensor.cpp, the views' in tests/core/ops/test_views.cpp.)
//
// An empty tensor may have huge other dims, zeros({2^62, 0}). It holds nothing, so every op on it
// must finish at once: a kernel that loops over the product of the non-empty dims runs for 2^62
// iterations (fuzz_ops found softmax doing that), and products of the sizes overflow. Each op
// below gives PyTorch's (empty or identity-filled) result or an ember::Error; a regression shows
// as a test that never ends (ctest's timeout) or, in the asan preset, as a UBSan report.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/base/format.h"
#include "core/ember.h"
#include "core/ops/attention.h"
#include "core/ops/nn_ops.h"
#include "core/ops/sort.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::expect_tensor;
using test::kHugeDim;

// ---- empty tensors with huge dims ----

// Shapes with a zero somewhere and 2^62 elsewhere, in every order that matters to a kernel
// (zero in the outer, reduced or inner part of a reduction; leading, middle or trailing).
std::vector<Shape> hostile_shapes() {
  return {{kHugeDim, 0},    {0, kHugeDim},    {kHugeDim, 3, 0},   {0, 3, kHugeDim},
          {kHugeDim, 0, 3}, {3, 0, kHugeDim}, {2, kHugeDim, 0, 2}};
}

// Runs fn; an ember::Error is an acceptable answer, any result must be sane.
void run(const std::string& what, const std::function<Tensor()>& fn) {
  SCOPED_TRACE(what);
  try {
    Tensor out = fn();
    if (out.defined()) {
      (void)out.numel();
    }
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not an ember::Error: " << e.what();
  }
}

TEST(ShapeEmpty, UnaryAndReductionOpsOnEmptyTensorsWithHugeDimsFinish) {
  for (const Shape& shape : hostile_shapes()) {
    const std::string s = format_shape_tuple(shape);
    Tensor x = zeros(shape);
    const int64_t last = x.dim() - 1;
    EXPECT_EQ(x.numel(), 0);
    for (int64_t d = 0; d < x.dim(); ++d) {
      const std::string at = s + " dim " + std::to_string(d);
      run("softmax " + at, [&] { return softmax(x, d); });
      run("log_softmax " + at, [&] { return log_softmax(x, d); });
      run("sum " + at, [&] { return sum(x, {d}); });
      run("mean " + at, [&] { return mean(x, {d}, true); });
      run("var " + at, [&] { return var(x, {d}); });
      run("max " + at, [&] { return max(x, d).values; });
      run("min " + at, [&] { return min(x, d, true).indices; });
      run("argmax " + at, [&] { return argmax(x, d); });
      run("sort " + at, [&] { return sort(x, d).values; });
      run("argsort " + at, [&] { return argsort(x, d, true); });
      run("topk " + at, [&] { return topk(x, 0, d).values; });
      run("cat " + at, [&] { return cat({x, x}, d); });
      run("stack " + at, [&] { return stack({x, x}, d); });
      run("index_select " + at, [&] { return index_select(x, d, zeros({2}, DType::Int64)); });
      run("gather " + at, [&] { return gather(x, d, zeros(shape, DType::Int64)); });
      run("narrow " + at, [&] { return x.narrow(d, 0, 0).contiguous(); });
      run("unsqueeze " + at, [&] { return x.unsqueeze(d).unsqueeze(0); });
      run("select " + at, [&] { return x.select(d, -1); });
      run("slice " + at, [&] { return x.slice(d, 1, std::nullopt, 3).contiguous(); });
      run("split " + at, [&] { return x.split(2, d).back(); });
      run("chunk " + at, [&] { return x.chunk(kHugeDim, d).back(); });
    }
    run("layer_norm " + s, [&] { return layer_norm(x, {x.size(last)}, Tensor(), Tensor(), 1e-5); });
    run("triu " + s, [&] { return triu(x, 1); });
    run("transpose contiguous " + s, [&] { return x.transpose(0, last).contiguous(); });
    run("exp " + s, [&] { return exp(x.transpose(0, last)); });
    run("add " + s, [&] { return x + x.transpose(0, last).transpose(0, last); });
    run("where " + s, [&] { return where(zeros(shape, DType::Bool), x, zeros({1})); });
    run("masked_fill " + s, [&] { return masked_fill(x, zeros(shape, DType::Bool), 2.0); });
    run("nonzero " + s, [&] { return nonzero(x); });
    run("repr " + s, [&] {
      (void)repr(x);
      return Tensor();
    });
    run("in-place " + s, [&] {
      Tensor y = zeros(shape);
      y.add_(x).mul_(2.0).copy_(x);
      y.fill_(1.0);
      return y;
    });
  }
}

TEST(ShapeEmpty, MatrixOpsWithAnEmptyOrHugeInnerDimFinish) {
  // [M, K] @ [K, N] with one of M, N zero and K huge, or K zero and the output empty.
  run("mm M=0 K=2^62", [] { return mm(zeros({0, kHugeDim}), zeros({kHugeDim, 0})); });
  run("mm K=0", [] { return mm(zeros({kHugeDim, 0}), zeros({0, 0})); });
  run("bmm batch 2^62", [] { return bmm(zeros({kHugeDim, 0, 2}), zeros({kHugeDim, 2, 3})); });
  // An empty batch of huge matrices: rows * cols overflows (fuzz_ops found it in product()).
  EXPECT_EQ(matmul(zeros({0, kHugeDim, 2}), zeros({0, 2, kHugeDim})).shape(),
            (Shape{0, kHugeDim, kHugeDim}));
  EXPECT_EQ(bmm(zeros({0, kHugeDim, 2}), zeros({0, 2, kHugeDim})).shape(),
            (Shape{0, kHugeDim, kHugeDim}));
  EXPECT_EQ(matmul(zeros({0, kHugeDim, kHugeDim}).transpose(1, 2), zeros({kHugeDim, 0})).shape(),
            (Shape{0, kHugeDim, 0}));
  run("matmul broadcast", [] { return matmul(zeros({kHugeDim, 1, 0, 2}), zeros({3, 2, 4})); });
  run("linear", [] { return linear(zeros({kHugeDim, 0, 4}), zeros({5, 4}), zeros({5})); });
  run("embedding", [] { return embedding(zeros({10, 4}), zeros({0, kHugeDim}, DType::Int64)); });
  run("mv", [] { return mv(zeros({0, kHugeDim}), zeros({kHugeDim})); });
  run("causal_attention", [] {
    Tensor q = zeros({kHugeDim, 2, 0, 4});
    return causal_attention(q, q, q);
  });
}

TEST(ShapeEmpty, BackwardThroughEmptyTensorsWithHugeDimsFinishes) {
  for (const Shape& shape : hostile_shapes()) {
    SCOPED_TRACE(format_shape_tuple(shape));
    Tensor x = zeros(shape).requires_grad_();
    for (int64_t d = 0; d < x.dim(); ++d) {
      for (const auto& f : std::vector<std::function<Tensor(const Tensor&)>>{
               [&](const Tensor& t) { return softmax(t, d); },
               [&](const Tensor& t) { return log_softmax(t, d); },
               [&](const Tensor& t) { return mean(t, {d}, true); },
               [&](const Tensor& t) { return t.transpose(0, d) * 2.0; },
               [&](const Tensor& t) { return index_select(t, d, zeros({3}, DType::Int64)); },
               [&](const Tensor& t) {
                 return layer_norm(t, {t.size(-1)}, Tensor(), Tensor(), 1e-5);
               }}) {
        try {
          f(x).sum().backward();
          ASSERT_TRUE(x.grad().defined());
          EXPECT_EQ(x.grad().shape(), shape);
          x.grad().zero_();
        } catch (const Error&) {
        }
      }
    }
  }
}

TEST(ShapeEmpty, AZeroDimensionMakesAnyShapeEmpty) {
  // PyTorch: torch.zeros(0, 2**62, 2**62) is an empty tensor.
  Tensor t = zeros({0, kHugeDim, kHugeDim});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.shape(), (Shape{0, kHugeDim, kHugeDim}));
}

// An empty tensor may have huge other dims ([0, 2^62, 25]); products of its sizes wrap and its
// strides are garbage that no kernel may compute with (fuzz_ops found signed overflows in
// is_row_major, floating_sum, var's n - correction and the overlap check of cat's copy_).
// Every op either gives PyTorch's empty result or an Error; UBSan (asan preset) checks the rest.
TEST(ShapeEmpty, EmptyTensorsWithHugeOtherDimsNeverOverflow) {
  const Tensor e = zeros({0, kHugeDim, 25});
  EXPECT_TRUE(e.is_contiguous());  // PyTorch: any empty tensor is contiguous
  EXPECT_EQ(sum(e, {1}).shape(), (Shape{0, 25}));
  EXPECT_EQ(mean(e, {2}, true).shape(), (Shape{0, kHugeDim, 1}));
  EXPECT_EQ(softmax(e, 2).shape(), e.shape());
  EXPECT_EQ(log_softmax(e, 1).shape(), e.shape());
  EXPECT_EQ(var(e, {1}, Correction(std::numeric_limits<int64_t>::min())).shape(), (Shape{0, 25}));
  EXPECT_EQ(e.transpose(0, 2).contiguous().shape(), (Shape{25, kHugeDim, 0}));
  EXPECT_EQ(e.view({kHugeDim, 0, 25}).shape(), (Shape{kHugeDim, 0, 25}));
  EXPECT_EQ(e.reshape({-1, 25}).shape(), (Shape{0, 25}));
  EXPECT_EQ(index_select(e, 2, arange(3.0).to(DType::Int64)).shape(), (Shape{0, kHugeDim, 3}));
  EXPECT_EQ(cat({e, e}, 0).shape(), e.shape());
  // 2^62 + 2^62 does not fit (PyTorch: "negative dimension -9223372036854775808").
  expect_error(
      [&] {
        cat({e, e}, 1);
      },
      "cat: the concatenated size in dimension 1 overflows int64");
  Tensor dst = zeros({0, kHugeDim, 25});
  dst.copy_(e);
  dst.add_(e);
  dst.masked_fill_(zeros({0, kHugeDim, 25}, DType::Bool), 1.0);
  EXPECT_EQ(dst.numel(), 0);
  EXPECT_EQ(repr(e), "tensor([], size=(0, 4611686018427387904, 25))");
  // A reduction that would produce the huge dims is refused before allocating.
  expect_error([&] { sum(e, {0}); }, "Storage size calculation overflowed");
}

// ---- dims of a 0-d tensor ----

// PyTorch wraps dim 0 and -1 on a 0-d tensor for these ops (wrap_scalar=True).
TEST(ShapeWrapDim, OpsThatAcceptDim0OnA0dTensor) {
  Tensor s = scalar_tensor(3.0, DType::Float64);
  expect_tensor(s.transpose(0, -1), {}, {3});
  expect_tensor(s.unsqueeze(0), {1}, {3});
  expect_tensor(s.unsqueeze(-1), {1}, {3});
  expect_tensor(s.squeeze(0), {}, {3});
  expect_tensor(s.flatten(), {1}, {3});
  expect_tensor(s.sum(0), {}, {3});
  expect_tensor(s.sum(-1, true), {}, {3});
  expect_tensor(s.mean(0), {}, {3});
  expect_tensor(softmax(s, 0), {}, {1});
  expect_tensor(log_softmax(s, -1), {}, {0});
  expect_tensor(s.argmax(0), {}, {0});
  expect_tensor(s.t(), {}, {3});
  expect_tensor(s.permute({}), {}, {3});
  expect_tensor(s.reshape({1, 1}), {1, 1}, {3});
  expect_tensor(s.expand({2, 2}), {2, 2}, {3, 3, 3, 3});
  expect_tensor(s.view({-1}), {1}, {3});
  expect_tensor(matmul(ones({2}, DType::Float64), ones({2}, DType::Float64)), {}, {2});
  expect_error([&] { matmul(s, s); }, "matmul: both arguments need at least 1 dimension");
  expect_error([&] { s.sum(1); },
               "sum: dimension out of range (expected to be in range of [-1, 0], "
               "but got 1)");
}

}  // namespace
}  // namespace ember
