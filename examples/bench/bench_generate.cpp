// bench_generate: greedy generation with chapter 4's GPT_CONFIG_124M, with and without the KV
// cache, as the book's bonus (ch04/03_kv-cache/gpt_with_kv_cache.py) times it: "Hello, I am",
// 200 new tokens, random weights from manual_seed(123) (or OpenAI's with --weights).
// examples/bench/torch_generate_bench.py times the bonus's PyTorch code the same way.
//
// Generating one token with the cache reads every weight once (the blocks' matrices and the
// output head; of the embeddings only a row each) for a few FLOPs per weight: it is bound by
// memory, not by arithmetic. So its yardstick is the memory-bandwidth floor: the time to read
// those weights once at the read bandwidth this program measures (a streaming read of a buffer
// far larger than the caches, by as many threads as generation uses). A shared machine's
// bandwidth moves from one minute to the next (by a third on the VMs Ember is measured on), so
// the bandwidth is measured right before and right after each timed generation, and each
// generation is held to the higher of its two: floor_share is the median over the runs of
// tokens/s over the floor's at that bandwidth. floor_share_best holds the median tokens/s to the
// best bandwidth measured in the whole program instead (the stricter reading, and the only one a
// single measure at the start would give).
//
//   bench_generate [--threads 1] [--new-tokens 200] [--reps 3] [--weights model.safetensors]
//                  [--no-uncached]
// (--help lists the flags; a value out of its range, or --weights naming no file, is refused
// before any work.)
// One JSON line: tokens/s with and without the cache (new tokens over the whole call, the prompt
// included; medians of --reps, one run without the cache), the bandwidth (the median of the runs'
// and the best), the floor at the median, the two shares, the ids.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/ember.h"
#include "examples/common/bench_util.h"
#include "examples/common/flags.h"
#include "nn/gpt.h"
#include "nn/gpt_weights.h"

namespace {

using ember::bench::median;
using ember::bench::peak_rss_mb;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// XOR of words [begin, end), eight independent chains (so loads, not a dependency, set the pace).
uint64_t read_words(const uint64_t* begin, const uint64_t* end) {
  uint64_t acc[8] = {};
  const uint64_t* p = begin;
  for (; p + 8 <= end; p += 8) {
    for (int j = 0; j < 8; ++j) acc[j] ^= p[j];
  }
  for (; p < end; ++p) acc[0] ^= *p;
  uint64_t total = 0;
  for (uint64_t a : acc) total ^= a;
  return total;
}

// A buffer of 1 GiB, far larger than the caches, its pages written once (so in memory).
std::vector<uint64_t> bandwidth_buffer() {
  std::vector<uint64_t> buffer((std::size_t{1} << 30) / sizeof(uint64_t));
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;
  return buffer;
}

// The read bandwidth in bytes/s: the best of `passes` reads of the buffer, split among `threads`
// threads (each reading its own contiguous part).
double read_bandwidth(const std::vector<uint64_t>& buffer, int threads, int passes) {
  const std::size_t words = buffer.size();
  double best = 0.0;
  uint64_t sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<uint64_t> parts(static_cast<std::size_t>(threads));
    const auto t = clock_type::now();
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        const std::size_t lo = words * i / threads, hi = words * (i + 1) / threads;
        parts[static_cast<std::size_t>(i)] = read_words(buffer.data() + lo, buffer.data() + hi);
      });
    }
    for (auto& w : workers) w.join();
    const double s = seconds_since(t);
    for (uint64_t part : parts) sink ^= part;
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s);
  }
  if (sink == 42) std::printf(" ");  // keeps the reads
  return best;
}

// The bytes one cached token reads: every parameter, but one row of each embedding table.
double weight_bytes_per_token(const ember::nn::GPTModel& model) {
  double elements = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool table = name == "tok_emb.weight" || name == "pos_emb.weight";
    elements += static_cast<double>(table ? p.size(1) : p.numel());
  }
  return elements * sizeof(float);
}

