// Tests of ember::Generator and ember::random_fill against PyTorch 1.13, bit for bit.
//
// Most cases come from tests/fixtures/rng.txt, written by scripts/fixtures/gen_rng.py with
// PyTorch (its docstring describes the steps) and read by tests/fixtures.h. The rest are the test
// vectors of core/base/RNG.md (its § numbers below) and properties of the generator itself.
#include "core/base/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "tests/core/kernels/targets.h"
#include "tests/fixtures.h"

namespace ember {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float x : v) out.push_back(bits(x));
  return out;
}

std::vector<float> rand_f32(int64_t n, Generator& g) {
  std::vector<float> v(n);
  random_fill::uniform(v.data(), n, 0.0, 1.0, g);
  return v;
}

std::vector<float> randn_f32(int64_t n, Generator& g) {
  std::vector<float> v(n);
  random_fill::normal(v.data(), n, 0.0, 1.0, /*contiguous=*/true, g);
  return v;
}

// Which 0/1 mask F.dropout's noise is, one string of digits per row (1 = kept).
std::vector<std::string> kept_rows(const std::vector<float>& noise, int cols) {
  std::vector<std::string> rows;
  for (std::size_t i = 0; i < noise.size(); i += cols) {
    std::string row;
    for (int j = 0; j < cols; ++j) row += noise[i + j] != 0.0f ? '1' : '0';
    rows.push_back(row);
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// The engine (RNG.md §1)

TEST(Generator, FirstOutputsForSeed123) {
  Generator g(123);
  EXPECT_EQ(g.random(), 2991312382u);
  EXPECT_EQ(g.random(), 3062119789u);
  EXPECT_EQ(g.random(), 1228959102u);
  EXPECT_EQ(g.random(), 1840268610u);
}

TEST(Generator, OnlyTheLow32BitsOfTheSeedMatter) {
  Generator a(123);
  Generator b((uint64_t{1} << 32) + 123);
  EXPECT_EQ(a.initial_seed(), 123u);
  EXPECT_EQ(b.initial_seed(), (uint64_t{1} << 32) + 123);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(a.random(), b.random()) << "output " << i;
}

TEST(Generator, IsTheStandardMt19937) {
  for (uint64_t seed :
       {uint64_t{0}, uint64_t{5489}, uint64_t{0xFFFFFFFFFFFFFFFF}, Generator::kDefaultSeed}) {
    Generator g(seed);
    std::mt19937 reference(static_cast<uint32_t>(seed));
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(g.random(), reference()) << "seed " << seed;
  }
}

// random_block (the vector twist and tempering) is n calls of random(), mixed with single calls
// at every phase of the 624-word state, across several twists; on every target.
TEST(Generator, RandomBlockIsRandomCalledNTimes) {
  test::on_every_target([] {
    Generator g(7);
    std::mt19937 reference(7);
    std::vector<uint32_t> block(3000);
    for (int64_t n : {1, 5, 623, 624, 625, 8, 1300, 0, 17, 2999, 624, 3, 1248, 31}) {
      g.random_block(block.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(block[i], reference()) << "block of " << n;
      ASSERT_EQ(g.random(), reference()) << "after a block of " << n;
    }
  });
}

// The vector twist and tempering give their plain loops' words on every target, for states
// drawn from std::mt19937 (any 624 words are a state) and every length of tempering up to 624
// (each tail of a vector loop).
TEST(Generator, TwistAndTemperAreThePlainLoopsOnEveryTarget) {
  test::on_every_target([] {
    std::mt19937 words(11);
    for (int round = 0; round < 20; ++round) {
      std::vector<uint32_t> a(624), b;
      for (uint32_t& w : a) w = words();
      b = a;
      random_fill::detail::twist_scalar(a.data(), 624, 397);
      random_fill::detail::twist(b.data(), 624, 397);
      ASSERT_EQ(a, b) << "round " << round;
    }
    std::vector<uint32_t> s(624), a(624), b(624);
    for (uint32_t& w : s) w = words();
    for (int64_t n = 0; n <= 624; ++n) {
      std::fill(a.begin(), a.end(), 0u);
      std::fill(b.begin(), b.end(), 0u);
      random_fill::detail::temper_scalar(s.data(), a.data(), n);
      random_fill::detail::temper(s.data(), b.data(), n);
      ASSERT_EQ(a, b) << "n = " << n;
    }
  });
}

TEST(Generator, Random64IsHighWordFirst) {
  Generator a(42);
  Generator b(42);
  for (int i = 0; i < 10; ++i) {
    const uint64_t hi = b.random();
    const uint64_t lo = b.random();
    EXPECT_EQ(a.random64(), (hi << 32) | lo);
  }
}

TEST(Generator, DefaultSeedIsTorchGeneratorDefault) {
  Generator g;
  EXPECT_EQ(g.initial_seed(), 67280421310721ULL);
  std::mt19937 reference(4053586177u);  // the low 32 bits of 0x3D30F19CD101
  EXPECT_EQ(g.random(), reference());
}

TEST(Generator, ManualSeedRestartsTheStreamAndEmptiesTheCaches) {
  Generator g(1);
  const uint32_t first = g.random();
  for (int i = 0; i < 1000; ++i) g.random();
  g.next_double_normal_sample = 1.5;
  g.next_float_normal_sample = 2.5f;
  g.manual_seed(1);
  EXPECT_FALSE(g.next_double_normal_sample.has_value());
  EXPECT_FALSE(g.next_float_normal_sample.has_value());
  EXPECT_EQ(g.random(), first);
}

TEST(Generator, GlobalManualSeedSeedsTheDefaultGenerator) {
  manual_seed(123);
  EXPECT_EQ(default_generator().initial_seed(), 123u);
  EXPECT_EQ(default_generator().random(), 2991312382u);
  manual_seed(Generator::kDefaultSeed);
}

// ---------------------------------------------------------------------------------------------
// How many draws each kernel makes (RNG.md §2, §3.2, §3.3, §4.1)

// The number of random() calls `fill` makes, found by comparing with a second generator.
template <typename Fill>
int draws_made(Fill fill) {
  Generator used(99);
  fill(used);
  const uint32_t next = used.random();
  Generator counter(99);
  for (int draws = 0; draws < 100000; ++draws) {
    if (counter.random() == next) return draws;
  }
  return -1;
}

TEST(RandomFill, DrawCounts) {
  std::vector<float> f(100);
  std::vector<double> d(100);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::uniform(f.data(), 7, 0, 1, g); }), 7);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::uniform(d.data(), 7, 0, 1, g); }), 14);
  // Serial normal: 4 draws per pair; randn(3) draws as much as randn(4).
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(f.data(), 3, 0, 1, true, g); }), 8);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(f.data(), 4, 0, 1, true, g); }), 8);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(f.data(), 16, 0, 1, false, g); }),
            32);
  // Vectorised normal: n + (n % 16 ? 16 : 0) uniforms, each 1 draw (f32) or 2 (f64).
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(f.data(), 16, 0, 1, true, g); }),
            16);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(f.data(), 17, 0, 1, true, g); }),
            33);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(f.data(), 25, 0, 1, true, g); }),
            41);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::normal(d.data(), 17, 0, 1, true, g); }),
            66);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::bernoulli(f.data(), 5, 0.5, g); }), 10);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::dropout_noise(f.data(), 5, 0.5, g); }), 10);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::randint(0, 10, g); }), 1);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::randint(0, int64_t{1} << 32, g); }), 2);
  EXPECT_EQ(draws_made([&](Generator& g) { random_fill::uniform(f.data(), 0, 0, 1, g); }), 0);
}

