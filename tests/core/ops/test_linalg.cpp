// Products: the GEMM kernel against a naive loop, dot/mv/mm/bmm/matmul against the book's
// numbers and PyTorch 1.13, their gradients, grad_fn names, errors, strided and empty operands.
//
// Oracle values come from /usr/bin/python3 (torch 1.13) with this helper, which
// pattern() in tests/test_helpers.h reproduces exactly (every value is a multiple of 1/8, so
// products and sums are exact in float64 and float32 alike):
//   P = lambda *shape, seed=0: torch.tensor([((i * 7 + seed * 13) % 17) / 8 - 1
//           for i in range(math.prod(shape))], dtype=torch.float64).reshape(shape)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <limits>
#include <string>
#include <vector>

#include "core/graph/node.h"
#include "core/kernels/gemm.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/shape.h"
#include "core/tensor/tensor.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::book_inputs;
using test::error_of;
using test::expect_tensor;
using test::pattern;

// The names met following the first edge from t's grad_fn: {"UnsafeViewBackward0", ...}.
std::vector<std::string> grad_fn_chain(const Tensor& t, std::size_t depth) {
  std::vector<std::string> names;
  std::shared_ptr<autograd::Node> node = t.grad_fn();
  while (node && names.size() < depth) {
    names.push_back(node->name());
    node = node->next_functions.empty() ? nullptr : node->next_functions[0];
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// The kernel alone.

// C = A B the slow obvious way, in double.
std::vector<double> naive_product(int64_t M, int64_t N, int64_t K, const std::vector<double>& A,
                                  const std::vector<double>& B) {
  std::vector<double> C(static_cast<std::size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) C[i * N + j] += A[i * K + k] * B[k * N + j];
  return C;
}

// Small integers: every product and sum is exact in float, so results compare exactly.
std::vector<double> small_integers(int64_t n, int seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 5 + seed * 3) % 9) - 4;
  return v;
}

template <typename T>
void check_gemm_against_naive(int64_t M, int64_t N, int64_t K, bool a_transposed,
                              bool b_transposed) {
  const std::vector<double> A = small_integers(M * K, 1), B = small_integers(K * N, 2);
  const std::vector<double> expected = naive_product(M, N, K, A, B);
  // Store each operand row-major, or as its transpose (column-major) read through strides.
  std::vector<T> a_store(A.size()), b_store(B.size());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      a_store[a_transposed ? k * M + i : i * K + k] = static_cast<T>(A[i * K + k]);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      b_store[b_transposed ? j * K + k : k * N + j] = static_cast<T>(B[k * N + j]);
  const int64_t lda_row = a_transposed ? 1 : K, lda_col = a_transposed ? M : 1;
  const int64_t ldb_row = b_transposed ? 1 : N, ldb_col = b_transposed ? K : 1;

  std::vector<T> C(static_cast<std::size_t>(M * N), T(7));  // garbage that must be overwritten
  kernels::gemm<T>(M, N, K, a_store.data(), lda_row, lda_col, b_store.data(), ldb_row, ldb_col,
                   C.data(), N, /*accumulate=*/false);
  for (std::size_t i = 0; i < C.size(); ++i) ASSERT_EQ(C[i], static_cast<T>(expected[i])) << i;

  // accumulate = true adds the product once more.
  kernels::gemm<T>(M, N, K, a_store.data(), lda_row, lda_col, b_store.data(), ldb_row, ldb_col,
                   C.data(), N, /*accumulate=*/true);
  for (std::size_t i = 0; i < C.size(); ++i) ASSERT_EQ(C[i], static_cast<T>(2 * expected[i])) << i;
}

TEST(LinalgKernel, GemmMatchesNaiveAcrossBlocksAndStrides) {
  // 70 x 300 x 260 crosses the row, column and depth tiles and takes the threaded path.
  for (bool at : {false, true})
    for (bool bt : {false, true}) {
      check_gemm_against_naive<float>(70, 300, 260, at, bt);
      check_gemm_against_naive<double>(5, 7, 3, at, bt);
    }
  check_gemm_against_naive<int64_t>(4, 3, 5, false, true);
  check_gemm_against_naive<float>(1, 1, 9, true, true);    // a dot product
  check_gemm_against_naive<double>(6, 1, 4, false, true);  // a matrix-vector product
}

