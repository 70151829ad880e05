// Adversarial empty tensors: a tensor with a zero dim may have huge other
// dims, zeros({2^62, 0}). It holds nothing, so every op on it must finish at once: a kernel that
// loops over the product of the non-empty dims runs for 2^62 iterations (fuzz_ops found softmax
// doing that), and products of the sizes overflow. Each op below gives PyTorch's (empty or
// identity-filled) result or an ember::Error; a regression shows as a test that never ends
// (ctest's timeout) or, in the asan preset, as a UBSan report.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
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

constexpr int64_t kBig = int64_t{1} << 62;

// Shapes with a zero somewhere and 2^62 elsewhere, in every order that matters to a kernel
// (zero in the outer, reduced or inner part of a reduction; leading, middle or trailing).
std::vector<Shape> hostile_shapes() {
  return {{kBig, 0},    {0, kBig},    {kBig, 3, 0},   {0, 3, kBig},
          {kBig, 0, 3}, {3, 0, kBig}, {2, kBig, 0, 2}};
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

TEST(AdvEmpty, UnaryAndReductionOpsOnEmptyTensorsWithHugeDimsFinish) {
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
      run("chunk " + at, [&] { return x.chunk(kBig, d).back(); });
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

TEST(AdvEmpty, SplittingIntoMorePiecesThanMemoryCanListIsAnError) {
  test::expect_error(
      [] {
        zeros({0, kBig}).split(2, 1);
      },
      "split: cannot hold 2305843009213693952 pieces of a tensor of shape [0, "
      "4611686018427387904] (their views would take more than the ");
  test::expect_error([] { zeros({0}).chunk(kBig, 0); }, "chunk: cannot hold");
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

TEST(AdvEmpty, MatrixOpsWithAnEmptyOrHugeInnerDimFinish) {
  // [M, K] @ [K, N] with one of M, N zero and K huge, or K zero and the output empty.
  run("mm M=0 K=2^62", [] { return mm(zeros({0, kBig}), zeros({kBig, 0})); });
  run("mm K=0", [] { return mm(zeros({kBig, 0}), zeros({0, 0})); });
  run("bmm batch 2^62", [] { return bmm(zeros({kBig, 0, 2}), zeros({kBig, 2, 3})); });
  // An empty batch of huge matrices: rows * cols overflows (fuzz_ops found it in product()).
  EXPECT_EQ(matmul(zeros({0, kBig, 2}), zeros({0, 2, kBig})).shape(), (Shape{0, kBig, kBig}));
  EXPECT_EQ(bmm(zeros({0, kBig, 2}), zeros({0, 2, kBig})).shape(), (Shape{0, kBig, kBig}));
  EXPECT_EQ(matmul(zeros({0, kBig, kBig}).transpose(1, 2), zeros({kBig, 0})).shape(),
            (Shape{0, kBig, 0}));
  run("matmul broadcast", [] { return matmul(zeros({kBig, 1, 0, 2}), zeros({3, 2, 4})); });
  run("linear", [] { return linear(zeros({kBig, 0, 4}), zeros({5, 4}), zeros({5})); });
  run("embedding", [] { return embedding(zeros({10, 4}), zeros({0, kBig}, DType::Int64)); });
  run("mv", [] { return mv(zeros({0, kBig}), zeros({kBig})); });
  run("causal_attention", [] {
    Tensor q = zeros({kBig, 2, 0, 4});
    return causal_attention(q, q, q);
  });
}

// A batched product with no rows or no columns is empty however big its batch: it must not copy
// the other operand over the batch (seen while analysing a fuzz_ops timeout: [4, 1, 2, 2] @
// [1, 2^22, 2, 0] took 15 s under ASan to give nothing, and the fuzzer can make batches of 2^32;
// with 2^40 below the copy asked for 64 TB and was an Error). Its gradients are zeros, as
// PyTorch's ([4, 1, 2, 2] @ [1, 3, 2, 0]: a.grad zeros, grad_fn UnsafeViewBackward0).
TEST(AdvEmpty, BatchedProductWithNoRowsOrColumnsCopiesNothing) {
  constexpr int64_t kHuge = int64_t{1} << 40;
  Tensor a = ones({4, 1, 2, 2}).requires_grad_();
  Tensor b = ones({1, kHuge, 2, 0}).requires_grad_();
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{4, kHuge, 2, 0}));
  ASSERT_TRUE(c.requires_grad());
  c.sum().backward();
  test::expect_tensor(a.grad(), {4, 1, 2, 2}, std::vector<double>(16, 0.0));
  EXPECT_EQ(b.grad().shape(), (Shape{1, kHuge, 2, 0}));

  // No rows: b would have been copied over a's batch.
  Tensor x = ones({kHuge, 1, 0, 3}).requires_grad_();
  Tensor y = ones({1, 4, 3, 5}).requires_grad_();
  Tensor z = matmul(x, y);
  EXPECT_EQ(z.shape(), (Shape{kHuge, 4, 0, 5}));
  z.sum().backward();
  test::expect_tensor(y.grad(), {1, 4, 3, 5}, std::vector<double>(60, 0.0));
  EXPECT_EQ(x.grad().shape(), (Shape{kHuge, 1, 0, 3}));

  // A small empty product still has PyTorch's shape and zero gradients, and a vector operand
  // (never empty of columns) takes the ordinary path.
  EXPECT_EQ(matmul(ones({4, 1, 2, 2}), ones({1, 3, 2, 0})).shape(), (Shape{4, 3, 2, 0}));
  EXPECT_EQ(matmul(ones({3, 0, 2}), ones({2})).shape(), (Shape{3, 0}));
}

TEST(AdvEmpty, BackwardThroughEmptyTensorsWithHugeDimsFinishes) {
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

}  // namespace
}  // namespace ember
