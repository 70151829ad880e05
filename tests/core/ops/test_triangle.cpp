// triu / tril: values, and their gradient (the same triangle of the incoming gradient).
#include <gtest/gtest.h>

#include "core/autograd/gradcheck.h"
#include "core/ember.h"

namespace ember {
namespace {

TEST(Triangle, KeepsTheTriangleAndItsGradient) {
  // torch.triu(torch.arange(1., 10.).view(3, 3), diagonal=1)
  Tensor x = arange(1.0, 10.0, 1.0, DType::Float32).view({3, 3});
  EXPECT_TRUE(equal(triu(x, 1), tensor({{0, 2, 3}, {0, 0, 6}, {0, 0, 0}})));
  EXPECT_TRUE(equal(tril(x, -1), tensor({{0, 0, 0}, {4, 0, 0}, {7, 8, 0}})));

  Tensor w = ones({2, 3}).requires_grad_();
  Tensor y = triu(w);
  EXPECT_EQ(y.grad_fn()->name(), "TriuBackward0");
  y.backward(full({2, 3}, 2.0));
  // torch: w.grad == [[2, 2, 2], [0, 2, 2]]
  EXPECT_TRUE(equal(w.grad(), tensor({{2, 2, 2}, {0, 2, 2}})));
  EXPECT_EQ(tril(w, 0).grad_fn()->name(), "TrilBackward0");
}

TEST(Triangle, PassesGradcheckOnBatchesAndDiagonals) {
  manual_seed(3);
  Tensor x = randn({2, 3, 4}, DType::Float64).requires_grad_();
  for (int64_t diagonal : {-1, 0, 2}) {
    auto up = autograd::gradcheck(
        [&](const std::vector<Tensor>& in) { return triu(in[0], diagonal); }, {x});
    EXPECT_TRUE(up.ok) << up.report;
    auto low = autograd::gradcheck(
        [&](const std::vector<Tensor>& in) { return tril(in[0].transpose(1, 2), diagonal); }, {x});
    EXPECT_TRUE(low.ok) << low.report;
  }
}

}  // namespace
}  // namespace ember
