// Threads (defects from sharing tensors, graphs and the generator across threads): the contract of
// README "Threads and reference cycles". Separate graphs in separate threads are fine; the
// generator is locked around every fill; gradient accumulation into a leaf shared by several graphs
// is serialized. Run under ThreadSanitizer by the tsan preset (scripts/test), and in the release
// and asan runs like every test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "core/ember.h"
#include "core/graph/profiler.h"

namespace ember {
namespace {

using autograd::AutogradContext;
using autograd::tensor_list;

constexpr int kThreads = 4;

template <typename Fn>
void run_threads(Fn fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(fn, t);
  for (auto& th : threads) th.join();
}

// Each rand() takes one lock for its whole fill, so the blocks the threads get are exactly the
// blocks of the sequential stream, in some order.
TEST(Threads, SharedGeneratorHandsOutDisjointBlocks) {
  constexpr int kCalls = 200, kSize = 7;
  manual_seed(123);
  std::vector<std::vector<float>> expected;
  for (int i = 0; i < kThreads * kCalls; ++i) expected.push_back(rand({kSize}).to_vector<float>());

  manual_seed(123);
  std::vector<std::vector<std::vector<float>>> got(kThreads);
  run_threads([&](int t) {
    for (int i = 0; i < kCalls; ++i) got[t].push_back(rand({kSize}).to_vector<float>());
  });
  std::vector<std::vector<float>> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
}

// randint and multinomial (with and without replacement) take one lock for all their draws too:
// each call's result is one call's result of the sequential stream.
TEST(Threads, SharedGeneratorHandsOutDisjointBlocksToSampling) {
  constexpr int kCalls = 400;  // enough draws for the threads to run side by side
  const Tensor probs = arange(1.0, 65.0, 1.0), wide = arange(1.0, 1025.0, 1.0);
  const std::vector<std::function<std::vector<int64_t>()>> samplers = {
      [] { return randint(0, 1000, {256}).to_vector<int64_t>(); },
      [&] { return multinomial(probs, 256, true).to_vector<int64_t>(); },
      [&] { return multinomial(wide, 4).to_vector<int64_t>(); }};
  for (std::size_t s = 0; s < samplers.size(); ++s) {
    SCOPED_TRACE(s);
    manual_seed(7);
    std::vector<std::vector<int64_t>> expected;
    for (int i = 0; i < kThreads * kCalls; ++i) expected.push_back(samplers[s]());

    manual_seed(7);
    std::vector<std::vector<std::vector<int64_t>>> got(kThreads);
    run_threads([&](int t) {
      for (int i = 0; i < kCalls; ++i) got[t].push_back(samplers[s]());
    });
    std::vector<std::vector<int64_t>> all;
    for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
    std::sort(all.begin(), all.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(all, expected);
  }
}

TEST(Threads, RandnAndBernoulliConcurrently) {
  std::atomic<int> bad{0};
  run_threads([&](int t) {
    for (int i = 0; i < 100; ++i) {
      Tensor x = t % 2 ? randn({33}) : rand({5, 5});
      Tensor m = zeros({17});
      bernoulli_(m, 0.5);
      for (float v : m.to_vector<float>()) bad += (v != 0.0f && v != 1.0f);
      if (t % 2 == 0) {
        for (float v : x.to_vector<float>()) bad += !(v >= 0.0f && v < 1.0f);
      }
    }
  });
  EXPECT_EQ(bad.load(), 0);
}

// One leaf, a graph per thread, backward in every thread: no gradient is lost.
TEST(Threads, SharedLeafAccumulatesEveryGradient) {
  constexpr int kIterations = 300;
  Tensor w = ones({3}, DType::Float64).requires_grad_();
  run_threads([&](int) {
    for (int i = 0; i < kIterations; ++i) (w * 2.0).sum().backward();
  });
  const double expected = 2.0 * kThreads * kIterations;
  for (double g : w.grad().to_vector<double>()) EXPECT_EQ(g, expected);
}

// A graph built once, shared by threads that each build on it and run backward with
// retain_graph: the shared nodes are read concurrently, the leaf's accumulation is serialized.
TEST(Threads, SharedSubgraphBackward) {
  constexpr int kIterations = 100;
  Tensor w = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor shared = w * 3.0;
  run_threads([&](int t) {
    for (int i = 0; i < kIterations; ++i)
      (shared * static_cast<double>(t + 1)).sum().backward(Tensor(), /*retain_graph=*/true);
  });
  // d/dw sum((t + 1) * 3 w) = 3 (t + 1), summed over threads and iterations.
  const double expected = 3.0 * (1 + 2 + 3 + 4) * kIterations;
  for (double g : w.grad().to_vector<double>()) EXPECT_EQ(g, expected);
}

// Nodes that gather the gradients of several outputs (split's, a custom Function's) in a graph
// shared by threads that each run backward through it with retain_graph: each pass gets only
// its own outputs' gradients (autograd::PassDeliveries), never another thread's or none.
struct HalfAndDouble : autograd::Function<HalfAndDouble> {
  static tensor_list forward(AutogradContext*, const Tensor& x) { return {x * 0.5, x * 2.0}; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 0.5 + g[1] * 2.0}; }
};

TEST(Threads, SharedNodesOfSeveralOutputsBackward) {
  constexpr int kIterations = 200;
  Tensor w = tensor({1.0, 2.0, 3.0, 4.0}, DType::Float64).requires_grad_();
  const std::vector<Tensor> pieces = (w * 3.0).split(1, 0);  // one SplitBackward0
  Tensor v = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  const tensor_list halves = HalfAndDouble::apply(v * 1.0);
  run_threads([&](int t) {
    for (int i = 0; i < kIterations; ++i) {
      // Thread t: (t + 1) * piece t + piece t + 1 (mod 4), and (t + 1) * half + double.
      Tensor a = pieces[t % 4] * double(t + 1) + pieces[(t + 1) % 4];
      Tensor b = halves[0] * double(t + 1) + halves[1];
      (a.sum() + b.sum()).backward(Tensor(), /*retain_graph=*/true);
    }
  });
  // d/dw_k: 3 (k + 1) from thread k, 3 from thread k - 1 (mod 4); d/dv: (t + 1) 0.5 + 2 summed.
  std::vector<double> expected_w(4), expected_v(2);
  for (int k = 0; k < 4; ++k) expected_w[k] = (3.0 * (k + 1) + 3.0) * kIterations;
  double per_v = 0;
  for (int t = 0; t < kThreads; ++t) per_v += (t + 1) * 0.5 + 2.0;
  expected_v = {per_v * kIterations, per_v * kIterations};
  EXPECT_EQ(w.grad().to_vector<double>(), expected_w);
  EXPECT_EQ(v.grad().to_vector<double>(), expected_v);
}

// Separate graphs in separate threads, each with its own generator: the same numbers as one
// thread computes.
TEST(Threads, SeparateGraphsGiveTheSingleThreadedResult) {
  auto compute = [](uint64_t seed) {
    Generator g(seed);
    Tensor a = rand({4, 6}, DType::Float32, &g).requires_grad_();
    Tensor b = randn({6, 3}, DType::Float32, &g).requires_grad_();
    Tensor loss = softmax(matmul(a, b), -1).pow(2.0).sum();
    loss.backward();
    std::vector<float> out = a.grad().to_vector<float>();
    std::vector<float> gb = b.grad().to_vector<float>();
    out.insert(out.end(), gb.begin(), gb.end());
    out.push_back(loss.item<float>());
    return out;
  };
  std::vector<std::vector<float>> expected(kThreads), got(kThreads);
  for (int t = 0; t < kThreads; ++t) expected[t] = compute(100 + t);
  run_threads([&](int t) {
    for (int i = 0; i < 20; ++i) got[t] = compute(100 + t);
  });
  EXPECT_EQ(got, expected);
}

// Grad mode is per thread: a NoGradGuard in one thread does not stop recording in another.
TEST(Threads, GradModeIsThreadLocal) {
  NoGradGuard no_grad;
  bool recorded = false;
  std::thread other([&] {
    Tensor x = ones({2}).requires_grad_();
    recorded = (x * 2.0).requires_grad();
  });
  other.join();
  EXPECT_TRUE(recorded);
  Tensor x = ones({2}).requires_grad_();
  EXPECT_FALSE((x * 2.0).requires_grad());
}

// Threads dropping their handles to a shared graph at once: the teardown is not a double free.
TEST(Threads, ConcurrentTeardownOfASharedGraph) {
  // Two oracles: ThreadSanitizer (the tsan preset of scripts/test) sees any unsynchronised
  // reference count; the assertions below see a wrong value or a graph that is never freed.
  for (int round = 0; round < 20; ++round) {
    Tensor x = ones({2}, DType::Float64).requires_grad_();  // 2^200 x needs float64
    Tensor y = x;
    for (int i = 0; i < 200; ++i) y = y * 1.0 + y;  // y = 2^200 x, exactly
    const std::vector<double> single_thread = (y * 1.0).to_vector<double>();
    ASSERT_EQ(single_thread, std::vector<double>(2, std::ldexp(1.0, 200)));
    std::weak_ptr<autograd::Node> root = y.grad_fn();
    ASSERT_FALSE(root.expired());
    std::vector<Tensor> copies(kThreads, y);
    y = Tensor();
    std::vector<std::vector<double>> got(kThreads);
    run_threads([&](int t) {
      Tensor mine = copies[t] * 1.0;
      got[t] = mine.to_vector<double>();
      copies[t] = Tensor();
      mine = Tensor();
    });
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], single_thread) << "thread " << t;
    // The last thread to let go freed the whole chain of 400 nodes: nothing else holds it.
    EXPECT_TRUE(root.expired());
    EXPECT_FALSE(x.grad().defined());
  }
}

