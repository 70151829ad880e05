// Generation at the GEMM rate (nn/gpt.h): an evaluation forward builds no graph and reuses its
// buffers; the last position's logits alone (GPTForward::last_token_only) and the KV cache
// (GPTForward::use_cache, the book's chapter-4 bonus) give the bits of the whole forward.
//
// The token ids are the book's prompts under GPT-2's tokenizer: "Every effort moves you" =
// 6109 3626 6100 345, "Hello, I am" = 15496 11 314 716.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/allocator.h"
#include "core/base/grad_mode.h"
#include "core/graph/graph_stats.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/tensor/random.h"
#include "nn/gpt.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

using test::bits_of;
using test::expect_error;

const std::vector<int64_t> kEveryEffort = {6109, 3626, 6100, 345};
const std::vector<int64_t> kHelloIAm = {15496, 11, 314, 716};

// GPT-2's vocabulary and head size (64) with fewer, narrower layers, so that a test runs in
// moments: context 128 takes the attention kernel past its 48-row blocks.
GPTConfig small_config() {
  return GPTConfig{.vocab_size = 50257,
                   .context_length = 128,
                   .emb_dim = 128,
                   .n_heads = 2,
                   .n_layers = 2,
                   .drop_rate = 0.1,
                   .qkv_bias = false};
}

std::shared_ptr<GPTModel> small_model() {
  manual_seed(123);
  auto model = std::make_shared<GPTModel>(small_config());
  model->eval();
  return model;
}

Tensor ids_of(const std::vector<int64_t>& ids) {
  return from_vector(std::vector<double>(ids.begin(), ids.end()),
                     {1, static_cast<int64_t>(ids.size())}, DType::Int64);
}

// A prompt of n ids spread over the vocabulary (a fixed linear congruential sequence).
std::vector<int64_t> long_prompt(int64_t n) {
  std::vector<int64_t> ids;
  uint64_t x = 7;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ids.push_back(static_cast<int64_t>((x >> 33) % 50257));
  }
  return ids;
}

// ---- an evaluation forward ----

TEST(EvalForward, BuildsNoGraph) {
  auto model = small_model();
  const Tensor ids = ids_of(kEveryEffort);
  const int64_t before = autograd::nodes_recorded();
  {
    NoGradGuard no_grad;
    const Tensor logits = model->forward(ids);
    EXPECT_EQ(autograd::nodes_recorded(), before);  // no node, so nothing saved for backward
    EXPECT_FALSE(logits.requires_grad());
    EXPECT_EQ(logits.grad_fn(), nullptr);
    model->forward(ids, {.use_cache = true, .last_token_only = true});
    generate_text_simple(*model, ids, 3, 128, true);
    EXPECT_EQ(autograd::nodes_recorded(), before);
  }
  // The counter counts: the same forward with gradients on records the graph.
  const Tensor logits = model->forward(ids);
  EXPECT_GT(autograd::nodes_recorded(), before + 20);
}

TEST(EvalForward, ReusesItsBuffersPassAfterPass) {
  auto model = small_model();
  const Tensor ids = ids_of(long_prompt(100)).view({2, 50});
  NoGradGuard no_grad;
  for (int pass = 0; pass < 2; ++pass) model->forward(ids);  // the allocator's cache warms up
  const MemoryStats warm = memory_stats();
  for (int pass = 0; pass < 5; ++pass) model->forward(ids);
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.mapped_in_use, warm.mapped_in_use);
  EXPECT_EQ(after.mapped_in_use + after.mapped_kept, warm.mapped_in_use + warm.mapped_kept);
  EXPECT_EQ(after.mapped_peak, warm.mapped_peak);
}

// ---- the last position only ----

TEST(LastTokenOnly, IsTheLastRowOfTheFullLogitsBitForBit) {
  auto model = small_model();
  NoGradGuard no_grad;
  for (int64_t n : {1, 4, 7, 8, 9, 48, 49, 100, 128}) {
    const Tensor ids = ids_of(long_prompt(n));
    const Tensor full = model->forward(ids);
    const Tensor last = model->forward(ids, {.last_token_only = true});
    ASSERT_EQ(last.shape(), (Shape{1, 1, 50257}));
    EXPECT_EQ(bits_of(last), bits_of(full.narrow(1, n - 1, 1))) << "n = " << n;
  }
}

