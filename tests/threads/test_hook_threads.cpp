// Threads each running forward and backward through their own custom Functions and hooked
// modules at once, and through one hooked module they share: every thread gets the
// single-threaded numbers, and every hook runs once per call. Run under ThreadSanitizer by the
// tsan preset (scripts/test), and in the release and asan runs like every test.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/autograd/function.h"
#include "core/ember.h"
#include "nn/nn.h"

namespace ember {
namespace {

using autograd::AutogradContext;
using autograd::tensor_list;

constexpr int kThreads = 4;
constexpr int kIterations = 20;

// y = x^3 with its backward in Ember ops; asks needs_input_grad in both passes.
struct Cube : autograd::Function<Cube> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    return x * x * x * scale;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    if (!ctx->needs_input_grad(0)) return {Tensor(), Tensor()};
    const Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * 3.0 * x * x * ctx->saved_data.at("scale").toDouble(), Tensor()};
  }
};

// Per thread: its own Linear with every kind of hook (the backward ones replace gradients), a
// custom Function, a tensor hook, and the module `shared` with a hook that counts.
struct Step {
  std::vector<double> values;  // loss, then the input's and the own module's gradients
  int hook_calls = 0;
};

Step one_step(uint64_t seed, nn::Linear& shared) {
  Generator g(seed);
  auto own = std::make_shared<nn::Linear>(3, 3);
  {
    NoGradGuard no_grad;
    own->weight.copy_(randn({3, 3}, DType::Float32, &g));
    own->bias.copy_(randn({3}, DType::Float32, &g));
  }
  Step run;
  own->register_forward_pre_hook([&run](nn::Module&, const nn::TensorList& in) {
    ++run.hook_calls;
    return std::optional<nn::TensorList>({in[0] * 0.5});
  });
  own->register_forward_hook([&run](nn::Module&, const nn::TensorList&, const Tensor& out) {
    ++run.hook_calls;
    return std::optional<Tensor>(out + 1.0);
  });
  own->register_full_backward_pre_hook([&run](nn::Module&, const nn::TensorList& grad_output) {
    ++run.hook_calls;
    return std::optional<nn::TensorList>({grad_output[0] * 3.0});
  });
  own->register_full_backward_hook(
      [&run](nn::Module&, const nn::TensorList& grad_input, const nn::TensorList&) {
        ++run.hook_calls;
        return std::optional<nn::TensorList>({grad_input[0] * 2.0});
      });
  Tensor x = randn({2, 3}, DType::Float32, &g).requires_grad_();
  Tensor h = Cube::apply((*own)(x), 0.25);
  h.register_hook([&run](const Tensor& grad) {
    ++run.hook_calls;
    return grad * -1.0;
  });
  Tensor loss = shared(h).pow(2.0).sum();
  loss.backward();
  run.values.push_back(loss.item<double>());
  for (const Tensor& t : {x.grad(), own->weight.grad(), own->bias.grad()}) {
    for (float v : t.to_vector<float>()) run.values.push_back(v);
  }
  return run;
}

TEST(Threads, CustomFunctionsAndHookedModulesInSeveralThreads) {
  auto shared = std::make_shared<nn::Linear>(3, 2);
  std::atomic<int> shared_calls{0};
  shared->register_full_backward_hook([&shared_calls](nn::Module&, const nn::TensorList&,
                                                      const nn::TensorList&) { ++shared_calls; });
  std::vector<Step> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) expected[t] = one_step(300 + t, *shared);
  EXPECT_EQ(expected[0].hook_calls, 5);
  EXPECT_EQ(shared_calls.load(), kThreads);
  const std::vector<double> weight_grad = shared->weight.grad().to_vector<double>();

  shared->weight.set_grad(Tensor());
  shared_calls = 0;
  std::vector<std::vector<Step>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) got[t].push_back(one_step(300 + t, *shared));
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (const Step& run : got[t]) {
      EXPECT_EQ(run.values, expected[t].values) << "thread " << t;
      EXPECT_EQ(run.hook_calls, 5) << "thread " << t;
    }
  }
  EXPECT_EQ(shared_calls.load(), kThreads * kIterations);
  // The shared weight's gradient: every thread's, kIterations times (summed in some order).
  const std::vector<double> summed = shared->weight.grad().to_vector<double>();
  ASSERT_EQ(summed.size(), weight_grad.size());
  for (std::size_t k = 0; k < summed.size(); ++k) {
    EXPECT_NEAR(summed[k], weight_grad[k] * kIterations, 1e-3 * std::abs(weight_grad[k]) + 1e-3);
  }
}

}  // namespace
}  // namespace ember