TEST(LinalgKernel, GemmWritesIntoARowStridedC) {
  // C is the left 2 x 2 block of a 2 x 5 buffer (ldc = 5); the rest must stay untouched.
  const std::vector<float> A = {1, 2, 3, 4}, B = {5, 6, 7, 8};
  std::vector<float> C(10, -1.0f);
  kernels::gemm<float>(2, 2, 2, A.data(), 2, 1, B.data(), 2, 1, C.data(), 5, false);
  EXPECT_EQ(C, (std::vector<float>{19, 22, -1, -1, -1, 43, 50, -1, -1, -1}));
}

TEST(LinalgKernel, GemmWithEmptyDepthGivesZerosOrLeavesC) {
  std::vector<double> C(6, 3.0);
  kernels::gemm<double>(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, C.data(), 3, /*accumulate=*/true);
  EXPECT_EQ(C, std::vector<double>(6, 3.0));
  kernels::gemm<double>(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, C.data(), 3, /*accumulate=*/false);
  EXPECT_EQ(C, std::vector<double>(6, 0.0));
  kernels::gemm<double>(0, 3, 4, nullptr, 4, 1, nullptr, 3, 1, nullptr, 3, false);  // no rows
}

TEST(LinalgKernel, Float32AccumulatesInFloatInOrder) {
  // 1e8 + 1 rounds back to 1e8 in float, so the sum over k in order is 0, as sgemm gives;
  // a double accumulator would give 1.
  const std::vector<float> A = {1e8f, 1.0f, -1e8f}, B = {1.0f, 1.0f, 1.0f};
  float C = 42.0f;
  kernels::gemm<float>(1, 1, 3, A.data(), 3, 1, B.data(), 1, 1, &C, 1, false);
  EXPECT_EQ(C, 0.0f);
}

TEST(LinalgKernel, BatchedReusesABroadcastOperand) {
  // Two products share B (batch stride 0); B is read transposed, so it is packed once.
  const std::vector<double> A = {1, 2, 3, 4, 5, 6, 7, 8};  // two 2 x 2
  const std::vector<double> Bt = {1, 0, 1, 1};             // B = [[1, 1], [0, 1]] stored as B^T
  std::vector<double> C(8, 0.0);
  kernels::gemm_batched<double>(2, 2, 2, 2, A.data(), 4, 2, 1, Bt.data(), 0, 1, 2, C.data(), 4, 2,
                                false);
  EXPECT_EQ(C, (std::vector<double>{1, 3, 3, 7, 5, 11, 7, 15}));
}

// ---------------------------------------------------------------------------------------------
// The book's numbers.

TEST(LinalgBook, AttentionScoresAsInputsTimesInputsT) {
  // print(inputs @ inputs.T)  (chapter 3.3.2)
  Tensor scores = matmul(book_inputs(), book_inputs().t());
  expect_tensor(scores, {6, 6}, {0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310,  //
                                 0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865,  //
                                 0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605,  //
                                 0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565,  //
                                 0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935,  //
                                 0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450},
                1e-4);
  EXPECT_EQ(scores.dtype(), DType::Float32);
  EXPECT_FALSE(scores.requires_grad());
  EXPECT_EQ(scores.grad_fn(), nullptr);
}

TEST(LinalgBook, ScoresOfTheSecondTokenAsDotAndMv) {
  Tensor inputs = book_inputs();
  Tensor query = inputs[1];  // a row view with a storage offset
  // torch.dot(inputs[0], query).item() == 0.9544000625610352
  EXPECT_NEAR(dot(inputs[0], query).item(), 0.9544000625610352, 1e-6);
  EXPECT_EQ(inputs[0].dot(query).dim(), 0);
  // print(inputs @ query)  (cell 28: tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]))
  expect_tensor(inputs.matmul(query), {6}, {0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865}, 1e-4);
}