// ---- the KV cache ----

// Feeds prompt then `steps` greedy tokens through the cache, comparing at every step the cached
// logits with the uncached forward over the whole sequence (every position, bit for bit).
void expect_cache_matches(GPTModel& model, const std::vector<int64_t>& prompt, int64_t steps) {
  NoGradGuard no_grad;
  model.reset_kv_cache();
  Tensor idx = ids_of(prompt);
  Tensor cached = model.forward(idx, {.use_cache = true});  // the prompt's positions
  for (int64_t step = 0;; ++step) {
    const Tensor full = model.forward(idx);
    const int64_t n = idx.size(1), fresh = cached.size(1);
    ASSERT_EQ(bits_of(cached), bits_of(full.narrow(1, n - fresh, fresh)))
        << "step " << step << ", " << n << " tokens";
    if (step == steps) break;
    const Tensor next = argmax(full.select(1, -1), -1, /*keepdim=*/true);
    idx = cat({idx, next}, 1);
    cached = model.forward(next, {.use_cache = true});
  }
  EXPECT_EQ(model.current_pos, idx.size(1));
}

TEST(KVCache, LogitsEqualTheUncachedOnesAtEveryStep) {
  auto model = small_model();
  expect_cache_matches(*model, kEveryEffort, 12);  // across 8 tokens (see GPTModel::forward)
  expect_cache_matches(*model, kHelloIAm, 12);
  expect_cache_matches(*model, {kHelloIAm[0]}, 10);    // from a single token
  expect_cache_matches(*model, long_prompt(118), 10);  // up to context_length (128)
}

TEST(KVCache, TheBooksCompositeAttentionToo) {
  auto model = small_model();
  for (int64_t i = 0; i < model->trf_blocks->size(); ++i) {
    std::dynamic_pointer_cast<TransformerBlock>((*model->trf_blocks)[i])->att->fused_attention =
        false;
  }
  expect_cache_matches(*model, kEveryEffort, 10);
  expect_cache_matches(*model, long_prompt(60), 5);
}

TEST(KVCache, SeveralNewTokensAtOnce) {
  auto model = small_model();
  const Tensor ids = ids_of(long_prompt(30));
  NoGradGuard no_grad;
  model->reset_kv_cache();
  int64_t pos = 0;
  for (int64_t chunk : {3, 2, 9, 16}) {  // 3 + 2 < 8, then across 8, then long chunks
    const Tensor cached = model->forward(ids.narrow(1, pos, chunk), {.use_cache = true});
    pos += chunk;
    const Tensor full = model->forward(ids.narrow(1, 0, pos));  // the sequence so far
    EXPECT_EQ(bits_of(cached), bits_of(full.narrow(1, pos - chunk, chunk))) << pos << " tokens";
  }
}

TEST(KVCache, RefusesToRunPastContextLength) {
  auto model = small_model();
  NoGradGuard no_grad;
  model->forward(ids_of(long_prompt(120)), {.use_cache = true});
  model->forward(ids_of(long_prompt(8)), {.use_cache = true});  // positions 120..127: full
  expect_error([&] { model->forward(ids_of({1}), {.use_cache = true}); },
               "the KV cache holds 128 tokens; 1 more would need positions up to 128, past "
               "context_length = 128");
  model->reset_kv_cache();
  EXPECT_EQ(model->current_pos, 0);
  model->forward(ids_of({1}), {.use_cache = true});  // room again
  EXPECT_EQ(model->current_pos, 1);
}

// An id outside the vocabulary is an Error before the cache moves: the next tokens continue
// the sequence as if the bad call had not happened, below 8 cached tokens and above.
TEST(KVCache, ABadIdLeavesTheCacheAsItWas) {
  auto model = small_model();
  const std::vector<int64_t> prompt = long_prompt(12);
  NoGradGuard no_grad;
  for (int64_t before : {3, 9}) {
    model->reset_kv_cache();
    const Tensor ids = ids_of(prompt);
    model->forward(ids.narrow(1, 0, before), {.use_cache = true});
    expect_error([&] { model->forward(ids_of({50257}), {.use_cache = true}); },
                 "embedding: index 50257 is out of range for num_embeddings=50257");
    EXPECT_EQ(model->current_pos, before);
    const Tensor cached = model->forward(ids.narrow(1, before, 1), {.use_cache = true});
    const Tensor full = model->forward(ids.narrow(1, 0, before + 1));
    EXPECT_EQ(bits_of(cached), bits_of(full.narrow(1, before, 1))) << before << " tokens first";
  }
}

