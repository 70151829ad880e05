// ember::Generator: PyTorch 1.13's CPU random number generator, reproduced bit for bit.
//
// The specification is core/base/RNG.md, "PyTorch 1.13's CPU random numbers, as Ember reproduces
// them"; the § numbers below are its sections. In short:
//   - the engine is the standard MT19937, seeded with the low 32 bits of the seed (§1.1, §1.2);
//   - random() is one 32-bit output, random64() is two of them, high word first (§1.3);
//   - the serial normal path caches the second Box-Muller value in the generator (§1.4, §3.2).
//
// The raw kernels in ember::random_fill turn those outputs into tensors' values exactly as
// PyTorch's CPU kernels do. They work on raw memory: `data` holds the tensor's n elements in
// MEMORY ORDER, because PyTorch's nullary kernels walk memory order, not logical order (§2).
// A strided tensor is handled by its caller (fill a buffer in memory order, then scatter it).
//
// Thread safety, as in PyTorch (which holds the generator's mutex around every kernel): every
// random_fill function and manual_seed lock the generator's mutex for the whole fill, so threads
// sharing a generator (the default one: rand, dropout, nn init) get disjoint parts of its stream.
// random()/random64() themselves do not lock: call them under mutex() when the generator is shared.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace ember {

class Generator {
 public:
  // The seed of a freshly constructed torch.Generator() (RNG.md §1.1): 0x3D30F19CD101.
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;

  explicit Generator(uint64_t seed = kDefaultSeed);
  // Copies are snapshots of the state (taken under the source's lock), with their own mutex.
  Generator(const Generator& other);
  Generator& operator=(const Generator& other);

  // torch.Generator.manual_seed: empties both normal caches and re-seeds the Mersenne Twister
  // with seed & 0xFFFFFFFF. The full 64-bit seed is kept for initial_seed().
  // torch.manual_seed(-1) corresponds to manual_seed(0xFFFFFFFFFFFFFFFF).
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return initial_seed_; }

  // torch.Generator.get_state()/set_state(): the whole state as 632 int64 values (the 624
  // words, the position, the seed and the normal caches; Ember's own layout, not PyTorch's
  // byte tensor), so a checkpoint can resume the stream exactly. set_state checks the size and
  // ranges (an ember::Error otherwise).
  std::vector<int64_t> get_state() const;
  void set_state(const std::vector<int64_t>& state);

  // Held by every fill (and manual_seed) for its whole duration.
  std::mutex& mutex() const { return mutex_; }

  // One MT19937 output.
  uint32_t random();
  // Two MT19937 outputs: (first << 32) | second.
  uint64_t random64();
  // The next n outputs at once, the same as n calls of random() (the fills use this: the state
  // is regenerated and tempered a vector of words at a time, random_fill::detail below).
  void random_block(uint32_t* out, int64_t n);

  // The serial normal path's cached second Box-Muller value (RNG.md §3.2). Only this one is used
  // by CPU kernels; both are emptied by manual_seed.
  std::optional<double> next_double_normal_sample;
  std::optional<float> next_float_normal_sample;  // kept for parity with PyTorch; unused

 private:
  static constexpr int kStateSize = 624;  // N
  static constexpr int kShift = 397;      // M

  void twist();  // regenerates all 624 state words

  mutable std::mutex mutex_;
  uint64_t initial_seed_ = 0;
  std::array<uint32_t, kStateSize> state_{};
  int left_ = 1;  // outputs left before the next twist (+1, as in PyTorch's engine)
  int next_ = 0;  // index of the next state word to temper
};

// The global generator used when an op is given none. Unlike PyTorch's (seeded from
// /dev/urandom at start-up), it starts seeded with Generator::kDefaultSeed, so a program that
// never calls manual_seed is still deterministic.
Generator& default_generator();
// `gen`, or the global generator when an op is given none (null).
inline Generator& generator_or_default(Generator* gen) {
  return gen != nullptr ? *gen : default_generator();
}