TEST(LinalgBook, BatchedHeadsCell138) {
  Tensor a = tensor({{{{0.2745, 0.6584, 0.2775, 0.8573},
                       {0.8993, 0.0390, 0.9268, 0.7388},
                       {0.7179, 0.7058, 0.9156, 0.4340}},
                      {{0.0772, 0.3565, 0.1479, 0.5331},
                       {0.4066, 0.2318, 0.4545, 0.9737},
                       {0.4606, 0.5159, 0.4220, 0.5786}}}});
  // print(a @ a.transpose(2, 3))
  Tensor out = matmul(a, a.transpose(2, 3));
  expect_tensor(out, {1, 2, 3, 3},
                {1.3208, 1.1631, 1.2879, 1.1631, 2.2150, 1.8424, 1.2879, 1.8424, 2.0402,  //
                 0.4391, 0.7003, 0.5903, 0.7003, 1.3737, 1.0620, 0.5903, 1.0620, 0.9912},
                1e-4);
  // Cell 140: the same per head with mm.
  Tensor first_head = a.select(0, 0).select(0, 0);
  EXPECT_TRUE(allclose(mm(first_head, first_head.t()), out.select(0, 0).select(0, 0)));
  // With a grad, the batched product prints as PyTorch's does.
  a.requires_grad_();
  EXPECT_EQ(matmul(a, a.transpose(2, 3)).grad_fn()->name(), "UnsafeViewBackward0");
}

// ---------------------------------------------------------------------------------------------
// matmul's cases: value, gradients and grad_fn chain against PyTorch 1.13.

struct MatmulCase {
  Shape a, b;
  std::vector<std::string> chain;  // grad_fn names along the first edge
  Shape out_shape;
  std::vector<double> out, grad_a, grad_b;
};

