// The optimizers' and clip_grad's parallel loops over many tensors at once (Adam/AdamW's fused
// step, clip_grad_norm_, clip_grad_value_), on two threads: tensors that share memory are
// updated one after another, as PyTorch's loop (optim/optimizers.cpp, updates_overlap in
// core/tensor/overlap.h). Under ThreadSanitizer (the tsan preset runs OpenMP on two threads) two
// threads writing one element is a report; here the values are checked too.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/ember.h"
#include "optim/optim.h"

namespace ember {
namespace {

using namespace optim;

// Two threads for one test, then the count it found.
class TwoThreads {
 public:
  TwoThreads() : saved_(get_num_threads()) { set_num_threads(2); }
  ~TwoThreads() { set_num_threads(saved_); }
  TwoThreads(const TwoThreads&) = delete;
  TwoThreads& operator=(const TwoThreads&) = delete;

 private:
  int saved_;
};

constexpr int64_t kSize = int64_t{1} << 18;  // several blocks of every loop, on both threads

Tensor leaf(int64_t n) { return zeros({n}).requires_grad_(); }

TEST(Threads, ClipGradOfAGradientListedTwiceScalesItTwice) {
  TwoThreads two;
  Tensor w = leaf(kSize);
  w.set_grad(full({kSize}, 3.0));
  const double coef = 1.0 / clip_grad_norm_({w, w}, 1.0);
  const std::vector<float> g = w.grad().to_vector<float>();
  EXPECT_NEAR(g[0], 3.0 * coef * coef, 1e-5 * 3.0 * coef * coef);
  EXPECT_EQ(std::count(g.begin(), g.end(), g[0]), kSize);

  w.set_grad(full({kSize}, 3.0));
  clip_grad_value_({w, w}, 1.0);
  const std::vector<float> c = w.grad().to_vector<float>();
  EXPECT_EQ(std::count(c.begin(), c.end(), 1.0f), kSize);
}

TEST(Threads, AdamStepsParametersThatShareMemoryOneAfterTheOther) {
  TwoThreads two;
  manual_seed(5);
  const Tensor values = randn({kSize + kSize / 2});
  const Tensor grad_a = randn({kSize}), grad_b = randn({kSize});
  auto step = [&](bool together) {
    Tensor base = values.clone();
    Tensor a = base.narrow(0, 0, kSize).detach().requires_grad_();
    Tensor b = base.narrow(0, kSize / 2, kSize).detach().requires_grad_();
    a.set_grad(grad_a);
    b.set_grad(grad_b);
    if (together) {
      Adam({a, b}, AdamOptions(0.01)).step();
    } else {  // one optimizer per parameter: nothing shared within a step
      Adam({a}, AdamOptions(0.01)).step();
      Adam({b}, AdamOptions(0.01)).step();
    }
    return base.to_vector<float>();
  };
  EXPECT_EQ(step(true), step(false));
}

// Disjoint parameters keep the one parallel loop: the same bits as one optimizer each.
TEST(Threads, AdamWStepsDisjointParametersInOneLoop) {
  TwoThreads two;
  manual_seed(6);
  std::vector<Tensor> params, twins;
  for (int i = 0; i < 3; ++i) {
    Tensor p = randn({kSize / 2 + i}).requires_grad_();
    p.set_grad(randn({kSize / 2 + i}));
    Tensor twin = p.detach().clone().requires_grad_();
    twin.set_grad(p.grad());
    params.push_back(p);
    twins.push_back(twin);
  }
  AdamW(params, AdamWOptions(0.01).weight_decay(0.1)).step();
  for (Tensor& t : twins) AdamW({t}, AdamWOptions(0.01).weight_decay(0.1)).step();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].detach().to_vector<float>(), twins[i].detach().to_vector<float>()) << i;
  }
}

}  // namespace
}  // namespace ember
