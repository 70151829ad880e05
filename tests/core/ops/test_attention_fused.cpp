// The fused causal attention (core/ops/attention.h, kernels in core/kernels/attention.cpp)
// against the chapter's composite (matmul, masked_fill_, softmax, dropout, matmul): the same
// output and the same gradients of q, k and v (float32 to 1e-5 relative, float64 to 1e-10),
// without and with dropout (the same mask from the same generator), over several query blocks
// (T > 64) and T not a multiple of 4; a float64 gradcheck; errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/base/generator.h"
#include "core/base/grad_mode.h"
#include "core/base/parallel.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/tensor/random.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;

// The chapter's lines (nn/attention.cpp, MultiHeadAttention::forward).
Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, double p, Generator* gen) {
  const int64_t n = q.size(2);
  Tensor s = matmul(q, k.transpose(2, 3));
  s.masked_fill_(triu(ones({n, n}), 1).to_bool(), -INFINITY);
  Tensor w = softmax(s / std::sqrt(static_cast<double>(q.size(3))), -1);
  w = dropout(w, p, /*training=*/p > 0, gen);
  return matmul(w, v);
}

// q, k, v as MultiHeadAttention makes them: heads of [b, T, h * d] projections, transposed.
struct Qkv {
  Tensor q, k, v;
};
Qkv make_inputs(int64_t b, int64_t h, int64_t n, int64_t d, DType dtype) {
  Generator gen(7);
  auto heads = [&] { return randn({b, n, h, d}, dtype, &gen).requires_grad_(true); };
  return {heads(), heads(), heads()};
}

struct Outcome {
  Tensor out, dq, dk, dv;
};

Outcome run(bool fused, const Qkv& leaves, double p, const Tensor& upstream,
            bool create_graph = false) {
  for (Tensor t : {leaves.q, leaves.k, leaves.v}) t.set_grad(Tensor());
  const Tensor q = leaves.q.transpose(1, 2), k = leaves.k.transpose(1, 2),
               v = leaves.v.transpose(1, 2);
  Generator gen(123);
  Tensor out =
      fused ? causal_attention(q, k, v, p, /*training=*/p > 0, &gen) : composite(q, k, v, p, &gen);
  (out * upstream).sum().backward(Tensor(), std::nullopt, create_graph);
  return {out.detach(), leaves.q.grad(), leaves.k.grad(), leaves.v.grad()};
}

// |a - b| <= rtol * |b| + rtol * max|b| elementwise (relative, with a floor for values near 0).
void expect_close(const Tensor& a, const Tensor& b, double rtol, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double scale = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  int64_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double err = std::abs(x[i] - y[i]);
    worst = std::max(worst, err / (std::abs(y[i]) + scale));
    bad += !(err <= rtol * (std::abs(y[i]) + scale));
  }
  EXPECT_EQ(bad, 0) << what << ": worst relative error " << worst;
}

void expect_fused_equals_composite(int64_t b, int64_t h, int64_t n, int64_t d, DType dtype,
                                   double p, double rtol) {
  SCOPED_TRACE(::testing::Message() << "b=" << b << " h=" << h << " T=" << n << " d=" << d << " "
                                    << dtype_name(dtype) << " p=" << p);
  const Qkv leaves = make_inputs(b, h, n, d, dtype);
  Generator g(99);
  const Tensor upstream = randn({b, h, n, d}, dtype, &g);
  const Outcome fused = run(true, leaves, p, upstream);
  const Outcome reference = run(false, leaves, p, upstream);
  expect_close(fused.out, reference.out, rtol, "output");
  expect_close(fused.dq, reference.dq, rtol, "grad q");
  expect_close(fused.dk, reference.dk, rtol, "grad k");
  expect_close(fused.dv, reference.dv, rtol, "grad v");
  // The forward runs the composite's operations in its order: the same bits.
  EXPECT_EQ(test::values(fused.out), test::values(reference.out));
}

TEST(FusedAttention, Float32EqualsComposite) {
  expect_fused_equals_composite(2, 3, 70, 5, DType::Float32, 0.0, 1e-5);
  expect_fused_equals_composite(1, 2, 6, 4, DType::Float32, 0.0, 1e-5);
  expect_fused_equals_composite(1, 2, 133, 16, DType::Float32, 0.0, 1e-5);
}

TEST(FusedAttention, Float64EqualsComposite) {
  expect_fused_equals_composite(2, 3, 70, 5, DType::Float64, 0.0, 1e-10);
  expect_fused_equals_composite(1, 1, 1, 3, DType::Float64, 0.0, 1e-10);
}