// A = P(*a, seed=1).requires_grad_(); B = P(*b, seed=2).requires_grad_(); out = A @ B
// out.backward(P(*out.shape, seed=3)); print(out, A.grad, B.grad)
const std::vector<MatmulCase>& matmul_cases() {
  static const std::vector<MatmulCase> cases = {
      {{3},
       {3},
       {"DotBackward0"},
       {},
       {-0.609375},
       {-0.046875, -0.375, 0.09375},
       {-0.234375, 0.234375, -0.09375}},
      {{2, 3},
       {3},
       {"MvBackward0"},
       {2},
       {-0.609375, -0.4375},
       {-0.046875, -0.375, 0.09375, 0.0625, 0.5, -0.125},
       {-0.734375, 0.171875, 0.28125}},
      {{3},
       {3, 4},
       {"SqueezeBackward3", "MmBackward0", "UnsqueezeBackward0"},
       {4},
       {0.65625, 0.34375, 0.5625, 0.25},
       {0.71875, 1.09375, -0.921875},
       {-0.234375, 0.3125, -0.46875, 0.078125, 0.234375, -0.3125, 0.46875, -0.078125, -0.09375,
        0.125, -0.1875, 0.03125}},
      {{2, 3},
       {3, 4},
       {"MmBackward0"},
       {2, 4},
       {0.65625, 0.34375, 0.5625, 0.25, 0.515625, -1.40625, 0.65625, -1.265625},
       {0.71875, 1.09375, -0.921875, -0.671875, -1.234375, 1.65625},
       {-1.234375, 0.5625, -1.09375, 0.703125, 0.109375, -0.28125, 0.390625, 0.0, 0.65625, -0.0625,
        0.28125, -0.4375}},
      // Folded: [2, 2, 3] -> [4, 3] mm [3, 4] -> unsafe_view [2, 2, 4].
      {{2, 2, 3},
       {3, 4},
       {"UnsafeViewBackward0", "MmBackward0"},
       {2, 2, 4},
       {0.65625, 0.34375, 0.5625, 0.25, 0.515625, -1.40625, 0.65625, -1.265625, -0.953125, 0.03125,
        -0.578125, 0.40625, -0.828125, 0.40625, -1.015625, 0.21875},
       {0.71875, 1.09375, -0.921875, -0.671875, -1.234375, 1.65625, -0.46875, -0.375, -0.015625,
        0.53125, 1.28125, -0.890625},
       {-1.359375, 1.0625, -1.03125, 0.328125, -0.234375, -0.328125, -0.421875, 0.28125, 0.625,
        0.671875, 0.71875, -1.09375}},
      {{2, 2, 3},
       {3},
       {"UnsafeViewBackward0", "MvBackward0"},
       {2, 2},
       {-0.609375, -0.4375, 0.53125, 0.96875},
       {-0.046875, -0.375, 0.09375, 0.0625, 0.5, -0.125, -0.09375, -0.75, 0.1875, 0.015625, 0.125,
        -0.03125},
       {-0.359375, 0.0, 0.890625}},
      // Folded the other way: b^T is [2, 4, 3] -> [8, 3] mv a.
      {{3},
       {2, 3, 4},
       {"UnsafeViewBackward0", "MvBackward0"},
       {2, 4},
       {0.65625, 0.34375, 0.5625, 0.25, 0.625, 0.3125, -0.796875, 0.21875},
       {-0.046875, 1.09375, 0.640625},
       {-0.234375, 0.3125,  -0.46875,  0.078125, 0.234375, -0.3125,  0.46875,  -0.078125,
        -0.09375,  0.125,   -0.1875,   0.03125,  0.625,    -0.15625, 0.390625, -0.390625,
        -0.625,    0.15625, -0.390625, 0.390625, 0.25,     -0.0625,  0.15625,  -0.15625}},
      // (b^T a^T)^T: the result is transposed back and made contiguous.
      {{2, 3},
       {2, 3, 4},
       {"CloneBackward0", "TransposeBackward0", "UnsafeViewBackward0", "MmBackward0"},
       {2, 2, 4},
       {0.65625, 0.34375, 0.5625, 0.25, 0.515625, -1.40625, 0.65625, -1.265625, 0.625, 0.3125,
        -0.796875, 0.21875, 0.5625, -1.359375, 0.4375, -1.21875},
       {0.265625, 0.46875, -0.921875, -0.015625, -1.6875, 0.890625},
       {-1.234375, 0.5625,   -1.09375, 0.703125, 0.109375, -0.28125, 0.390625, 0.0,
        0.65625,   -0.0625,  0.28125,  -0.4375,  0.65625,  -1.0,     0.796875, 0.46875,
        -0.09375,  0.578125, 0.1875,   -0.46875, -0.3125,  0.03125,  -0.6875,  0.1875}},
      // Broadcast batch dims [2, 1] and [3] -> [2, 3]; bmm over 6 products.
      {{2, 1, 2, 3},
       {3, 3, 4},
       {"UnsafeViewBackward0", "BmmBackward0"},
       {2, 3, 2, 4},
       {0.65625,   0.34375, 0.5625,    0.25,      0.515625,  -1.40625,  0.65625,   -1.265625,
        0.625,     0.3125,  -0.796875, 0.21875,   0.5625,    -1.359375, 0.4375,    -1.21875,
        0.59375,   0.28125, -0.828125, 0.71875,   0.609375,  -1.3125,   0.484375,  0.421875,
        -0.953125, 0.03125, -0.578125, 0.40625,   -0.828125, 0.40625,   -1.015625, 0.21875,
        -0.828125, 0.15625, 0.34375,   0.53125,   -0.890625, 0.34375,   0.78125,   0.15625,
        -0.703125, 0.28125, 0.46875,   -1.203125, -0.953125, 0.28125,   0.71875,   -0.703125},
       {-0.65625, 0.421875, -0.890625, 1.078125, -2.25, 0.796875, 0.453125, 1.125, -2.1875,
        -0.46875, 0.3125, 1.359375},
       {-0.921875, 0.4375,    -0.59375, 0.765625, 0.53125,  -0.625,   0.34375,   -0.8125,
        0.921875,  -0.09375,  1.015625, 0.0,      0.65625,  -1.4375,  0.984375,  0.21875,
        -0.75,     1.015625,  0.921875, -0.5,     -0.03125, -0.78125, -0.734375, -0.15625,
        0.109375,  -0.921875, 0.4375,   -0.59375, -0.4375,  0.53125,  -0.625,    0.34375,
        -0.1875,   0.921875,  -0.09375, 1.015625}},
      {{2, 2, 3},
       {2, 3, 4},
       {"UnsafeViewBackward0", "BmmBackward0"},
       {2, 2, 4},
       {0.65625, 0.34375, 0.5625, 0.25, 0.515625, -1.40625, 0.65625, -1.265625, -0.828125, 0.15625,
        0.34375, 0.53125, -0.890625, 0.34375, 0.78125, 0.15625},
       {0.71875, 1.09375, -0.921875, -0.671875, -1.234375, 1.65625, -0.453125, -0.625, 0.0, 0.65625,
        -0.453125, -0.765625},
       {-1.234375, 0.5625,    -1.09375, 0.703125, 0.109375, -0.28125, 0.390625, 0.0,
        0.65625,   -0.0625,   0.28125,  -0.4375,  -0.125,   0.5,      0.0625,   -0.375,
        -0.34375,  -0.046875, -0.8125,  0.28125,  -0.03125, 0.734375, 0.4375,   -0.65625}},
  };
  return cases;
}

std::string case_name(const MatmulCase& c) { return shape_str(c.a) + " @ " + shape_str(c.b); }