// bernoulli and dropout_noise test u < p on the 53-bit integers (r < ceil(p 2^53)); the same
// answer as the double comparison for every p, checked on p equal to one of the drawn uniforms
// (u < p false there) and its neighbours, dyadic and non-dyadic p, and the extremes.
TEST(RandomFill, BernoulliKeepsExactlyTheUniformsBelowP) {
  constexpr int64_t n = 3000;
  Generator source(2024);
  std::vector<double> u(n);
  {
    Generator copy = source;
    for (double& x : u)
      x = static_cast<double>(copy.random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
  }
  std::vector<double> ps = {
      0.0, 1e-300, 0x1p-53, 0.1, 0.25, 1.0 / 3, 0.5, 0.9, std::nextafter(1.0, 0.0), 1.0};
  for (int j : {0, 17, 1234, 2999}) {
    ps.push_back(u[j]);
    ps.push_back(std::nextafter(u[j], 0.0));
    ps.push_back(std::nextafter(u[j], 1.0));
  }
  for (double p : ps) {
    std::vector<float> f(n);
    std::vector<double> d(n);
    std::vector<float> noise(n);
    Generator g1 = source, g2 = source;
    random_fill::bernoulli(f.data(), n, p, g1);
    random_fill::bernoulli(d.data(), n, p, g2);
    const bool droppable = 1 - p > 0 && 1 - p < 1;  // dropout_noise takes p in (0, 1)
    Generator g3 = source;
    if (droppable) random_fill::dropout_noise(noise.data(), n, 1 - p, g3);
    const double kept = 1.0 - (1.0 - p);  // what dropout_noise keeps: u < 1 - its p
    const float scale = 1.0f / static_cast<float>(kept);
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = u[i] < p;
      ASSERT_EQ(f[i], keep ? 1.0f : 0.0f) << "p=" << p << " i=" << i;
      ASSERT_EQ(d[i], keep ? 1.0 : 0.0) << "p=" << p << " i=" << i;
      if (droppable) {
        ASSERT_EQ(noise[i], u[i] < kept ? scale : 0.0f) << "p=" << p << " i=" << i;
      }
    }
  }
}

