// The book's GPTModel built and run under set_default_dtype(kFloat64), against PyTorch 1.13
// under torch.set_default_dtype(torch.float64): every parameter drawn as a double (not drawn in
// float32 and cast), the GELU's double sqrt(2 / pi), so logits, loss and gradients agree to
// 1e-12.
//
// Expected values: tests/fixtures/default_dtype.txt, written by
// scripts/fixtures/gen_default_dtype.py (its docstring lists the entries).
#include <gtest/gtest.h>

#include <string>

#include "core/base/dtype.h"
#include "core/base/generator.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

namespace F = ember::nn::functional;

GPTConfig small_gpt_config() {
  return GPTConfig{.vocab_size = 50,
                   .context_length = 8,
                   .emb_dim = 16,
                   .n_heads = 2,
                   .n_layers = 2,
                   .drop_rate = 0.0,
                   .qkv_bias = false};
}

// fused: the GELU and LayerNorm as one op each (the default) or as the book's lines.
void expect_pytorchs_float64_gpt(bool fused) {
  const test::Fixture& f = test::fixture_file("default_dtype.txt");
  DefaultDtypeGuard guard(kFloat64);
  manual_seed(123);
  GPTModel model(small_gpt_config());
  for (auto& [name, module] : model.named_modules()) {
    if (auto* gelu = dynamic_cast<GPTGELU*>(module.get())) gelu->fused = fused;
    if (auto* norm = dynamic_cast<GPTLayerNorm*>(module.get())) norm->fused = fused;
  }
  const NamedTensors params = model.named_parameters();
  const std::vector<std::string>& keys = f.keys("gpt/params");
  ASSERT_EQ(params.size(), keys.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [key, p] = params[i];
    ASSERT_EQ(key, keys[i]);
    f.expect_exact(p, "gpt/param/" + key);  // drawn as PyTorch draws doubles: bit for bit
  }
  const Tensor logits = model(f.tensor("gpt/inputs"));
  f.expect_near(logits, "gpt/logits", 0, 1e-12);
  const Tensor loss = F::cross_entropy(logits.flatten(0, 1), f.tensor("gpt/targets").flatten());
  f.expect_near(loss, "gpt/loss", 0, 1e-12);
  loss.backward();
  for (const std::string& key : f.keys("gpt/grads")) {
    SCOPED_TRACE(key);
    f.expect_near(params[key].grad(), "gpt/grad/" + key, 0, 1e-12);
  }
}

TEST(GptDefaultDtype, BuiltUnderFloat64IsPyTorchs) { expect_pytorchs_float64_gpt(/*fused=*/true); }
TEST(GptDefaultDtype, BuiltUnderFloat64IsPyTorchsWithTheBooksLines) {
  expect_pytorchs_float64_gpt(/*fused=*/false);
}

}  // namespace
}  // namespace ember::nn