TEST(LinalgMatmul, ValuesGradientsAndGradFnsMatchPyTorch) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    for (const MatmulCase& c : matmul_cases()) {
      SCOPED_TRACE(case_name(c) + " " + dtype_name(dtype));
      Tensor a = pattern(c.a, 1, dtype).requires_grad_();
      Tensor b = pattern(c.b, 2, dtype).requires_grad_();
      Tensor out = matmul(a, b);
      EXPECT_EQ(out.dtype(), dtype);
      expect_tensor(out, c.out_shape, c.out);
      EXPECT_EQ(grad_fn_chain(out, c.chain.size()), c.chain);
      out.backward(pattern(c.out_shape, 3, dtype));
      expect_tensor(a.grad(), c.a, c.grad_a);
      expect_tensor(b.grad(), c.b, c.grad_b);
      EXPECT_EQ(a.grad().dtype(), dtype);
    }
  }
}

TEST(LinalgMatmul, OnlyTheInputThatRequiresGradGetsOne) {
  Tensor a = pattern({2, 2, 3}, 1);
  Tensor b = pattern({3, 4}, 2).requires_grad_();
  Tensor out = matmul(a, b);
  EXPECT_EQ(grad_fn_chain(out, 2),
            (std::vector<std::string>{"UnsafeViewBackward0", "MmBackward0"}));
  out.backward(pattern({2, 2, 4}, 3));
  EXPECT_FALSE(a.grad().defined());
  expect_tensor(b.grad(), {3, 4},
                {-1.359375, 1.0625, -1.03125, 0.328125, -0.234375, -0.328125, -0.421875, 0.28125,
                 0.625, 0.671875, 0.71875, -1.09375});
}

TEST(LinalgMatmul, TransposedThreeDTimesMatrixGoesThroughBmm) {
  // PyTorch 1.13's should_fold: a [5, 2, 3] that is a permute(0, 2, 1) of a contiguous tensor
  // is multiplied with bmm rather than copied to fold it.
  //   y = torch.randn(5, 3, 2, requires_grad=True); (y.transpose(1, 2) @ b).grad_fn
  //   -> UnsafeViewBackward0 -> BmmBackward0
  Tensor y = pattern({5, 3, 2}, 1).requires_grad_();
  Tensor a = y.transpose(1, 2);
  Tensor b = pattern({3, 4}, 2).requires_grad_();
  Tensor out = matmul(a, b);
  EXPECT_EQ(grad_fn_chain(out, 2),
            (std::vector<std::string>{"UnsafeViewBackward0", "BmmBackward0"}));
  Tensor expected = matmul(a.contiguous(), b);  // folded; same numbers
  EXPECT_EQ(grad_fn_chain(expected, 2),
            (std::vector<std::string>{"UnsafeViewBackward0", "MmBackward0"}));
  EXPECT_TRUE(allclose(out, expected, 0, 1e-12));

  // The mirror case: 2-d @ a transposed 3-d, also through bmm.
  Tensor x = pattern({5, 4, 3}, 3).requires_grad_();
  Tensor out2 = matmul(pattern({2, 3}, 4), x.transpose(1, 2));
  EXPECT_EQ(grad_fn_chain(out2, 2),
            (std::vector<std::string>{"UnsafeViewBackward0", "BmmBackward0"}));
  EXPECT_TRUE(allclose(out2, matmul(pattern({2, 3}, 4), x.transpose(1, 2).contiguous()), 0, 1e-12));
}