// torch.manual_seed: seeds default_generator().
void manual_seed(uint64_t seed);

namespace random_fill {

// uniform_(from, to) / torch.rand (RNG.md §2): one random() per float element, random64() per
// double element. from and to are cast to the element type first, as PyTorch does.
void uniform(float* data, int64_t n, double from, double to, Generator& g);
void uniform(double* data, int64_t n, double from, double to, Generator& g);

// normal_(mean, stddev) / torch.randn (RNG.md §3.1). `contiguous` tells whether the tensor being
// filled is contiguous: PyTorch takes the vectorised path only for a contiguous tensor with
// n >= 16 (float32: the AVX2 arithmetic of §3.4; float64: the libm block of §3.5). Every other
// call takes the serial Box-Muller path (§3.2), which reads and refills
// g.next_double_normal_sample.
void normal(float* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g);
void normal(double* data, int64_t n, double mean, double stddev, bool contiguous, Generator& g);

// bernoulli_(p) with a scalar p (RNG.md §4.1): one random64() per element, writes 1 if u < p.
void bernoulli(float* data, int64_t n, double p, Generator& g);
void bernoulli(double* data, int64_t n, double p, Generator& g);
void bernoulli(bool* data, int64_t n, double p, Generator& g);

// The noise of F.dropout(x, p) in training mode (RNG.md §4.3): bernoulli_(1 - p), then divided by
// (1 - p) in the element type, so each element is 0 or 1 / (T)(1 - p). Dropout's output is
// x * noise. Requires 0 < p < 1: for p == 0 and p == 1 PyTorch draws nothing (it returns x,
// or x * 0), and the caller must do the same.
void dropout_noise(float* data, int64_t n, double p, Generator& g);
void dropout_noise(double* data, int64_t n, double p, Generator& g);

// One element of torch.randint(low, high, ...) for an int64 tensor, i.e. random_(low, high)
// (PyTorch's random_from_to): (r % (high - low)) + low, where r is random() when the range is
// below 2^32 and random64() otherwise. Requires low < high. Fill elements in memory order.
int64_t randint(int64_t low, int64_t high, Generator& g);
// n elements of it into data, under one lock (the whole fill: threads sharing g get disjoint
// blocks of its stream).
void randint(int64_t* data, int64_t n, int64_t low, int64_t high, Generator& g);

// The generator's vector code (generator_simd.cpp), written once over Highway and run on the
// best target the CPU has (core/base/cpu.h), and the plain loops beside it (generator.cpp), which
// give the same bits (tests/core/base/test_generator.cpp checks them on every target).
namespace detail {
// MT19937's twist of the n-word state s in place: word i from words i, i + 1 and i + shift
// (mod n), the words below i already twisted.
void twist(uint32_t* s, int n, int shift);
void twist_scalar(uint32_t* s, int n, int shift);
// out[i] = s[i] tempered (MT19937's output of state word s[i]), for i in [0, n).
void temper(const uint32_t* s, uint32_t* out, int64_t n);
void temper_scalar(const uint32_t* s, uint32_t* out, int64_t n);
// Generator::random_block over twist and temper (one dispatch for the whole block): the next n
// outputs of the engine with the n_state-word state s at position left, next (its left_ and
// next_, updated).
void random_block(uint32_t* s, int n_state, int shift, int& left, int& next, uint32_t* out,
                  int64_t n);
// One block of the float32 vectorised normal path (RNG.md §3.4), in place on 16 uniforms:
// PyTorch's AVX2 arithmetic ported lane by lane; normal_blocks16 does `blocks` consecutive
// blocks from d on.
void normal_block16_scalar(float* d, float mean, float stddev);
void normal_blocks16(float* d, int64_t blocks, float mean, float stddev);
}  // namespace detail

}  // namespace random_fill

}  // namespace ember
