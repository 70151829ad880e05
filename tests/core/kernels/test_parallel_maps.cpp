// Elementwise maps (kernels::unary_map / binary_map, under every unary and binary op, .to() and
// .contiguous()) and reductions (sums in PyTorch's cascade, mean, var, max, softmax) split large
// jobs over get_num_threads() threads: both threads do work, every layout (flat, a broadcast
// scalar, strided rows, a transposed input's tiles; reduced dims inner, outer or strided) gives
// the same bits at 1 and 2 threads, and an Error thrown inside a map reaches the caller with the
// message a single thread gives (the first bad element's).
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/kernels/iterate.h"
#include "core/ops/nn_ops.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.contiguous().to(DType::Float64).to_vector<double>())
    out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

// run() at 1 and then 2 threads: every case's bits equal.
template <typename Run>
void expect_same_at_one_and_two_threads(Run&& run) {
  set_num_threads(1);
  const std::vector<std::vector<uint64_t>> one = run();
  set_num_threads(2);
  const std::vector<std::vector<uint64_t>> two = run();
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], two[i]) << "case " << i;
}

TEST(ParallelMaps, LargeMapsRunOnBothThreadsSmallOnesOnOne) {
  ThreadsGuard guard;
  set_num_threads(2);
  for (int64_t n : {int64_t{100}, kernels::kParallelElements - 1, kernels::kParallelElements,
                    int64_t{300000}}) {
    std::vector<float> in(static_cast<std::size_t>(n), 1.0f);
    std::vector<int> who(in.size(), -1);
    const Shape shape{n};
    const Shape strides{1};
    // Each element records the thread that computed it.
    kernels::unary_map(who.data(), in.data(), shape, strides,
                       [](float) { return omp_get_thread_num(); });
    const std::set<int> threads(who.begin(), who.end());
    if (n >= kernels::kParallelElements) {
      EXPECT_EQ(threads, (std::set<int>{0, 1})) << n;
    } else {
      EXPECT_EQ(threads, (std::set<int>{0})) << n;
    }
  }
}

TEST(ParallelMaps, EveryLayoutGivesTheSameBitsAtOneAndTwoThreads) {
  ThreadsGuard guard;
  manual_seed(3);
  const Tensor a = randn({300, 301});  // 90300 elements: past kParallelElements
  const Tensor row = randn({301});
  const Tensor col = randn({300, 1});
  auto run = [&] {
    std::vector<std::vector<uint64_t>> r;
    r.push_back(bits(exp(a)));              // unary, flat
    r.push_back(bits(a * a + 1.5));         // binary flat, then a scalar
    r.push_back(bits(2.0 - a));             // scalar first
    r.push_back(bits(a / row));             // a row broadcast: strided rows
    r.push_back(bits(a - col));             // a column broadcast
    r.push_back(bits(a.t().contiguous()));  // a transposed input: tiles
    r.push_back(bits(sigmoid(a.t())));      // the same through an op
    r.push_back(bits(a.index({Slice(), Slice(None, None, 2)}).contiguous()));  // strided
    r.push_back(bits(a.to(DType::Float64)));                                   // a conversion
    r.push_back(bits(a.t().to(DType::Float64) * 3.0));
    Tensor dst = empty({301, 300}, DType::Float64);
    dst.copy_(a.t());  // copy_ into a contiguous destination: rows shared out
    r.push_back(bits(dst));
    return r;
  };
  expect_same_at_one_and_two_threads(run);
  // and the values themselves, for two of them
  const std::vector<float> x = a.to_vector<float>(), y = exp(a).to_vector<float>();
  for (std::size_t i = 0; i < x.size(); i += 997) EXPECT_EQ(y[i], std::exp(x[i])) << i;
  const std::vector<float> t = a.t().contiguous().to_vector<float>();
  for (int64_t i = 0; i < 301; i += 7)
    for (int64_t j = 0; j < 300; j += 11) EXPECT_EQ(t[i * 300 + j], x[j * 301 + i]);
}

TEST(ParallelMaps, ReductionsGiveTheSameBitsAtOneAndTwoThreads) {
  ThreadsGuard guard;
  manual_seed(4);
  const Tensor a = randn({300, 301}), b = randn({5, 300, 70});  // 90300 and 105000 elements
  auto run = [&] {
    std::vector<std::vector<uint64_t>> r;
    r.push_back(bits(sum(a, {0})));      // down the rows: groups of 4 vectors of columns + tail
    r.push_back(bits(sum(a, {1})));      // along each row
    r.push_back(bits(sum(a.t(), {0})));  // a transposed input
    r.push_back(bits(sum(a.t(), {1})));
    r.push_back(bits(sum(b, {1})));  // a middle dim
    r.push_back(bits(sum(b, {0, 2})));
    r.push_back(bits(sum(a)));  // everything: one output
    r.push_back(bits(mean(b, {2})));
    r.push_back(bits(var(a, int64_t{1})));
    r.push_back(bits(var(b, int64_t{1})));  // reduced dim in the middle: outer x inner
    r.push_back(bits(max(a, 1).values));
    r.push_back(bits(max(b, 1).indices));
    r.push_back(bits(softmax(a, 1)));
    r.push_back(bits(softmax(b, 1)));  // rows with a stride
    r.push_back(bits(log_softmax(a, 0)));
    return r;
  };
  expect_same_at_one_and_two_threads(run);
  // and the values: column sums against a double-precision loop
  const std::vector<float> x = a.to_vector<float>(), sums = sum(a, {0}).to_vector<float>();
  for (int64_t j = 0; j < 301; ++j) {
    double exact = 0;
    for (int64_t i = 0; i < 300; ++i) exact += x[i * 301 + j];
    EXPECT_NEAR(sums[j], exact, 1e-4) << j;
  }
}

TEST(ParallelMaps, LayerNormAndEmbeddingGiveTheSameBitsAtOneAndTwoThreads) {
  ThreadsGuard guard;
  auto run = [] {
    manual_seed(5);
    const Tensor x = randn({300, 301}).requires_grad_();
    const Tensor w = randn({301}).requires_grad_(), b = randn({301}).requires_grad_();
    const Tensor table = randn({1000, 128}).requires_grad_();
    std::vector<double> ids;
    for (int i = 0; i < 700; ++i) ids.push_back((i * 37) % 50);  // repeated rows: summed grads
    const Tensor indices = from_vector(ids, {700}, DType::Int64);
    const Tensor y = layer_norm(x, {301}, w, b), e = embedding(table, indices);
    (y * y).sum().backward();
    (e * e * e).sum().backward();
    return std::vector<std::vector<uint64_t>>{bits(y),        bits(x.grad()), bits(w.grad()),
                                              bits(b.grad()), bits(e),        bits(table.grad())};
  };
  expect_same_at_one_and_two_threads(run);
}

TEST(ParallelMaps, AnErrorInsideAMapIsTheFirstBadElementsAtAnyThreadCount) {
  ThreadsGuard guard;
  Tensor a = zeros({200000});
  a.data_ptr<float>()[150000] = std::numeric_limits<float>::quiet_NaN();  // second thread's half
  a.data_ptr<float>()[120000] = std::numeric_limits<float>::infinity();   // first bad element
  std::string messages[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    messages[threads - 1] = test::error_of([&] { (void)a.to(DType::Int64); });
    EXPECT_NE(messages[threads - 1].find("inf cannot be converted to type int64"),
              std::string::npos)
        << messages[threads - 1];
  }
  EXPECT_EQ(messages[0], messages[1]);
}

}  // namespace
}  // namespace ember