TEST(LinalgMatmul, InPlaceOnABatchedResultIsAllowed) {
  // The book's causal attention: attn_scores = queries @ keys.transpose(1, 2), then
  // attn_scores.masked_fill_(mask, value). matmul's result is not a view, as in PyTorch.
  // a = P(2,3,2, seed=1); b = P(2,2,3, seed=2) (both requires_grad); s = a @ b
  // s.masked_fill_(torch.triu(torch.ones(3,3), diagonal=1).bool(), -5.0)
  // s.backward(P(2,3,3, seed=3)); print(s, a.grad, b.grad)
  Tensor a = pattern({2, 3, 2}, 1).requires_grad_();
  Tensor b = pattern({2, 2, 3}, 2).requires_grad_();
  Tensor s = matmul(a, b);
  EXPECT_FALSE(s.impl()->is_view);
  Tensor mask = triu(ones({3, 3}), 1).to_bool();
  s.masked_fill_(mask, -5.0);
  EXPECT_EQ(s.grad_fn()->name(), "MaskedFillBackward0");
  expect_tensor(s, {2, 3, 3},
                {-0.3125, -5.0, -5.0, -0.59375, 0.875, -5.0, 0.453125, -0.59375, 0.21875, 0.3125,
                 -5.0, -5.0, 0.875, 0.109375, -5.0, -0.6875, -0.25, 0.984375});
  s.backward(pattern({2, 3, 3}, 3));
  expect_tensor(a.grad(), {2, 3, 2},
                {-0.046875, -0.234375, 1.015625, -0.546875, -0.609375, 0.84375, 1.0, 0.5, 0.453125,
                 0.390625, -0.390625, 0.65625});
  expect_tensor(b.grad(), {2, 2, 3},
                {-0.28125, 0.328125, -0.03125, 0.578125, -1.46875, 0.1875, 0.9375, 0.4375,
                 -0.328125, -0.375, -0.328125, 0.140625});

  // The same holds for vector @ matrix (PyTorch squeezes mm's result in place).
  Tensor v = pattern({3}, 1).requires_grad_();
  Tensor row = matmul(v, pattern({3, 4}, 2));
  EXPECT_FALSE(row.impl()->is_view);
}