// Short-lived threads that make tensors, small (from per-thread lists) and big (mapped, kept
// for reuse in a list shared by all threads), and hand half of them to this thread, which frees
// them after the threads have exited; at the same time the other half die on their own
// threads. Each tensor keeps its values until it dies, and nothing is freed twice.
TEST(Threads, TensorsOutliveTheThreadsThatMadeThem) {
  for (int round = 0; round < 10; ++round) {
    std::vector<std::vector<Tensor>> handed(kThreads);
    run_threads([&](int t) {
      std::vector<Tensor> mine;
      for (int i = 0; i < 20; ++i) {
        const double v = t * 100 + i;
        mine.push_back(full({3, 4}, v) + 1.0);                 // small: thread-local lists
        if (i % 5 == 0) mine.push_back(full({1024, 520}, v));  // > 2 MiB: mapped and kept
      }
      for (std::size_t i = 0; i < mine.size(); ++i) {
        if (i % 2 == 0) handed[t].push_back(mine[i]);
      }
      mine.clear();  // the other half dies here, on its own thread
    });
    for (int t = 0; t < kThreads; ++t) {
      for (const Tensor& x : handed[t]) {
        const double first = x.reshape({-1}).index({0}).item();
        EXPECT_GE(first, t * 100.0);
        EXPECT_EQ(max(x).item(), first);
        EXPECT_EQ(min(x).item(), first);
      }
    }
  }
}