// A batch of another size is an Error before the cache moves, below 8 cached tokens (where the
// cache keeps their ids) and above: the sequence goes on as if the bad call had not happened.
TEST(KVCache, RefusesABatchOfAnotherSizeBeforeItMoves) {
  auto model = small_model();
  const std::vector<int64_t> prompt = long_prompt(12);
  NoGradGuard no_grad;
  for (int64_t before : {3, 9}) {
    model->reset_kv_cache();
    const Tensor ids = ids_of(prompt);
    model->forward(ids.narrow(1, 0, before), {.use_cache = true});
    for (int64_t n : {1, 6}) {  // (3 + 6 tokens would reach 8: the prefix's rows again)
      const Tensor two = ids_of(long_prompt(2 * n)).view({2, n});
      expect_error([&] { model->forward(two, {.use_cache = true}); },
                   "GPTModel: the KV cache holds a batch of 1, got token ids of shape [2, " +
                       std::to_string(n) + "]");
      EXPECT_EQ(model->current_pos, before);
    }
    const Tensor cached = model->forward(ids.narrow(1, before, 1), {.use_cache = true});
    const Tensor full = model->forward(ids.narrow(1, 0, before + 1));
    EXPECT_EQ(bits_of(cached), bits_of(full.narrow(1, before, 1))) << before << " tokens first";
  }
}

// An Error part-way through a cached forward, once its state has begun to move (here a hook's:
// on the position embedding, the dropout after it, a block; or on the token embedding while the
// 8th token recomputes the prefix's rows), leaves the cache's parts out of step: it refuses to
// go on until reset_kv_cache(), below 8 cached tokens and above.
TEST(KVCache, AnErrorPartWayNeedsAReset) {
  auto model = small_model();
  const Tensor ids = ids_of(long_prompt(12));
  NoGradGuard no_grad;
  struct Case {
    std::string name;
    std::shared_ptr<Module> module;
    int failing_call;              // the hook's call that fails
    std::vector<int64_t> befores;  // tokens cached before the 3 that fail
  };
  const std::vector<Case> cases = {
      {"pos_emb", model->pos_emb, 1, {3, 5, 9}},
      {"drop_emb", model->drop_emb, 1, {3, 5, 9}},
      {"trf_blocks.1", (*model->trf_blocks)[1], 1, {3, 5, 9}},
      {"tok_emb", model->tok_emb, 2, {5}}};  // 5 + 3: its second call recomputes the prefix
  for (const Case& c : cases) {
    for (int64_t before : c.befores) {
      model->reset_kv_cache();
      model->forward(ids.narrow(1, 0, before), {.use_cache = true});
      int calls = 0;
      auto handle = c.module->register_forward_hook([&](Module&, const TensorList&, const Tensor&) {
        if (++calls == c.failing_call) fail("hook on ", c.name);
      });
      const Tensor three = ids.narrow(1, before, 3);
      expect_error([&] { model->forward(three, {.use_cache = true}); }, "hook on " + c.name);
      handle.remove();
      expect_error([&] { model->forward(three, {.use_cache = true}); },
                   "left the KV cache incomplete; reset_kv_cache() starts again");
    }
  }
  model->reset_kv_cache();
  const Tensor cached = model->forward(ids_of({5, 6}), {.use_cache = true});
  const Tensor full = model->forward(ids_of({5, 6}));
  EXPECT_EQ(bits_of(cached), bits_of(full));
}

