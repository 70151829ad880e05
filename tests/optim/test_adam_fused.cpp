// Adam and AdamW update every parameter of a group in one fused pass over blocks shared out to
// the threads (optim/optimizers.cpp). Here a plain scalar loop written op by op after PyTorch
// 1.13's _single_tensor_adam(w) (each tensor op of it one statement, in float32) runs beside the
// optimizer: the parameters and both moments must agree bit for bit after every step, at 1 and
// 2 threads, for every choice of the options, over sizes that cut the blocks (32768 elements)
// anywhere. Each op is rounded as PyTorch's CPU kernel rounds it (optim/optimizers.cpp):
// add_(y, alpha=a) is fma(y, a, x), addcmul_(y, z, value=v) is fma(v * y, z, x) and
// addcdiv_(y, z, value=v) is x + (v * y) / z. (test_optim_bits.cpp compares the optimizer with
// PyTorch itself.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/ember.h"
#include "optim/optim.h"

namespace ember {
namespace {

struct Reference {
  std::vector<float> p, m, v, vmax;
};

// One step of the op-by-op sequence for one parameter (float32 throughout, as PyTorch's ops on a
// float32 tensor with double scalars rounded to float, each op rounded as its kernel rounds).
void reference_step(Reference& r, const std::vector<float>& grad, double lr, double beta1,
                    double beta2, double eps, double wd, bool decoupled, bool amsgrad,
                    bool maximize, int step) {
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  for (std::size_t i = 0; i < r.p.size(); ++i) {
    float g = maximize ? -grad[i] : grad[i];
    if (decoupled) {
      r.p[i] = r.p[i] * static_cast<float>(1 - lr * wd);  // param.mul_(1 - lr * weight_decay)
    } else if (wd != 0) {
      g = std::fma(r.p[i], static_cast<float>(wd), g);  // grad.add(param, alpha=weight_decay)
    }
    r.m[i] = r.m[i] * static_cast<float>(beta1);                  // exp_avg.mul_(beta1)
    r.m[i] = std::fma(g, static_cast<float>(1 - beta1), r.m[i]);  //   .add_(grad, alpha=1 - beta1)
    r.v[i] = r.v[i] * static_cast<float>(beta2);                  // exp_avg_sq.mul_(beta2)
    r.v[i] =
        std::fma(static_cast<float>(1 - beta2) * g, g, r.v[i]);  //   .addcmul_(g, g, 1 - beta2)
    float denom;
    if (amsgrad) {
      r.vmax[i] = std::max(r.vmax[i], r.v[i]);  // torch.maximum(max_exp_avg_sqs[i], exp_avg_sq)
      denom = std::sqrt(r.vmax[i]) / bc2_sqrt + static_cast<float>(eps);
    } else {
      denom = std::sqrt(r.v[i]) / bc2_sqrt + static_cast<float>(eps);
    }
    r.p[i] = r.p[i] + (-step_size * r.m[i]) / denom;  // param.addcdiv_(exp_avg, denom, -step)
  }
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
        << what << " element " << i << ": " << a[i] << " vs " << b[i];
  }
}

TEST(AdamFused, EqualsTheOpByOpLoopBitForBit) {
  const std::vector<Shape> shapes = {{1}, {7}, {3, 5}, {70001}, {257, 129}};
  const int threads_before = get_num_threads();
  for (int threads : {1, 2}) {
    for (int variant = 0; variant < 8; ++variant) {
      const bool decoupled = variant & 1, amsgrad = variant & 2, maximize = variant & 4;
      SCOPED_TRACE("threads " + std::to_string(threads) + " decoupled " +
                   std::to_string(decoupled) + " amsgrad " + std::to_string(amsgrad) +
                   " maximize " + std::to_string(maximize));
      set_num_threads(threads);
      manual_seed(7);
      std::vector<Tensor> params;
      std::vector<Reference> refs;
      for (const Shape& s : shapes) {
        params.push_back(randn(s).requires_grad_(true));
        Reference r;
        r.p = params.back().to_vector<float>();
        r.m.assign(r.p.size(), 0.0f);
        r.v.assign(r.p.size(), 0.0f);
        r.vmax.assign(r.p.size(), 0.0f);
        refs.push_back(r);
      }
      const double lr = 3e-3, beta1 = 0.8, beta2 = 0.95, eps = 1e-6, wd = 0.05;
      std::unique_ptr<optim::Optimizer> opt;
      if (decoupled) {
        opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions(lr)
                                                         .betas({beta1, beta2})
                                                         .eps(eps)
                                                         .weight_decay(wd)
                                                         .amsgrad(amsgrad)
                                                         .maximize(maximize));
      } else {
        opt = std::make_unique<optim::Adam>(params, optim::AdamOptions(lr)
                                                        .betas({beta1, beta2})
                                                        .eps(eps)
                                                        .weight_decay(wd)
                                                        .amsgrad(amsgrad)
                                                        .maximize(maximize));
      }
      for (int step = 1; step <= 3; ++step) {
        for (std::size_t j = 0; j < params.size(); ++j) {
          Tensor g = randn(params[j].shape());
          params[j].set_grad(g);
          reference_step(refs[j], g.to_vector<float>(), lr, beta1, beta2, eps, wd, decoupled,
                         amsgrad, maximize, step);
        }
        opt->step();
        for (std::size_t j = 0; j < params.size(); ++j) {
          const std::string what = "step " + std::to_string(step) + " param " + std::to_string(j);
          expect_same_bits(params[j].to_vector<float>(), refs[j].p, what + " value");
          const optim::ParamState& state = opt->state(params[j]);
          expect_same_bits(state.at("exp_avg").to_vector<float>(), refs[j].m, what + " exp_avg");
          expect_same_bits(state.at("exp_avg_sq").to_vector<float>(), refs[j].v,
                           what + " exp_avg_sq");
          if (amsgrad) {
            expect_same_bits(state.at("max_exp_avg_sq").to_vector<float>(), refs[j].vmax,
                             what + " max_exp_avg_sq");
          }
        }
      }
    }
  }
  set_num_threads(threads_before);
}

}  // namespace
}  // namespace ember