TEST(RandomFill, TheVectorisedNormalPathLeavesTheCacheAlone) {
  Generator g(0);
  std::vector<float> v(16);
  random_fill::normal(v.data(), 3, 0, 1, true, g);  // serial: one value left in the cache
  ASSERT_TRUE(g.next_double_normal_sample.has_value());
  const double cached = *g.next_double_normal_sample;
  random_fill::normal(v.data(), 16, 0, 1, true, g);  // vectorised
  ASSERT_TRUE(g.next_double_normal_sample.has_value());
  EXPECT_EQ(bits(*g.next_double_normal_sample), bits(cached));
  random_fill::normal(v.data(), 1, 0, 1, true, g);  // returns the cached value
  EXPECT_EQ(bits(v[0]), bits(static_cast<float>(cached)));
  EXPECT_FALSE(g.next_double_normal_sample.has_value());
}

// The float32 normal blocks on every target give the plain loop's bits for every possible
// uniform: slot j holds k / 2^24 and slot j + 8 the uniform (5 k mod 2^24) / 2^24, for every
// k < 2^24, so every value meets the log (slots 0-7) and the sine and cosine (slots 8-15). With
// a mean and stddev that are not 0 and 1, so the final multiply-add is exercised too.
TEST(RandomFill, NormalBlocksAreThePlainLoopForEveryUniformOnEveryTarget) {
  constexpr uint32_t kValues = uint32_t{1} << 24;
  constexpr uint32_t kBlocks = 4096;  // per call
  std::vector<float> uniforms(16 * kBlocks), a(16 * kBlocks), b(16 * kBlocks);
  test::on_every_target([&] {
    int mismatches = 0;
    for (uint32_t first = 0; first < kValues; first += 8 * kBlocks) {
      for (int pass = 0; pass < 2; ++pass) {
        const float mean = pass == 0 ? 0.0f : 0.25f, stddev = pass == 0 ? 1.0f : 0.02f;
        for (uint32_t block = 0; block < kBlocks; ++block) {
          for (uint32_t j = 0; j < 8; ++j) {
            const uint32_t k = first + 8 * block + j;
            uniforms[16 * block + j] = static_cast<float>(k) * 0x1p-24f;
            uniforms[16 * block + j + 8] = static_cast<float>((5 * k) % kValues) * 0x1p-24f;
          }
        }
        a = uniforms;
        b = uniforms;
        for (uint32_t block = 0; block < kBlocks; ++block) {
          random_fill::detail::normal_block16_scalar(a.data() + 16 * block, mean, stddev);
        }
        random_fill::detail::normal_blocks16(b.data(), kBlocks, mean, stddev);
        if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0 && ++mismatches <= 5) {
          ADD_FAILURE() << "blocks from k = " << first << ", mean " << mean;
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  });
}

TEST(RandomFill, RejectsBadArguments) {
  Generator g;
  std::vector<float> v(4);
  EXPECT_THROW(random_fill::uniform(v.data(), 4, 1.0, 0.0, g), Error);
  EXPECT_THROW(random_fill::dropout_noise(v.data(), 4, 0.0, g), Error);
  EXPECT_THROW(random_fill::dropout_noise(v.data(), 4, 1.0, g), Error);
  EXPECT_THROW(random_fill::randint(3, 3, g), Error);
}

// ---------------------------------------------------------------------------------------------
// RNG.md's test vectors (§3.3, §4.2, §4.3, §5, §8)

TEST(DocVectors, Rand) {
  Generator g(123);
  EXPECT_EQ(bits_of(rand_f32(6, g)), (std::vector<uint32_t>{0x3e979bfc, 0x3f043d6d, 0x3e80dafc,
                                                            0x3f304542, 0x3d977ee0, 0x3f5dd462}));
  g.manual_seed(0);
  const std::vector<float> expected0 = {0.4963f, 0.7682f, 0.0885f, 0.1320f, 0.3074f, 0.6341f};
  const std::vector<float> got0 = rand_f32(6, g);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got0[i], expected0[i], 5e-5) << i;
  g.manual_seed(42);
  const std::vector<float> expected42 = {0.8823f, 0.9150f, 0.3829f};
  const std::vector<float> got42 = rand_f32(3, g);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got42[i], expected42[i], 5e-5) << i;
}