// An Error after the blocks (a hook's on final_norm) leaves every part of the cache whole: the
// next tokens go on.
TEST(KVCache, AnErrorAfterTheBlocksLeavesItWhole) {
  auto model = small_model();
  const Tensor ids = ids_of(long_prompt(16));
  NoGradGuard no_grad;
  for (int64_t before : {5, 9}) {  // 5 + 3: the error after the prefix's rows are recomputed
    model->reset_kv_cache();
    model->forward(ids.narrow(1, 0, before), {.use_cache = true});
    auto handle = model->final_norm->register_forward_hook(
        [](Module&, const TensorList&, const Tensor&) { fail("hook on final_norm"); });
    expect_error([&] { model->forward(ids.narrow(1, before, 3), {.use_cache = true}); },
                 "hook on final_norm");
    handle.remove();
    EXPECT_EQ(model->current_pos, before + 3);
    const Tensor cached = model->forward(ids.narrow(1, before + 3, 1), {.use_cache = true});
    const Tensor full = model->forward(ids.narrow(1, 0, before + 4));
    EXPECT_EQ(bits_of(cached), bits_of(full.narrow(1, before + 3, 1))) << before;
  }
}

// A hook that resets the cache during a cached forward (on a block, or on the position
// embedding) leaves logits that are not the sequence's: an Error at once, and the cache
// refuses to go on until reset.
TEST(KVCache, AHookResettingItDuringTheForwardIsAnError) {
  auto model = small_model();
  const Tensor ids = ids_of(long_prompt(10));
  NoGradGuard no_grad;
  const std::vector<std::pair<std::shared_ptr<Module>, std::string>> cases = {
      {(*model->trf_blocks)[0], "trf_blocks.0.att holds 0 tokens, expected 10"},
      {model->pos_emb, "trf_blocks.0.att holds 1 tokens, expected 10"}};
  for (const auto& [module, message] : cases) {
    model->reset_kv_cache();
    model->forward(ids.narrow(1, 0, 9), {.use_cache = true});
    auto handle = module->register_forward_hook(
        [&](Module&, const TensorList&, const Tensor&) { model->reset_kv_cache(); });
    expect_error([&] { model->forward(ids.narrow(1, 9, 1), {.use_cache = true}); },
                 "GPTModel: the KV cache changed during the forward (a hook's?): " + message);
    handle.remove();
    expect_error([&] { model->forward(ids.narrow(1, 9, 1), {.use_cache = true}); },
                 "left the KV cache incomplete; reset_kv_cache() starts again");
  }
}

// The cache's parts are public members, the book's attributes (current_pos, each attention's
// ptr_current_pos and tensors): when they no longer agree (one attention reset alone,
// current_pos set by hand, the model converted to float64 since), the cached forward is an
// Error, not logits computed from positions that do not match.
TEST(KVCache, ItsPartsMustAgree) {
  auto model = small_model();
  const Tensor ids = ids_of(long_prompt(10));
  NoGradGuard no_grad;
  auto att_of = [&](int64_t i) {
    return std::dynamic_pointer_cast<TransformerBlock>((*model->trf_blocks)[i])->att;
  };
  for (int64_t before : {3, 9}) {
    model->reset_kv_cache();
    model->forward(ids.narrow(1, 0, before), {.use_cache = true});
    att_of(1)->reset_cache();
    expect_error([&] { model->forward(ids.narrow(1, before, 1), {.use_cache = true}); },
                 "GPTModel: current_pos = " + std::to_string(before) +
                     " but the KV cache of trf_blocks.1.att holds 0 tokens");

    model->reset_kv_cache();
    model->forward(ids.narrow(1, 0, before), {.use_cache = true});
    model->current_pos = 2;
    expect_error([&] { model->forward(ids.narrow(1, before, 1), {.use_cache = true}); },
                 "GPTModel: current_pos = 2 but the KV cache of trf_blocks.0.att holds " +
                     std::to_string(before) + " tokens");
    model->current_pos = 0;
    expect_error([&] { model->forward(ids.narrow(1, before, 1), {.use_cache = true}); },
                 "GPTModel: current_pos = 0 but the KV cache of trf_blocks.0.att holds " +
                     std::to_string(before) + " tokens");
    model->current_pos = -1;
    expect_error([&] { model->forward(ids.narrow(1, before, 1), {.use_cache = true}); },
                 "GPTModel: current_pos = -1 is not a length of the KV cache (0 to "
                 "context_length = 128)");
  }
  // Without attentions, the ids the cache keeps below 8 tokens must agree too.
  GPTConfig cfg = small_config();
  cfg.n_layers = 0;
  GPTModel no_blocks(cfg);
  no_blocks.eval();
  no_blocks.forward(ids.narrow(1, 0, 3), {.use_cache = true});
  no_blocks.current_pos = 5;
  expect_error([&] { no_blocks.forward(ids.narrow(1, 3, 1), {.use_cache = true}); },
               "GPTModel: current_pos = 5 but the KV cache holds 3 token ids");

  model->reset_kv_cache();
  model->forward(ids.narrow(1, 0, 9), {.use_cache = true});
  model->double_();
  expect_error([&] { model->forward(ids.narrow(1, 9, 1), {.use_cache = true}); },
               "GPTModel: the KV cache of trf_blocks.0.att holds float32 keys and values, got "
               "float64 embeddings");
  EXPECT_EQ(model->current_pos, 9);
  model->reset_kv_cache();  // a cache of float64 now, the logits of the float64 model
  const Tensor cached = model->forward(ids, {.use_cache = true});
  EXPECT_EQ(cached.dtype(), DType::Float64);
  EXPECT_EQ(cached.to_vector<double>(), model->forward(ids).to_vector<double>());
}