// A batched product with no rows or no columns is empty however big its batch: it must not copy
// the other operand over the batch (seen while analysing a fuzz_ops timeout: [4, 1, 2, 2] @
// [1, 2^22, 2, 0] took 15 s under ASan to give nothing, and the fuzzer can make batches of 2^32;
// with 2^40 below the copy asked for 64 TB and was an Error). Its gradients are zeros, as
// PyTorch's ([4, 1, 2, 2] @ [1, 3, 2, 0]: a.grad zeros, grad_fn UnsafeViewBackward0).
TEST(LinalgMatmul, BatchedProductWithNoRowsOrColumnsCopiesNothing) {
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

// ---------------------------------------------------------------------------------------------
// The primitives directly.

TEST(LinalgOps, MmBmmMvDotGradFnsAndGradients) {
  Tensor a = pattern({2, 3}, 1).requires_grad_();
  Tensor b = pattern({3, 4}, 2).requires_grad_();
  Tensor c = mm(a, b);
  EXPECT_EQ(c.grad_fn()->name(), "MmBackward0");
  // dA = dC B^T, dB = A^T dC, checked against the formulas with explicit products.
  Tensor g = pattern({2, 4}, 3);
  c.backward(g);
  EXPECT_TRUE(allclose(a.grad(), mm(g, b.detach().t()), 0, 1e-12));
  EXPECT_TRUE(allclose(b.grad(), mm(a.detach().t(), g), 0, 1e-12));

  Tensor a3 = pattern({2, 2, 3}, 1).requires_grad_();
  Tensor b3 = pattern({2, 3, 4}, 2).requires_grad_();
  Tensor c3 = bmm(a3, b3);
  EXPECT_EQ(c3.grad_fn()->name(), "BmmBackward0");
  c3.backward(pattern({2, 2, 4}, 3));
  // Same numbers as the batched matmul case ([2, 2, 3] @ [2, 3, 4]) above.
  expect_tensor(a3.grad(), {2, 2, 3},
                {0.71875, 1.09375, -0.921875, -0.671875, -1.234375, 1.65625, -0.453125, -0.625, 0.0,
                 0.65625, -0.453125, -0.765625});

  EXPECT_EQ(mv(a, pattern({3}, 2)).grad_fn()->name(), "MvBackward0");
  EXPECT_EQ(dot(pattern({3}, 1).requires_grad_(), pattern({3}, 2)).grad_fn()->name(),
            "DotBackward0");
}

TEST(LinalgOps, StridedOperandsNeedNoCopyAndGiveTheSameNumbers) {
  Tensor base = pattern({4, 6}, 1);
  Tensor b = pattern({3, 5}, 2);
  // Sliced: every other column of a 4 x 6 matrix is a 4 x 3 matrix with column stride 2.
  Tensor sliced = base.slice(1, 0, std::nullopt, 2);
  ASSERT_FALSE(sliced.is_contiguous());
  EXPECT_TRUE(allclose(mm(sliced, b), mm(sliced.contiguous(), b), 0, 1e-12));
  // Transposed on both sides.
  Tensor at = pattern({3, 4}, 3).t(), bt = pattern({5, 3}, 4).t();
  EXPECT_TRUE(allclose(mm(at, bt), mm(at.contiguous(), bt.contiguous()), 0, 1e-12));
  // Expanded: a stride-0 column (every column of B the same vector).
  Tensor column = pattern({3, 1}, 5).expand({3, 4});
  EXPECT_TRUE(allclose(mm(at, column), mm(at, column.contiguous()), 0, 1e-12));
  // A batch-broadcast operand (batch stride 0) in bmm, transposed too.
  Tensor shared = pattern({4, 3}, 6).t().unsqueeze(0).expand({2, 3, 4});
  Tensor lhs = pattern({2, 5, 3}, 7);
  EXPECT_TRUE(allclose(bmm(lhs, shared), bmm(lhs, shared.contiguous()), 0, 1e-12));
  // A sliced vector (stride 2) in mv and dot.
  Tensor v = pattern({6}, 8).slice(0, 0, std::nullopt, 2);
  EXPECT_TRUE(allclose(mv(b.t(), v), mv(b.t().contiguous(), v.contiguous()), 0, 1e-12));
  EXPECT_NEAR(dot(v, v).item(), dot(v.contiguous(), v.contiguous()).item(), 1e-12);
}

TEST(LinalgOps, GradientsThroughAnExpandedOperandAreSummed) {
  // x = P(1,2,3, seed=1) expanded to [4, 2, 3] and multiplied by P(4,3,2, seed=2):
  // x.grad = sum over the batch of dC[i] B[i]^T.
  Tensor x = pattern({1, 2, 3}, 1).requires_grad_();
  Tensor b = pattern({4, 3, 2}, 2);
  Tensor out = matmul(x.expand({4, 2, 3}), b);
  Tensor g = pattern({4, 2, 2}, 3);
  out.backward(g);
  Tensor expected = zeros({2, 3}, DType::Float64);
  for (int64_t i = 0; i < 4; ++i) expected = expected + mm(g[i], b[i].t());
  EXPECT_TRUE(allclose(x.grad(), expected.unsqueeze(0), 0, 1e-12));
}

TEST(LinalgOps, EmptyDimensions) {
  // K = 0: a sum over nothing, so zeros (torch.randn(2, 0) @ torch.randn(0, 3) is zeros).
  Tensor a = zeros({2, 0}).requires_grad_();
  Tensor b = zeros({0, 3}).requires_grad_();
  Tensor c = mm(a, b);
  expect_tensor(c, {2, 3}, std::vector<double>(6, 0.0));
  c.backward(ones({2, 3}));
  EXPECT_EQ(a.grad().shape(), (Shape{2, 0}));
  EXPECT_EQ(b.grad().shape(), (Shape{0, 3}));
  expect_tensor(matmul(ones({4, 2, 0}), ones({0, 5})), {4, 2, 5}, std::vector<double>(40, 0.0));
  EXPECT_EQ(dot(ones({0}), ones({0})).item(), 0.0);
  // M = 0, batch = 0, N = 0.
  EXPECT_EQ(mm(ones({0, 3}), ones({3, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(bmm(ones({0, 2, 3}), ones({0, 3, 4})).shape(), (Shape{0, 2, 4}));
  // [3, 5, 0] @ [0, 0] folds with a 0-wide row (torch gives shape [3, 5, 0]).
  EXPECT_EQ(matmul(ones({3, 5, 0}), ones({0, 0})).shape(), (Shape{3, 5, 0}));
}

// A depth held in one element (an operand expanded with stride 0) is still K multiply-adds per
// element of the product, which run for as long as they take. The skinny path (M <= 16) packed
// all of A's K columns at once: at K = 2^60 the size of that workspace overflowed and the packing
// wrote past it (a segfault in dot and mv); at K = 2^40 it asked for 32 TB (std::bad_alloc). Such
// a product takes the blocked path, which packs blocks of K. The child process computes for a
// second without crashing, then its alarm ends it.
TEST(LinalgOps, AnExpandedOperandOfHugeDepthComputesWithoutCrashing) {
  // The child re-runs the program up to this test (OpenMP's threads do not survive a fork).
  struct Style {
    std::string saved = ::testing::FLAGS_gtest_death_test_style;
    Style() { ::testing::FLAGS_gtest_death_test_style = "threadsafe"; }
    ~Style() { ::testing::FLAGS_gtest_death_test_style = saved; }
  } style;
  const int64_t depth = int64_t{1} << 60;
  const Tensor x = ones({1}).expand({depth});
  EXPECT_EXIT(
      {
        alarm(1);
        dot(x, x);
      },
      ::testing::KilledBySignal(SIGALRM), "");
  const Tensor a = ones({1, 1}).expand({3, depth});
  EXPECT_EXIT(
      {
        alarm(1);
        mv(a, x);
      },
      ::testing::KilledBySignal(SIGALRM), "");
  // M * N * K = 2^66: past int64 in the choice of path (UB; the asan build's UBSan stops there).
  const int64_t deeper = int64_t{1} << 62;
  EXPECT_EXIT(
      {
        alarm(1);
        mm(ones({1, 1}).expand({4, deeper}), ones({1, 1}).expand({deeper, 4}));
      },
      ::testing::KilledBySignal(SIGALRM), "");
}

TEST(LinalgOps, Int64Products) {
  // torch.tensor([[1, 2]]) @ torch.tensor([[3], [4]]) == tensor([[11]])
  Tensor c = matmul(tensor({{1, 2}}, DType::Int64), tensor({{3}, {4}}, DType::Int64));
  EXPECT_EQ(c.dtype(), DType::Int64);
  EXPECT_EQ(c.item<int64_t>(), 11);
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(LinalgErrors, MessagesNameTheOpShapesAndDtypes) {
  EXPECT_EQ(error_of([] {
              matmul(ones({2, 3}), ones({4, 2}));
            }),
            "matmul: shapes [2, 3] and [4, 2] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { matmul(ones({3}), ones({4})); }),
            "matmul: shapes [3] and [4] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] {
              matmul(ones({5, 2, 3}), ones({2, 4}));
            }),
            "matmul: shapes [5, 2, 3] and [2, 4] cannot be multiplied (3 != 2)");
  EXPECT_EQ(error_of([] {
              matmul(ones({2, 2, 3}), ones({3, 3, 4}));
            }),
            "matmul: shapes [2, 2, 3] and [3, 3, 4] cannot be multiplied (batch dimensions [2] "
            "and [3] cannot be broadcast)");
  EXPECT_EQ(error_of([] { matmul(scalar_tensor(1.0), ones({3})); }),
            "matmul: both arguments need at least 1 dimension, got shapes [] and [3]");
  EXPECT_EQ(error_of([] {
              matmul(ones({2, 3}), ones({3, 2}, DType::Float64));
            }),
            "matmul: expected both arguments to have the same dtype, got float32 and float64");
  EXPECT_EQ(error_of([] {
              dot(ones({2, 3}), ones({3}));
            }),
            "dot: expected 1-D tensors, got shapes [2, 3] and [3]");
  EXPECT_EQ(error_of([] { dot(ones({3}), ones({4})); }),
            "dot: shapes [3] and [4] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] {
              mv(ones({2, 3}), ones({2}));
            }),
            "mv: shapes [2, 3] and [2] cannot be multiplied (3 != 2)");
  EXPECT_EQ(error_of([] { mv(ones({3}), ones({3})); }),
            "mv: expected a 2-D and a 1-D tensor, got shapes [3] and [3]");
  EXPECT_EQ(error_of([] {
              mm(ones({2, 3, 1}), ones({3, 2}));
            }),
            "mm: expected 2-D tensors, got shapes [2, 3, 1] and [3, 2]");
  EXPECT_EQ(error_of([] {
              mm(ones({2, 3}, DType::Float64), ones({3, 2}));
            }),
            "mm: expected both arguments to have the same dtype, got float64 and float32");
  EXPECT_EQ(error_of([] {
              mm(ones({1, 1}, DType::Bool), ones({1, 1}, DType::Bool));
            }),
            "mm: not implemented for bool tensors (shapes [1, 1] and [1, 1])");
  EXPECT_EQ(error_of([] {
              bmm(ones({2, 2, 3}), ones({3, 3, 4}));
            }),
            "bmm: shapes [2, 2, 3] and [3, 3, 4] have different batch sizes (2 != 3)");
  EXPECT_EQ(error_of([] {
              bmm(ones({2, 2, 3}), ones({2, 4, 4}));
            }),
            "bmm: shapes [2, 2, 3] and [2, 4, 4] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] {
              bmm(ones({2, 3}), ones({3, 4}));
            }),
            "bmm: expected 3-D tensors, got shapes [2, 3] and [3, 4]");
}

}  // namespace
}  // namespace ember