TEST(DocVectors, RandnSerialAndVectorised) {
  Generator g(0);
  EXPECT_EQ(bits_of(randn_f32(6, g)),  // randn(2, 3): serial
            (std::vector<uint32_t>{0x3fc53f5c, 0xbe963c50, 0xc00b7149, 0x3f1184b6, 0xbf8ad1a1,
                                   0xbfb3052d}));
  g.manual_seed(0);
  EXPECT_EQ(
      bits_of(randn_f32(16, g)),  // randn(4, 4): the AVX2 path
      (std::vector<uint32_t>{0xbf901b85, 0xbf93808a, 0xbe804bd6, 0xbede255d, 0x3f594515, 0x3f312783,
                             0xbea1cc6d, 0xc0075fc1, 0x3ea50138, 0xbfa1b4f4, 0x3eb330ff, 0x3e9dc3bb,
                             0x3df56f77, 0x3f9e6b93, 0x3f8ef28e, 0xbe7d367c}));
  g.manual_seed(42);
  const std::vector<float> expected42 = {1.9269f,  1.4873f,  0.9007f,  -2.1055f, 0.6784f,  -1.2345f,
                                         -0.0431f, -1.6047f, -0.7521f, 1.6487f,  -0.3925f, -1.4036f,
                                         -0.7279f, -0.5594f, -0.7688f, 0.7624f};
  const std::vector<float> got42 = randn_f32(16, g);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(got42[i], expected42[i], 5e-5) << i;
}

TEST(DocVectors, LinearInitialisation) {
  // nn.Linear(3, 2) with seed 123 (RNG.md §5): kaiming_uniform_ on the weight, then the bias.
  Generator g(123);
  const double gain = std::sqrt(2.0 / (1 + std::pow(std::sqrt(5.0), 2)));
  const double weight_bound = std::sqrt(3.0) * (gain / std::sqrt(3.0));
  const double bias_bound = 1 / std::sqrt(3.0);
  std::vector<float> weight(6);
  std::vector<float> bias(2);
  random_fill::uniform(weight.data(), 6, -weight_bound, weight_bound, g);
  random_fill::uniform(bias.data(), 2, -bias_bound, bias_bound, g);
  EXPECT_EQ(bits_of(weight), (std::vector<uint32_t>{0xbe711478, 0x3c9caaef, 0xbe92d05d, 0x3e5ef3ba,
                                                    0xbefbdecd, 0x3ed8b0b2}));
  EXPECT_EQ(bits_of(bias), (std::vector<uint32_t>{0xbed6db3d, 0xbeeb045d}));
}

