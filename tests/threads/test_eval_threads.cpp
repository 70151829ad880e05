// Threads as PyTorch allows them (issue 23, item 6): several threads running forward of the
// same module in eval mode under NoGradGuard get the single-threaded results, bit for bit. The
// module's parameters are only read; the kernels' caches, the allocator's kept buffers and the
// thread pool are shared. Run under ThreadSanitizer by the tsan preset.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/ember.h"
#include "nn/gpt.h"

namespace ember {
namespace {

std::vector<uint32_t> bits(const Tensor& t) {
  const std::vector<float> values = t.to_vector<float>();
  std::vector<uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

TEST(Threads, EvalForwardOfOneModuleFromSeveralThreads) {
  manual_seed(7);
  const nn::GPTConfig cfg{64, 16, 32, 4, 2, 0.1, true};
  auto model = std::make_shared<nn::GPTModel>(cfg);
  model->eval();
  // Inputs of a few shapes, so that kernels run with different sizes in the threads at once.
  std::vector<Tensor> inputs;
  for (int64_t tokens : {16, 5, 9, 1}) {
    std::vector<double> ids;
    for (int64_t i = 0; i < 2 * tokens; ++i) ids.push_back(static_cast<double>((i * 37 + 5) % 64));
    inputs.push_back(from_vector(ids, {2, tokens}, DType::Int64));
  }
  std::vector<std::vector<uint32_t>> expected;
  {
    NoGradGuard no_grad;
    for (const Tensor& x : inputs) expected.push_back(bits(model->forward(x)));
  }
  constexpr int kThreads = 3, kRounds = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      NoGradGuard no_grad;  // grad mode is thread-local: each thread sets its own
      for (int round = 0; round < kRounds; ++round) {
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          const std::size_t k = (i + static_cast<std::size_t>(t)) % inputs.size();
          Tensor y = model->forward(inputs[k]);
          if (y.requires_grad() || bits(y) != expected[k]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace ember