TEST(FusedAttention, WithDropoutEqualsComposite) {
  expect_fused_equals_composite(2, 3, 70, 5, DType::Float32, 0.5, 1e-5);
  expect_fused_equals_composite(1, 2, 67, 8, DType::Float64, 0.1, 1e-10);
  expect_fused_equals_composite(1, 2, 9, 8, DType::Float64, 1.0, 1e-10);
}

TEST(FusedAttention, SameResultsAtOneAndTwoThreads) {
  const int saved = get_num_threads();
  const Qkv leaves = make_inputs(1, 2, 150, 32, DType::Float32);
  Generator g(5);
  const Tensor upstream = randn({1, 2, 150, 32}, DType::Float32, &g);
  set_num_threads(1);
  const Outcome one = run(true, leaves, 0.0, upstream);
  set_num_threads(2);
  const Outcome two = run(true, leaves, 0.0, upstream);
  set_num_threads(saved);
  EXPECT_EQ(test::values(one.out), test::values(two.out));
  EXPECT_EQ(test::values(one.dq), test::values(two.dq));
  EXPECT_EQ(test::values(one.dk), test::values(two.dk));
  EXPECT_EQ(test::values(one.dv), test::values(two.dv));
}

TEST(FusedAttention, Gradcheck) {
  const Qkv leaves = make_inputs(1, 2, 5, 3, DType::Float64);
  auto fn = [](const std::vector<Tensor>& x) {
    return causal_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2));
  };
  const autograd::GradcheckResult result = autograd::gradcheck(
      fn, {leaves.q.detach().requires_grad_(true), leaves.k.detach().requires_grad_(true),
           leaves.v.detach().requires_grad_(true)});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(FusedAttention, GradcheckWithDropout) {
  const Qkv leaves = make_inputs(1, 1, 6, 2, DType::Float64);
  auto fn = [](const std::vector<Tensor>& x) {
    Generator gen(3);  // the same mask at every call
    return causal_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2), 0.3,
                            true, &gen);
  };
  const autograd::GradcheckResult result = autograd::gradcheck(
      fn, {leaves.q.detach().requires_grad_(true), leaves.k.detach().requires_grad_(true),
           leaves.v.detach().requires_grad_(true)});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(FusedAttention, Errors) {
  const Tensor q = zeros({1, 2, 3, 4}), k = zeros({1, 2, 3, 4});
  std::string m = error_of([&] { causal_attention(q, k, zeros({1, 2, 3, 5})); });
  EXPECT_NE(m.find("causal_attention"), std::string::npos) << m;
  EXPECT_NE(m.find("[1, 2, 3, 5]"), std::string::npos) << m;
  m = error_of([&] { causal_attention(zeros({2, 3, 4}), zeros({2, 3, 4}), zeros({2, 3, 4})); });
  EXPECT_NE(m.find("[batch, heads, tokens, head_dim]"), std::string::npos) << m;
  m = error_of([&] { causal_attention(q, k, zeros({1, 2, 3, 4}, DType::Float64)); });
  EXPECT_NE(m.find("float64"), std::string::npos) << m;
  m = error_of([&] { causal_attention(q, k, k, 1.5, true); });
  EXPECT_NE(m.find("1.5"), std::string::npos) << m;
}

// ---- queries fewer than keys: a KV cache's new rows ----

// make_inputs' tensors as heads: [b, h, T, d].
Qkv as_heads(const Qkv& in) {
  return {in.q.transpose(1, 2), in.k.transpose(1, 2), in.v.transpose(1, 2)};
}

// Rows [t, t + c) of the attention of a sequence of n_k = t + c tokens, computed from their
// queries alone with all n_k keys and values.
Tensor cached_rows(const Qkv& heads, int64_t t, int64_t c) {
  return causal_attention(heads.q.narrow(2, t, c), heads.k.narrow(2, 0, t + c),
                          heads.v.narrow(2, 0, t + c));
}

