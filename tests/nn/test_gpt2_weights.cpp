// OpenAI's GPT-2 weights into nn::GPTModel (nn/gpt_weights.h): a tiny GPT-2 written in exactly
// the Hugging Face model.safetensors layout (tests/fixtures/gpt2_tiny.safetensors) gives the
// logits the book's load_weights_into_gpt gives in PyTorch (tests/fixtures/gpt2_weights.txt;
// both from scripts/fixtures/gen_gpt2_weights.py), and files that do not fit are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/io/safetensors.h"
#include "nn/gpt.h"
#include "nn/gpt_weights.h"
#include "tests/fixtures.h"

namespace ember::nn {
namespace {

const std::string kDir = EMBER_FIXTURES_DIR;

// The book's model in PyTorch (scripts/fixtures/gen_gpt2_weights.py lists the entries).
const test::Fixture& torch_gpt2() { return test::fixture_file("gpt2_weights.txt"); }

GPTConfig tiny_config() {
  auto value = [](const char* name) { return torch_gpt2().ints(name).at(0); };
  GPTConfig cfg;
  cfg.vocab_size = value("vocab_size");
  cfg.context_length = value("context_length");
  cfg.emb_dim = value("emb_dim");
  cfg.n_heads = value("n_heads");
  cfg.n_layers = value("n_layers");
  cfg.drop_rate = 0.1;
  cfg.qkv_bias = true;
  return cfg;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(GPT2Weights, LogitsAreTheBooksLoadWeightsIntoGpt) {
  manual_seed(123);
  GPTModel model(tiny_config());
  model.eval();
  load_gpt2_weights(model, kDir + "/gpt2_tiny.safetensors");
  const std::vector<int64_t>& input = torch_gpt2().ints("input");
  const Tensor x = from_vector(input, {1, static_cast<int64_t>(input.size())});
  // Within 2e-6 of 1 + |PyTorch's logit| (float32 sums in another order).
  torch_gpt2().expect_near(model.forward(x), "logits", 2e-6, 2e-6);
  // Greedy decoding from the loaded model.
  const Tensor out = generate_text_simple(model, x, 6, model.cfg.context_length);
  EXPECT_EQ(out.contiguous().to_vector<int64_t>(), torch_gpt2().ints("generate"));
  // out_head is tied to wte, as the book assigns it.
  EXPECT_EQ(model.out_head->weight.to_vector<float>(), model.tok_emb->weight.to_vector<float>());
}

TEST(GPT2Weights, TransformerPrefixAndTiedLmHeadAreAccepted) {
  const SafetensorsFile file = load_safetensors(kDir + "/gpt2_tiny.safetensors");
  NamedTensorList prefixed;
  Tensor wte;
  for (const auto& [name, t] : file.tensors) {
    prefixed.emplace_back("transformer." + name, t);
    if (name == "wte.weight") wte = t;
  }
  prefixed.emplace_back("lm_head.weight", wte);
  manual_seed(123);
  GPTModel a(tiny_config()), b(tiny_config());
  load_gpt2_weights(a, file.tensors);
  load_gpt2_weights(b, prefixed);
  for (const auto& [name, t] : a.state_dict())
    EXPECT_EQ(t.to_vector<float>(), b.state_dict().find(name)->to_vector<float>()) << name;
}

TEST(GPT2Weights, TheFourConfigsAreTheBooks) {
  struct Row {
    const char* name;
    int64_t emb, layers, heads;
  };
  for (const Row& r :
       {Row{"gpt2-small (124M)", 768, 12, 12}, Row{"gpt2-medium (355M)", 1024, 24, 16},
        Row{"gpt2-large (774M)", 1280, 36, 20}, Row{"gpt2-xl (1558M)", 1600, 48, 25},
        Row{"124M", 768, 12, 12}, Row{"355M", 1024, 24, 16}, Row{"774M", 1280, 36, 20},
        Row{"1558M", 1600, 48, 25}}) {
    const GPTConfig cfg = gpt2_config(r.name);
    EXPECT_EQ(cfg.emb_dim, r.emb) << r.name;
    EXPECT_EQ(cfg.n_layers, r.layers) << r.name;
    EXPECT_EQ(cfg.n_heads, r.heads) << r.name;
    EXPECT_EQ(cfg.vocab_size, 50257);
    EXPECT_EQ(cfg.context_length, 1024);
    EXPECT_TRUE(cfg.qkv_bias);
  }
  expect_error([] { gpt2_config("gpt3"); }, {"unknown model 'gpt3'"});
}

const Tensor& good_tensor(const NamedTensorList& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}

TEST(GPT2Weights, FilesThatDoNotFitAreErrorsNamingTensorAndShapes) {
  const NamedTensorList good = load_safetensors(kDir + "/gpt2_tiny.safetensors").tensors;
  auto with = [&](const std::string& name, std::optional<Tensor> replacement) {
    NamedTensorList out;
    for (const auto& [n, t] : good) {
      if (n != name)
        out.emplace_back(n, t);
      else if (replacement)
        out.emplace_back(n, *replacement);
    }
    return out;
  };
  manual_seed(123);
  GPTModel model(tiny_config());
  const auto before = model.state_dict().find("tok_emb.weight")->to_vector<float>();
  // A transposed c_attn weight (the shape of nn::Linear's, not Conv1D's).
  expect_error(
      [&] {
        load_gpt2_weights(model, with("h.1.attn.c_attn.weight", zeros({36, 12})));
      },
      {"h.1.attn.c_attn.weight has shape [36, 12], expected [12, 36]"});
  // A missing tensor.
  expect_error([&] { load_gpt2_weights(model, with("ln_f.bias", std::nullopt)); },
               {"no tensor ln_f.bias", "expected shape [12]"});
  // Another vocabulary.
  expect_error(
      [&] {
        load_gpt2_weights(model, with("wte.weight", zeros({50257, 12})));
      },
      {"wte.weight has shape [50257, 12], expected [96, 12]"});
  // A layer the config does not have (a deeper model's file).
  NamedTensorList deeper = good;
  deeper.emplace_back("h.2.ln_1.weight", ones({12}));
  expect_error([&] { load_gpt2_weights(model, deeper); },
               {"h.2.ln_1.weight (shape [12])", "2 layers"});
  // An lm_head that is not wte.
  NamedTensorList untied = good;
  untied.emplace_back("lm_head.weight", zeros({96, 12}));
  expect_error([&] { load_gpt2_weights(model, untied); },
               {"lm_head.weight differs from wte.weight"});
  // A NaN or an infinity anywhere (GPT-2's weights are all finite): the tensor, value and index.
  Tensor nan_attn = good_tensor(good, "h.1.attn.c_attn.weight").clone();
  nan_attn[2][5].fill_(NAN);
  expect_error([&] { load_gpt2_weights(model, with("h.1.attn.c_attn.weight", nan_attn)); },
               {"load_gpt2_weights: h.1.attn.c_attn.weight holds nan at [2, 5]", "all finite"});
  Tensor inf_bias = good_tensor(good, "ln_f.bias").clone();
  inf_bias[11].fill_(-INFINITY);
  expect_error([&] { load_gpt2_weights(model, with("ln_f.bias", inf_bias)); },
               {"ln_f.bias holds -inf at [11]"});
  // Nothing was changed by the failed loads.
  EXPECT_EQ(model.state_dict().find("tok_emb.weight")->to_vector<float>(), before);
  // No qkv bias in the config.
  GPTConfig no_bias = tiny_config();
  no_bias.qkv_bias = false;
  GPTModel plain(no_bias);
  expect_error([&] { load_gpt2_weights(plain, good); }, {"qkv_bias = true"});
  // A model of other sizes (the 124M config's emb_dim against the tiny file).
  GPTConfig wider = tiny_config();
  wider.emb_dim = 24;
  GPTModel w(wider);
  expect_error([&] { load_gpt2_weights(w, good); },
               {"wte.weight has shape [96, 12], expected [96, 24]"});
}

}  // namespace
}  // namespace ember::nn