// Threads making and freeing big tensors while others call empty_cache (core/base/allocator.h): a
// kept buffer is either handed out or given back, never both, and live tensors keep their values.
TEST(Threads, EmptyCacheWhileOtherThreadsAllocate) {
  run_threads([&](int t) {
    for (int i = 0; i < 30; ++i) {
      const double v = t * 1000 + i;
      Tensor a = full({1024, 700 + 64 * t}, v);  // 2.7 to 3.5 MiB: mapped
      Tensor b = full({2048, 600}, v + 1);
      if (i % 3 == t % 3) empty_cache();
      EXPECT_EQ(max(a).item(), v);
      EXPECT_EQ(min(a).item(), v);
      EXPECT_EQ(max(b).item(), v + 1);
      EXPECT_EQ(min(b).item(), v + 1);
    }
  });
  empty_cache();
  EXPECT_EQ(memory_stats().mapped_kept, 0u);
}

// Threads running products whose packing workspace is too large for a thread's own buffer (so
// each takes one from the tensors' allocator, core/kernels/gemm_internal.h), while another
// thread reads memory_stats: every product is exact, no workspace is another's, what is in use
// never exceeds the peak, and when all is done nothing is in use but what was before.
TEST(Threads, LargeWorkspacesFromSeveralThreadsAndMemoryStats) {
  const int64_t K = int64_t{1} << 19;  // a skinny product's packed A: 16 x K floats, 32 MiB
  const std::size_t in_use = memory_stats().mapped_in_use;
  std::atomic<bool> done{false};
  std::atomic<int> inconsistent{0};
  std::thread reader([&] {
    while (!done.load()) {
      const MemoryStats stats = memory_stats();
      if (stats.mapped_in_use > stats.mapped_peak) ++inconsistent;
    }
  });
  std::vector<Tensor> a(kThreads), b(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    a[t] = full({16, K}, 0.5 * (t + 1));  // exact sums: K * (t + 1) / 2 * 2
    b[t] = full({K, 3}, 2.0);
  }
  run_threads([&](int t) {
    for (int i = 0; i < 3; ++i) {
      const Tensor c = matmul(a[t], b[t]);
      EXPECT_EQ(min(c).item(), static_cast<double>(K * (t + 1))) << t;
      EXPECT_EQ(max(c).item(), static_cast<double>(K * (t + 1))) << t;
    }
  });
  done = true;
  reader.join();
  EXPECT_EQ(inconsistent.load(), 0);
  a.clear();
  b.clear();
  EXPECT_EQ(memory_stats().mapped_in_use, in_use);
}

// The profiler records every thread's ops into that thread's own buffer and merges them: each
// thread's forward and backward are all there, with its own thread id, while the main thread
// reads the profile as the workers still record.
TEST(Threads, ProfilerRecordsEveryThread) {
  constexpr int kSteps = 20;
  autograd::profiler::Profile prof;
  std::atomic<int> done{0};
  std::thread reader([&] {
    while (done.load() < kThreads) (void)prof.key_averages();  // a read during recording
  });
  run_threads([&](int t) {
    autograd::profiler::RecordFunction label("worker");
    const Tensor w = full({4, 4}, 0.5 + t).requires_grad_(true);
    for (int i = 0; i < kSteps; ++i) tanh(mm(w, w)).sum().backward();
    done.fetch_add(1);
  });
  reader.join();
  prof.stop();
  const autograd::profiler::KeyAverages averages = prof.key_averages();
  ASSERT_NE(averages.find("TanhBackward0"), nullptr);
  EXPECT_EQ(averages.find("TanhBackward0")->count, kThreads * kSteps);
  EXPECT_EQ(averages.find("ember::tanh")->count, kThreads * kSteps);
  EXPECT_EQ(averages.find("worker")->count, kThreads);
  std::set<uint64_t> threads;
  for (const auto& e : prof.events())
    if (e.name == "worker") threads.insert(e.thread);
  EXPECT_EQ(threads.size(), static_cast<std::size_t>(kThreads));
}

}  // namespace
}  // namespace ember