// The bit patterns of t's elements in its own dtype (float32 or float64), row-major.
std::vector<uint64_t> own_bits(const Tensor& t) {
  std::vector<uint64_t> out;
  if (t.dtype() == DType::Float64) {
    for (double v : t.to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  } else {
    for (float v : t.to_vector<float>()) out.push_back(std::bit_cast<uint32_t>(v));
  }
  return out;
}

// A cache's few new rows (c <= 8) read K and V in place, more are packed: the same bits.
TEST(FusedAttention, CachedRowsAreTheRowsOfTheWholeSequenceBitForBit) {
  NoGradGuard no_grad;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t n : {5, 8, 9, 60, 130}) {
      const Qkv in = as_heads(make_inputs(2, 3, n, 64, dtype));
      const Tensor whole = causal_attention(in.q, in.k, in.v);
      for (int64_t t = 0; t < n; t += (t < 10 ? 1 : 17)) {
        for (int64_t c : {1, 3, 8, 9, 50}) {
          if (t + c > n) continue;
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dtype) << " n=" << n << " t=" << t << " c=" << c);
          const int64_t n_k = t + c;
          const std::vector<uint64_t> rows = own_bits(cached_rows(in, t, c));
          // The same rows of the attention over the first n_k tokens: always the same bits.
          const Tensor prefix = causal_attention(in.q.narrow(2, 0, n_k), in.k.narrow(2, 0, n_k),
                                                 in.v.narrow(2, 0, n_k));
          EXPECT_EQ(rows, own_bits(prefix.narrow(2, t, c)));
          // And those of the whole sequence's attention, when both sequences have at least 8
          // tokens or both fewer: the softmax adds a row's weights in eight lanes or in order
          // (vec_lane_sum, core/kernels/reduce_kernels.h, PyTorch's orders), chosen by the
          // row's length.
          if ((n_k >= 8) == (n >= 8)) {
            EXPECT_EQ(rows, own_bits(whole.narrow(2, t, c)));
          }
        }
      }
    }
  }
}

// The composite's W V multiplies every row of weights by all of V: a masked weight is 0, and
// 0 * inf or 0 * nan is nan, so an inf or a nan at V[j, c] makes column c of the rows before j
// nan. The fused forward's product for a block of 48 query rows stops at the block's last key,
// so the block takes in the later keys' non-finite terms itself: otherwise the rows of a block
// that ends before j would be finite and the others nan, a row's value would depend on the
// blocks, and a KV cache's rows would differ from the whole sequence's.
TEST(FusedAttention, ANonFiniteValueMakesTheEarlierRowsNanAsInTheComposite) {
  NoGradGuard no_grad;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Qkv in = as_heads(make_inputs(1, 2, 60, 4, dtype));
    in.v = in.v.clone();
    in.v.set({0, 0, 57, 1}, INFINITY);   // past the first block's keys
    in.v.set({0, 1, 49, 2}, NAN);        // just past them
    in.v.set({0, 1, 10, 3}, -INFINITY);  // inside the first block
    const Tensor fused = causal_attention(in.q, in.k, in.v);
    const Tensor expected = composite(in.q, in.k, in.v, 0.0, nullptr);
    const std::vector<double> x = fused.to_vector<double>(), y = expected.to_vector<double>();
    ASSERT_EQ(x.size(), y.size());
    int64_t nans = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      nans += std::isnan(y[i]);
      EXPECT_TRUE(std::isnan(x[i]) ? std::isnan(y[i]) : x[i] == y[i])
          << "element " << i << ": " << x[i] << ", the composite's " << y[i];
    }
    EXPECT_EQ(nans, 57 + 60 + 10);  // the rows before each value; all rows under the nan
    // A KV cache's last rows (one block, every key) are the whole sequence's.
    const Tensor cached = causal_attention(in.q.narrow(2, 46, 14), in.k, in.v);
    const std::vector<double> rows = cached.to_vector<double>(),
                              whole = fused.narrow(2, 46, 14).to_vector<double>();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_TRUE(std::isnan(rows[i]) ? std::isnan(whole[i]) : rows[i] == whole[i])
          << "element " << i << ": " << rows[i] << ", the whole sequence's " << whole[i];
    }
  }
}