TEST(DocVectors, DropoutMasks) {
  // manual_seed(123); F.dropout(ones(6, 6), 0.5): the default (non-MKL) kernel's mask (§4.2).
  Generator g(123);
  std::vector<float> noise(36);
  random_fill::dropout_noise(noise.data(), 36, 0.5, g);
  EXPECT_EQ(kept_rows(noise, 6),
            (std::vector<std::string>{"110110", "000101", "111101", "011001", "010101", "011110"}));
  for (float x : noise) EXPECT_TRUE(x == 0.0f || x == 2.0f);

  // manual_seed(123); randn(5, 5); then dropout(0.5): issue #121595 (§3.3).
  g.manual_seed(123);
  randn_f32(25, g);
  noise.resize(25);
  random_fill::dropout_noise(noise.data(), 25, 0.5, g);
  EXPECT_EQ(kept_rows(noise, 5),
            (std::vector<std::string>{"00101", "00110", "11100", "10110", "10111"}));

  // The scale for p = 0.1 is 1.0f / (float)0.9 = 0x3F8E38E4 (§4.3).
  g.manual_seed(123);
  random_fill::dropout_noise(noise.data(), 25, 0.1, g);
  for (float x : noise) EXPECT_TRUE(x == 0.0f || bits(x) == 0x3F8E38E4u);
}

// ---------------------------------------------------------------------------------------------
// The PyTorch fixtures (tests/fixtures/rng.txt, see scripts/fixtures/gen_rng.py)

double parse_double(const std::string& s) {  // decimal, or hex floats as float.hex() writes them
  std::size_t used = 0;
  const double x = std::stod(s, &used);
  if (used != s.size()) throw std::invalid_argument("bad number: " + s);
  return x;
}

// Replays one call, `<op> <params...>`, on g into out (of the fixture's dtype and size).
void run_call(const std::vector<std::string>& call, Tensor& out, Generator& g) {
  const std::string& op = call.at(0);
  auto param = [&](std::size_t i) { return parse_double(call.at(i + 1)); };
  const int64_t n = out.numel();
  auto run = [&](auto* v) {
    if (op == "rand") {
      random_fill::uniform(v, n, 0.0, 1.0, g);
    } else if (op == "uniform") {
      random_fill::uniform(v, n, param(0), param(1), g);
    } else if (op == "randn") {
      random_fill::normal(v, n, 0.0, 1.0, /*contiguous=*/true, g);
    } else if (op == "normal") {
      random_fill::normal(v, n, param(0), param(1), call.at(3) == "1", g);
    } else if (op == "bernoulli") {
      random_fill::bernoulli(v, n, param(0), g);
    } else if (op == "dropout") {
      random_fill::dropout_noise(v, n, param(0), g);
    } else {
      ADD_FAILURE() << "unknown op " << op;
    }
  };
  if (out.dtype() == DType::Float32) return run(out.data_ptr<float>());
  if (out.dtype() == DType::Float64) return run(out.data_ptr<double>());
  if (out.dtype() == DType::Bool) {
    ASSERT_EQ(op, "bernoulli");
    return random_fill::bernoulli(out.data_ptr<bool>(), n, param(0), g);
  }
  ASSERT_EQ(out.dtype(), DType::Int64);
  ASSERT_EQ(op, "randint");
  int64_t* v = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    v[i] = random_fill::randint(std::stoll(call.at(1)), std::stoll(call.at(2)), g);
  }
}

// The fixture is a script (see scripts/fixtures/gen_rng.py): step/1, step/2, ... each a seed or
// a call whose result is step/<i>/out, replayed in order on one generator.
TEST(PyTorchFixtures, EveryCaseMatchesBitForBit) {
  const test::Fixture& f = test::fixture_file("rng.txt");
  Generator g;
  int64_t calls = 0;
  for (int i = 1; f.has("step/" + std::to_string(i)); ++i) {
    const std::string name = "step/" + std::to_string(i);
    const std::vector<std::string>& step = f.keys(name);
    SCOPED_TRACE("rng.txt " + name);
    ASSERT_FALSE(step.empty());
    if (step[0] == "seed") {
      const uint64_t seed = std::stoull(step.at(1));
      g.manual_seed(seed);
      EXPECT_EQ(g.initial_seed(), seed);
      continue;
    }
    const test::FixtureEntry& expected = f.entry(name + "/out");
    Tensor out = empty(expected.shape, expected.dtype);
    run_call(step, out, g);
    f.expect_exact(out, name + "/out");
    ++calls;
  }
  EXPECT_EQ(calls, f.tensor("calls").item<int64_t>()) << "rng.txt looks truncated";
  EXPECT_GE(calls, 300);
}

}  // namespace
}  // namespace ember
