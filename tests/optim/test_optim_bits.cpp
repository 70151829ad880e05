// The optimizers' steps and clip_grad_norm_ bit for bit against PyTorch 1.13
// (tests/fixtures/optim_bits.txt, from scripts/fixtures/gen_optim_bits.py): 70001-element float32
// (and float64) parameters, three steps on heavy-tailed gradients, and clip_grad_norm_ over
// gradients of up to 300001 elements, where PyTorch's float32 accumulation of the norm is far
// from the exact norm. The inputs are made here with Ember's randn from the script's seeds and
// checked against the script's patterns before they are used.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ember.h"
#include "optim/optim.h"
#include "tests/core/kernels/targets.h"
#include "tests/fixtures.h"

namespace ember {
namespace {

const test::Fixture& fixture() { return test::fixture_file("optim_bits.txt"); }

// randn(n) * randn(n) * scale, as the script's grad_of.
Tensor grad_of(int64_t n, double scale, DType dtype) {
  Tensor a = randn({n}, dtype);
  return a * randn({n}, dtype) * scale;
}

struct OptimizerCase {
  std::string name;
  uint64_t seed;
  DType dtype;
  double scale;
  std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&)> make;
  std::vector<std::string> state;
};

// The script's OPTIMIZERS, with the same options.
std::vector<OptimizerCase> optimizer_cases() {
  using namespace optim;
  using P = const std::vector<Tensor>&;
  return {
      {"adamw",
       1,
       DType::Float32,
       1e-3,
       [](P p) { return std::make_unique<AdamW>(p, AdamWOptions(4e-4).weight_decay(0.1)); },
       {"exp_avg", "exp_avg_sq"}},
      {"adamw_amsgrad",
       2,
       DType::Float32,
       1e-3,
       [](P p) {
         return std::make_unique<AdamW>(
             p, AdamWOptions(1e-3).betas({0.9, 0.99}).eps(1e-6).weight_decay(0.1).amsgrad(true));
       },
       {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}},
      {"adam_l2",
       3,
       DType::Float32,
       1e-3,
       [](P p) {
         return std::make_unique<Adam>(p, AdamOptions(1e-3).weight_decay(0.01).maximize(true));
       },
       {"exp_avg", "exp_avg_sq"}},
      {"adamw_f64",
       4,
       DType::Float64,
       1e-3,
       [](P p) { return std::make_unique<AdamW>(p, AdamWOptions(4e-4).weight_decay(0.1)); },
       {"exp_avg", "exp_avg_sq"}},
      {"sgd_nesterov",
       5,
       DType::Float32,
       1e-2,
       [](P p) {
         return std::make_unique<SGD>(
             p, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
       },
       {"momentum_buffer"}},
      {"sgd_dampening",
       6,
       DType::Float32,
       1e-2,
       [](P p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.3)); },
       {"momentum_buffer"}},
      {"rmsprop_centered",
       7,
       DType::Float32,
       1e-2,
       [](P p) {
         return std::make_unique<RMSprop>(
             p, RMSpropOptions(1e-2).alpha(0.9).centered(true).momentum(0.9).weight_decay(0.01));
       },
       {"square_avg", "grad_avg", "momentum_buffer"}},
      {"rmsprop",
       8,
       DType::Float32,
       1e-2,
       [](P p) { return std::make_unique<RMSprop>(p, RMSpropOptions(1e-2).weight_decay(0.01)); },
       {"square_avg"}},
      {"adagrad",
       9,
       DType::Float32,
       1e-2,
       [](P p) {
         return std::make_unique<Adagrad>(
             p,
             AdagradOptions(0.1).lr_decay(0.1).weight_decay(0.01).initial_accumulator_value(0.1));
       },
       {"sum"}},
  };
}

constexpr int64_t kN = 70001;
constexpr int kSteps = 3;

TEST(OptimBits, StepsEqualPyTorchBitForBit) {
  const int threads_before = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const OptimizerCase& c : optimizer_cases()) {
      SCOPED_TRACE(c.name + " at " + std::to_string(threads) + " threads");
      manual_seed(c.seed);
      Tensor p = randn({kN}, c.dtype).requires_grad_(true);
      fixture().expect_exact(p, c.name + "/param0");
      auto opt = c.make({p});
      for (int k = 1; k <= kSteps; ++k) {
        const std::string step = std::to_string(k);
        Tensor g = grad_of(kN, c.scale, c.dtype);
        fixture().expect_exact(g, c.name + "/grad" + step);
        p.set_grad(g);
        opt->step();
        fixture().expect_exact(p.detach(), c.name + "/after" + step + "/param");
        for (const std::string& key : c.state)
          fixture().expect_exact(opt->state(p).at(key), c.name + "/after" + step + "/" + key);
      }
    }
  }
  set_num_threads(threads_before);
}

// PyTorch takes each float32 gradient's 2-norm with one 8-lane float32 accumulator (fma) over
// the whole tensor, and the total norm of the stacked norms the same way; the coefficient is
// (total + 1e-6).reciprocal() * max_norm in the stack's type (optim/clip_grad.cpp). The
// accumulator is Highway vectors (eight lanes on every target): checked on every target the CPU
// has.
TEST(OptimBits, ClipGradNormEqualsPyTorchBitForBit) {
  struct ClipCase {
    std::string name;
    uint64_t seed;
    std::vector<DType> dtypes;
    double scale, max_norm;
  };
  constexpr DType f32 = DType::Float32, f64 = DType::Float64;
  const std::vector<ClipCase> cases = {
      {"f32", 11, {f32, f32, f32, f32, f32}, 1e-2, 0.3},
      {"f32_unclipped", 12, {f32, f32, f32, f32, f32}, 1e-4, 0.3},
      {"f64", 13, {f64, f64, f64, f64, f64}, 1e-2, 0.3},
      {"mixed", 14, {f32, f64, f32, f32, f64}, 1e-2, 0.7},
  };
  const std::vector<int64_t> sizes = {3, 37, 1000, 70001, 300001};
  const int threads_before = get_num_threads();
  const std::vector<std::string> targets = test::on_every_target([&] {
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (const ClipCase& c : cases) {
        SCOPED_TRACE(c.name + " at " + std::to_string(threads) + " threads");
        manual_seed(c.seed);
        std::vector<Tensor> params;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          Tensor p = zeros({sizes[i]}, c.dtypes[i]).requires_grad_(true);
          Tensor g = grad_of(sizes[i], c.scale, c.dtypes[i]);
          fixture().expect_exact(g, "clip/" + c.name + "/grad" + std::to_string(i));
          p.set_grad(g);
          params.push_back(p);
        }
        const double total = optim::clip_grad_norm_(params, c.max_norm);
        // The total as PyTorch's tensor: float32 unless a gradient is float64.
        const bool any_f64 = std::find(c.dtypes.begin(), c.dtypes.end(), f64) != c.dtypes.end();
        fixture().expect_exact(full({1}, total, any_f64 ? f64 : f32), "clip/" + c.name + "/total");
        for (std::size_t i = 0; i < params.size(); ++i)
          fixture().expect_exact(params[i].grad(),
                                 "clip/" + c.name + "/clipped" + std::to_string(i));
      }
    }
  });
  EXPECT_FALSE(targets.empty());
  set_num_threads(threads_before);
}

}  // namespace
}  // namespace ember