// The same for the gradients: the composite's products and its softmax backward run over the
// masked half too, where 0 * inf is nan. An inf in V after row i makes D_i = sum_j dW_ij W_ij
// nan (dW_ij = dO_i . V_j for a masked j), so dQ_i and the dK_j for j <= i; one in dO, Q or K
// reaches dV, dK or dQ through the masked zeros of W~ and dS; and a row whose scores hold an inf
// has nan weights, the masked ones too. The fused backward, which skips the masked half, takes
// in those terms: the composite's nans, the same values elsewhere. The op's backward of formulas
// (create_graph) keeps D_i's nan off the masked half of dS, which the composite's masked_fill_
// zeroes, so dK is finite where the composite's is.
TEST(FusedAttention, NonFiniteValuesGiveTheCompositesNanGradients) {
  struct Case {
    int which;  // 0: q, 1: k, 2: v, 3: the upstream gradient dO
    int64_t head, row, col;
    double value;
  };
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case c :
         {Case{2, 0, 57, 1, INFINITY}, Case{2, 1, 20, 2, NAN}, Case{3, 1, 1, 3, -INFINITY},
          Case{1, 0, 55, 0, INFINITY}, Case{0, 1, 1, 2, INFINITY}, Case{0, 0, 30, 1, NAN}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " input " << c.which << " head "
                                        << c.head << " row " << c.row << " = " << c.value);
      Generator gen(11);
      std::vector<Tensor> t;  // q, k, v as [b, T, h, d] leaves, and dO as [b, h, T, d]
      for (int i = 0; i < 4; ++i) t.push_back(randn({1, 60, 2, 4}, dtype, &gen));
      t[3] = t[3].transpose(1, 2).contiguous();
      const std::vector<int64_t> at = c.which == 3 ? std::vector<int64_t>{0, c.head, c.row, c.col}
                                                   : std::vector<int64_t>{0, c.row, c.head, c.col};
      t[c.which].set(at, c.value);
      const Qkv leaves{t[0].requires_grad_(true), t[1].requires_grad_(true),
                       t[2].requires_grad_(true)};
      for (bool create_graph : {false, true}) {
        const Outcome fused = run(true, leaves, 0.0, t[3], create_graph);
        const Outcome reference = run(false, leaves, 0.0, t[3], create_graph);
        const Tensor got[] = {fused.out, fused.dq, fused.dk, fused.dv};
        const Tensor expected[] = {reference.out, reference.dq, reference.dk, reference.dv};
        const char* const names[] = {"out", "dq", "dk", "dv"};
        for (int w = 0; w < 4; ++w) {
          const std::vector<double> x = got[w].to_vector<double>(),
                                    y = expected[w].to_vector<double>();
          ASSERT_EQ(x.size(), y.size());
          int64_t mismatches = 0;
          for (std::size_t i = 0; i < x.size(); ++i) {
            mismatches += std::isnan(x[i]) != std::isnan(y[i]) ||
                          (!std::isnan(y[i]) && x[i] != y[i] &&
                           !(std::abs(x[i] - y[i]) <= 1e-4 * (1 + std::abs(y[i]))));
          }
          EXPECT_EQ(mismatches, 0) << "in " << names[w] << (create_graph ? " (create_graph)" : "");
        }
      }
    }
  }
}

// A KV cache's keys and values expanded to more rows than memory holds (stride 0: one row
// stored) need scratch of their length, whose size passes int64 at 2^60 rows. A size past memory
// and a failed allocation are both an Error naming causal_attention and its inputs' shapes, never
// a write past a small buffer.
TEST(FusedAttention, AKvCacheLongerThanMemoryHoldsIsAnError) {
  NoGradGuard no_grad;
  const Tensor q = ones({1, 1, 1, 4});
  for (int shift : {40, 60, 62}) {
    SCOPED_TRACE(::testing::Message() << "2^" << shift << " rows");
    const Tensor k = ones({1, 1, 1, 4}).expand({1, 1, int64_t{1} << shift, 4});
    std::string m;
    try {
      causal_attention(q, k, k);
    } catch (const Error& e) {
      m = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an ember::Error: " << e.what();
    }
    EXPECT_TRUE(
        m.starts_with("causal_attention: not enough memory (causal_attention of inputs "
                      "of shapes [1, 1, 1, 4], [1, 1, " +
                      std::to_string(int64_t{1} << shift) + ", 4]"))
        << m;
  }
}

// An empty q (head_dim 0) whose other sizes multiply past int64: whether dropout draws a noise
// must not be decided on that product (UB; the asan build's UBSan stops there). The noise, as the
// composite's weights, has more elements than int64 counts: the storage's Error.
TEST(FusedAttention, DropoutOnSizesPastInt64IsAnError) {
  const Tensor q = zeros({1, 1, 1, 1}).expand({int64_t{1} << 33, (int64_t{1} << 31) + 1, 1, 0});
  Generator gen(1);
  EXPECT_EQ(error_of([&] { causal_attention(q, q, q, 0.5, /*training=*/true, &gen); }),
            "empty: Storage size calculation overflowed with sizes=[8589934592, 2147483649, 1, 1] "
            "and itemsize=4");
}

TEST(FusedAttention, CachedRowsAreForwardOnly) {
  const Qkv in = as_heads(make_inputs(1, 2, 6, 4, DType::Float32));  // requiring grad
  std::string m = error_of([&] { cached_rows(in, 4, 2); });
  EXPECT_NE(m.find("(6 and 2, a KV cache) it runs forward only"), std::string::npos) << m;
  NoGradGuard no_grad;
  m = error_of([&] { causal_attention(in.q.narrow(2, 4, 2), in.k, in.v, 0.1, true); });
  EXPECT_NE(m.find("forward only"), std::string::npos) << m;
  m = error_of([&] { causal_attention(in.q, in.k.narrow(2, 0, 5), in.v.narrow(2, 0, 5)); });
  EXPECT_NE(m.find("KV cache"), std::string::npos) << m;  // fewer keys than queries
}

}  // namespace
}  // namespace ember