// Dropout would draw for the new tokens only, not for the whole sequence: the cache needs every
// dropout off, wherever it is (a block's attention in training mode in an eval() model too, a
// block's drop_shortcut when the block is called alone).
// Dropout with p = 0 draws nothing: in training mode it still gives the uncached logits.
TEST(KVCache, NeedsDropoutOff) {
  auto model = small_model();
  const Tensor ids = ids_of(kEveryEffort);
  NoGradGuard no_grad;
  model->train();
  expect_error([&] { model->forward(ids, {.use_cache = true}); },
               "GPTModel: use_cache needs dropout off, got drop_emb with p = 0.1 in training mode "
               "(call eval())");
  expect_error([&] { generate_text_simple(*model, ids, 3, 128, true); },
               "GPTModel: use_cache needs dropout off, got drop_emb with p = 0.1");
  model->eval();
  model->forward(ids, {.use_cache = true});
  (*model->trf_blocks)[1]->named_modules()["att.dropout"]->train();
  expect_error([&] { model->forward(ids_of({1}), {.use_cache = true}); },
               "GPTModel: use_cache needs dropout off, got trf_blocks.1.att.dropout with p = 0.1");
  EXPECT_EQ(model->current_pos, 4);

  // A TransformerBlock called with use_cache checks its own: drop_shortcut too.
  model->reset_kv_cache();
  auto block = std::dynamic_pointer_cast<TransformerBlock>((*model->trf_blocks)[0]);
  block->drop_shortcut->train();
  expect_error(
      [&] {
        (*block)(rand({1, 3, 128}), true);
      },
      "TransformerBlock: use_cache needs dropout off, got drop_shortcut with p = 0.1 in "
      "training mode (call eval())");
  EXPECT_EQ(block->att->ptr_current_pos, 0);

  GPTConfig no_dropout = small_config();
  no_dropout.drop_rate = 0.0;
  manual_seed(123);
  GPTModel training(no_dropout);  // in training mode
  const Tensor cached = training.forward(ids, {.use_cache = true});
  EXPECT_EQ(bits_of(cached), bits_of(training.forward(ids)));
}

TEST(KVCache, IsForInferenceOnly) {
  auto model = small_model();
  expect_error([&] { model->forward(ids_of(kHelloIAm), {.use_cache = true}); },
               "use_cache is for inference; run it under NoGradGuard");
}

