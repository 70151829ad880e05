// Modules through safetensors: the book's MultiHeadAttention saved by PyTorch
// (tests/fixtures/mha_pytorch.safetensors, written by scripts/fixtures/gen_safetensors.py) loads
// into Ember's and gives PyTorch's output; Module::save/load round trips.
#include <gtest/gtest.h>

#include <string>

#include "core/ember.h"
#include "core/io/safetensors.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::fixture_path;
using test::temp_path;

// The book's MultiHeadAttention saved by PyTorch loads into Ember's and gives PyTorch's output.
TEST(Safetensors, PyTorchMultiHeadAttentionLoadsAndMatches) {
  SafetensorsFile f = load_safetensors(fixture_path("mha_pytorch.safetensors"));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  nn::StateDict state;
  Tensor input, output;
  for (const auto& [name, t] : f.tensors) {
    if (name == "input") {
      input = t;
    } else if (name == "output") {
      output = t;
    } else {
      state.emplace_back(name, t);
    }
  }
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2, true);
  nn::LoadResult r = mha.load_state_dict(state);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  NoGradGuard no_grad;
  test::expect_allclose(mha.forward(input), output, 1e-5, 1e-6);
}

TEST(Safetensors, ModuleSaveLoad) {
  manual_seed(1);
  nn::MultiHeadAttention a(3, 4, 6, 0.0, 2, true);
  manual_seed(2);
  nn::MultiHeadAttention b(3, 4, 6, 0.0, 2, true);
  const std::string path = temp_path("mha.safetensors");
  a.save(path, {{"what", "mha"}});
  EXPECT_FALSE(equal(a.W_query->weight, b.W_query->weight));
  b.load(path);
  for (std::size_t i = 0; i < a.state_dict().size(); ++i) {
    EXPECT_TRUE(equal(a.state_dict()[i].second, b.state_dict()[i].second))
        << a.state_dict()[i].first;
  }
  nn::Linear wrong(3, 5);
  expect_error([&] { wrong.load(path); }, "Error(s) in loading state_dict");
}

}  // namespace
}  // namespace ember
