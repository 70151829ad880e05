// Generator::get_state / set_state (core/base/generator.h): a restored state continues the stream
// exactly (the Mersenne Twister's words and position, and the cached Box-Muller value); a state
// that get_state did not make is an ember::Error.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/base/error.h"
#include "core/base/generator.h"
#include "core/tensor/random.h"

namespace ember {
namespace {

TEST(GeneratorState, RestoredStateContinuesTheStream) {
  Generator g(123);
  for (int i = 0; i < 1000; ++i) g.random();  // mid-way through the 624 words
  randn({1}, DType::Float64, &g);             // the serial path caches the second value
  ASSERT_TRUE(g.next_double_normal_sample.has_value());
  const std::vector<int64_t> state = g.get_state();
  ASSERT_EQ(state.size(), 632u);
  std::vector<double> expected = randn({5}, DType::Float64, &g).to_vector<double>();
  std::vector<uint32_t> expected_raw;
  for (int i = 0; i < 700; ++i) expected_raw.push_back(g.random());

  Generator h(7);
  h.set_state(state);
  EXPECT_EQ(h.initial_seed(), 123u);
  EXPECT_EQ(randn({5}, DType::Float64, &h).to_vector<double>(), expected);
  std::vector<uint32_t> raw;
  for (int i = 0; i < 700; ++i) raw.push_back(h.random());
  EXPECT_EQ(raw, expected_raw);
}

TEST(GeneratorState, ForeignStatesAreErrors) {
  Generator g;
  std::vector<int64_t> state = g.get_state();
  EXPECT_THROW(g.set_state(std::vector<int64_t>(631, 0)), Error);
  std::vector<int64_t> bad_word = state;
  bad_word[3] = int64_t{1} << 32;
  EXPECT_THROW(g.set_state(bad_word), Error);
  std::vector<int64_t> bad_position = state;
  bad_position[624] = 0;
  EXPECT_THROW(g.set_state(bad_position), Error);
  g.set_state(state);  // the real one is accepted
}

}  // namespace
}  // namespace ember