std::string ids_text(const ember::Tensor& ids) {
  std::string out;
  for (int64_t id : ids.to_vector<int64_t>()) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

// The command line; --help lists it.
struct Settings {
  int threads = 1, reps = 3;
  int64_t new_tokens = 200;
  bool uncached = true;
  std::string weights;

  void add_to(ember::examples::Flags& app) {
    using namespace ember::examples;
    positive_option(app, "--threads", threads,
                    "threads for the kernels and for the bandwidth measurement", kMaxThreads);
    positive_option(app, "--new-tokens", new_tokens, "tokens to generate after the prompt",
                    int64_t{1} << 20);
    positive_option(app, "--reps", reps, "timed runs with the KV cache (the median is reported)",
                    1000);
    text_option(app, "--weights", weights,
                "OpenAI's GPT-2 124M weights (model.safetensors) instead of random ones")
        .type_name("FILE");
    app.add_flag("!--no-uncached", uncached,
                 "skip the run without the KV cache (minutes at 200 tokens)");
  }
};

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  using namespace ember;
  Settings s;
  ember::examples::Flags app{
      "bench_generate: greedy generation with GPT-124M, with and without the KV cache"};
  s.add_to(app);
  if (auto code = examples::parse(app, argc, argv)) return *code;
  if (!s.weights.empty()) examples::check_input_file(s.weights, "--weights");
  const int threads = s.threads, reps = s.reps;
  const int64_t new_tokens = s.new_tokens;
  const bool uncached = s.uncached;
  const std::string& weights = s.weights;
  examples::set_threads(threads);
  const std::vector<uint64_t> buffer = bandwidth_buffer();

  manual_seed(123);
  nn::GPTModel model(nn::GPT_CONFIG_124M);
  if (!weights.empty()) nn::load_gpt2_weights(model, weights);
  model.eval();
  const double bytes = weight_bytes_per_token(model);
  const Tensor hello = tensor({{15496, 11, 314, 716}}, DType::Int64);  // "Hello, I am"
  const int64_t context = model.cfg.context_length;

  nn::generate_text_simple(model, hello, 8, context, /*use_cache=*/true);  // warm-up
  // bandwidths[rep] is measured right before run rep, bandwidths[rep + 1] right after it.
  std::vector<double> cached_times, bandwidths{read_bandwidth(buffer, threads, 3)};
  Tensor cached_ids;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t = clock_type::now();
    cached_ids = nn::generate_text_simple(model, hello, new_tokens, context, true);
    cached_times.push_back(seconds_since(t));
    bandwidths.push_back(read_bandwidth(buffer, threads, 3));
  }
  const double cached_tok_s = static_cast<double>(new_tokens) / median(cached_times);
  std::vector<double> shares, run_bandwidths;  // each run against the higher bandwidth beside it
  for (int rep = 0; rep < reps; ++rep) {
    const double bandwidth = std::max(bandwidths[rep], bandwidths[rep + 1]);
    run_bandwidths.push_back(bandwidth);
    shares.push_back(static_cast<double>(new_tokens) / cached_times[rep] / (bandwidth / bytes));
  }
  const double bandwidth = median(run_bandwidths);
  const double best_bandwidth = *std::max_element(bandwidths.begin(), bandwidths.end());

  double uncached_tok_s = 0.0;
  bool same_ids = true;
  if (uncached) {
    const auto t = clock_type::now();
    const Tensor ids = nn::generate_text_simple(model, hello, new_tokens, context, false);
    uncached_tok_s = static_cast<double>(new_tokens) / seconds_since(t);
    same_ids = ids.to_vector<int64_t>() == cached_ids.to_vector<int64_t>();
  }
  std::printf(
      "{\"impl\": \"ember\", \"threads\": %d, \"new_tokens\": %lld, \"cached_tok_s\": %.2f, "
      "\"uncached_tok_s\": %.3f, \"read_gbs\": %.2f, \"read_gbs_best\": %.2f, "
      "\"weight_mb_per_token\": %.1f, \"floor_tok_s\": %.2f, \"floor_share\": %.3f, "
      "\"floor_share_best\": %.3f, \"same_ids\": %s, \"generated\": [%s], "
      "\"peak_rss_mb\": %.1f}\n",
      threads, static_cast<long long>(new_tokens), cached_tok_s, uncached_tok_s, bandwidth / 1e9,
      best_bandwidth / 1e9, bytes / 1e6, bandwidth / bytes, median(shares),
      cached_tok_s / (best_bandwidth / bytes), same_ids ? "true" : "false",
      ids_text(cached_ids).c_str(), peak_rss_mb());
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("bench_generate", [&] { return run(argc, argv); });
}