TEST(KVCache, GenerateGivesTheSameTokens) {
  auto model = small_model();
  for (const auto& prompt : {kEveryEffort, kHelloIAm}) {
    const Tensor plain = generate_text_simple(*model, ids_of(prompt), 20, 128);
    const Tensor cached = generate_text_simple(*model, ids_of(prompt), 20, 128, true);
    EXPECT_EQ(cached.to_vector<int64_t>(), plain.to_vector<int64_t>());
  }
  // Past context_size the window slides and the cache steps aside: still the same tokens.
  const Tensor plain = generate_text_simple(*model, ids_of(kHelloIAm), 12, 10);
  const Tensor cached = generate_text_simple(*model, ids_of(kHelloIAm), 12, 10, true);
  EXPECT_EQ(cached.to_vector<int64_t>(), plain.to_vector<int64_t>());
  // Sampling with temperature and top-k, from the same seed.
  Generator g1(123), g2(123);
  const Tensor sampled = generate(*model, ids_of(kEveryEffort), 15, 128, 1.4, 25, {}, &g1);
  const Tensor sampled_cached =
      generate(*model, ids_of(kEveryEffort), 15, 128, 1.4, 25, {}, &g2, true);
  EXPECT_EQ(sampled_cached.to_vector<int64_t>(), sampled.to_vector<int64_t>());
  EXPECT_EQ(model->current_pos, 0);  // generate gives the cache back
}

// Generation feeds the cache the ids it has not seen, and checks what comes back: a model whose
// hooks reset its cache or feed it other ids, or replace its logits with another shape, is an
// Error naming generation, not other tokens than without the cache.
TEST(KVCache, GenerateChecksWhatTheModelDid) {
  auto model = small_model();
  const Tensor ids = ids_of(kHelloIAm);
  {
    auto handle = model->register_forward_hook(
        [&](Module&, const TensorList&, const Tensor&) { model->reset_kv_cache(); });
    expect_error([&] { generate_text_simple(*model, ids, 5, 128, true); },
                 "generate_text_simple: the model's KV cache holds 0 tokens after the sequence's "
                 "first 4 ids were fed to it (did a hook feed or reset it?)");
    handle.remove();
  }
  {
    auto handle = model->register_forward_pre_hook(
        [](Module&, const TensorList& input) -> std::optional<TensorList> {
          return TensorList{cat({input[0], input[0]}, 1)};
        });
    expect_error([&] { generate(*model, ids, 5, 128, 0.0, {}, {}, nullptr, true); },
                 "generate: the model's KV cache holds 8 tokens after the sequence's first 4 ids "
                 "were fed to it");
    handle.remove();
  }
  {
    auto handle = model->register_forward_hook(
        [](Module&, const TensorList&, const Tensor& output) -> std::optional<Tensor> {
          return output.select(1, 0);
        });
    for (bool use_cache : {false, true}) {
      expect_error([&] { generate_text_simple(*model, ids, 5, 128, use_cache); },
                   "generate_text_simple: expected the model to return logits [batch, 1, "
                   "vocab_size] = [1, 1, vocab_size] for ids of shape [1, 4], got [1, 50257]");
    }
    handle.remove();
  }
  EXPECT_EQ(model->current_pos, 0);  // given back, error or not
  const Tensor plain = generate_text_simple(*model, ids, 5, 128);
  EXPECT_EQ(generate_text_simple(*model, ids, 5, 128, true).to_vector<int64_t>(),
            plain.to_vector<int64_t>());
}

// Generation resets the cache when it ends, whatever trf_blocks holds by then (here a hook adds
// a module that is no TransformerBlock): an Error, not std::terminate from a destructor.
TEST(KVCache, GenerateGivesTheCacheBackWhateverTrfBlocksHolds) {
  auto model = small_model();
  auto handle = model->register_forward_hook([&](Module&, const TensorList&, const Tensor&) {
    if (model->trf_blocks->size() == 2) model->trf_blocks->push_back(std::make_shared<GPTGELU>());
  });
  expect_error([&] { generate_text_simple(*model, ids_of(kHelloIAm), 5, 128, true); },
               "GPTModel: the KV cache needs TransformerBlocks in trf_blocks, got GELU at 2");
  EXPECT_EQ(model->current_pos, 0);
}

// A window longer than the model's context_length (context_size larger than it) is an Error
// naming generation and both sizes, with the cache as without it.
TEST(KVCache, GenerateNamesAContextSizePastContextLength) {
  auto model = small_model();
  for (bool use_cache : {false, true}) {
    expect_error(
        [&] {
          generate(*model, ids_of(long_prompt(120)), 20, 1000, 0.0, {}, {}, nullptr, use_cache);
        },
        "generate: the last 129 ids of the sequence (context_size = 1000) are more than the "
        "model's context_length = 128");
  }
}

}  // namespace
}  // namespace ember::nn
