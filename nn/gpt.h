// The GPT model of chapter 4 of "Build a Large Language Model (From Scratch)", line for line the
// book's Python: the same classes, attribute names and construction order, so the same seed
// draws the same weights as PyTorch:
//   torch.manual_seed(123); model = GPTModel(GPT_CONFIG_124M)
//   ember::manual_seed(123); auto model = std::make_shared<nn::GPTModel>(nn::GPT_CONFIG_124M);
//
//   GPTModel
//     tok_emb     Embedding(vocab_size, emb_dim)
//     pos_emb     Embedding(context_length, emb_dim)
//     drop_emb    Dropout(drop_rate)
//     trf_blocks  Sequential of n_layers TransformerBlock:
//                   x = x + drop_shortcut(att(norm1(x)))    (chapter 3's MultiHeadAttention)
//                   x = x + drop_shortcut(ff(norm2(x)))     (FeedForward: Linear, GELU, Linear)
//     final_norm  LayerNorm(emb_dim)
//     out_head    Linear(emb_dim, vocab_size, bias=False)
//
// The book writes its own LayerNorm (parameters `scale` and `shift`) and GELU (the tanh
// approximation) from elementary ops, so a reader sees the formulas; here they are GPTLayerNorm
// and GPTGELU (printed as LayerNorm() and GELU(), as PyTorch prints the book's classes), beside
// the library's nn::LayerNorm and nn::GELU. Each runs as one fused op (gpt_layer_norm, gpt_gelu:
// the composite's bits forward) unless its `fused` is set false, which runs the book's lines.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/base/generator.h"
#include "core/tensor/tensor.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ember::nn {

// The book's configuration dictionary.
struct GPTConfig {
  int64_t vocab_size = 50257;     // vocabulary size (GPT-2's BPE tokenizer)
  int64_t context_length = 1024;  // the longest input the model takes
  int64_t emb_dim = 768;          // embedding dimension
  int64_t n_heads = 12;           // attention heads per block
  int64_t n_layers = 12;          // transformer blocks
  double drop_rate = 0.1;         // dropout rate
  bool qkv_bias = false;          // bias in the query, key and value projections
};

// GPT-2 small: 163,009,536 parameters (124M with out_head tied to tok_emb, as GPT-2 does).
inline constexpr GPTConfig GPT_CONFIG_124M{50257, 1024, 768, 12, 12, 0.1, false};

// The book's LayerNorm: over the last dim, with the biased variance,
//   scale * (x - mean) / sqrt(var + eps) + shift,  scale = ones, shift = zeros, eps = 1e-5.
class GPTLayerNorm : public Module {
 public:
  explicit GPTLayerNorm(int64_t emb_dim);
  Tensor forward(const Tensor& x) override;

  const double eps = 1e-5;
  Tensor scale;  // [emb_dim], ones
  Tensor shift;  // [emb_dim], zeros
  // One fused op (gpt_layer_norm: the composite's bits forward, an analytic backward) instead
  // of the book's lines; set false to run the composite line by line, as the book writes it.
  bool fused = true;
};

// The book's GELU, the tanh approximation GPT-2 was trained with:
//   0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
class GPTGELU : public Module {
 public:
  GPTGELU();
  Tensor forward(const Tensor& x) override;
  // One fused op (gpt_gelu: the composite's bits, forward and backward) instead of the book's
  // line; set false to run the composite op by op, as the book writes it.
  bool fused = true;
};

// Linear(emb_dim, 4 emb_dim), GELU, Linear(4 emb_dim, emb_dim), as `layers` (a Sequential).
class FeedForward : public Module {
 public:
  explicit FeedForward(const GPTConfig& cfg);
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Sequential> layers;
};

// Pre-LayerNorm block with shortcut connections (listing 4.6).
class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const GPTConfig& cfg);
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, bool use_cache);  // att with its KV cache
  using Module::operator();
  Tensor operator()(const Tensor& x, bool use_cache) { return call(*this, x, use_cache); }

  std::shared_ptr<MultiHeadAttention> att;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<GPTLayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> drop_shortcut;
};

// Listing 4.7. forward takes token ids (int64, [batch, num_tokens], num_tokens <=
// context_length) and returns the logits [batch, num_tokens, vocab_size].
//
// Two options for generation (generate_text_simple and generate take both):
// - use_cache: the KV cache of the book's chapter-4 bonus (gpt_with_kv_cache.py): in_idx holds
//   only the tokens after those already cached, at positions current_pos onwards, in a batch of
//   the cached size; every attention keeps its keys and values. Under NoGradGuard, with every
//   dropout off (eval()); reset_kv_cache() starts again. A bad call is an Error before the
//   cache moves; an error part-way (a hook's, say) makes it refuse until reset. The
//   logits are those of the whole sequence without the cache, bit for bit (the rows a cache
//   holds do not change when later tokens arrive; the one exception, the attention's softmax
//   rows of fewer than 8 keys, is recomputed once, see forward).
// - last_token_only: final_norm and out_head on the last position only, logits [batch, 1,
//   vocab_size]: the bits of that row of the full logits (every row of a product is computed
//   alone: gemm.h), without the other rows' 50,257 logits each.
struct GPTForward {
  bool use_cache = false;
  bool last_token_only = false;
};

class GPTModel : public Module {
 public:
  explicit GPTModel(const GPTConfig& cfg);
  Tensor forward(const Tensor& in_idx) override;
  Tensor forward(const Tensor& in_idx, const GPTForward& options);
  // model(in_idx, {.use_cache = true}): the forward with options, the model's hooks around it.
  using Module::operator();
  Tensor operator()(const Tensor& in_idx, const GPTForward& options) {
    return call(*this, in_idx, options);
  }
  void reset_kv_cache();

  const GPTConfig cfg;
  std::shared_ptr<Embedding> tok_emb, pos_emb;
  std::shared_ptr<Dropout> drop_emb;
  std::shared_ptr<Sequential> trf_blocks;
  std::shared_ptr<GPTLayerNorm> final_norm;
  std::shared_ptr<Linear> out_head;
  int64_t current_pos = 0;  // tokens in the KV cache (the book's current_pos)

 private:
  // The checks of a forward with use_cache, before the cache moves: grad mode, dropout, room,
  // the batch, and that its parts agree (current_pos, the prefix, every attention's cache).
  void check_kv_cache(const Tensor& in_idx, DType dtype);

  Tensor short_prefix_;        // the cached token ids while there are fewer than 8 (see forward)
  int64_t cache_batch_ = 0;    // the batch size of the cached tokens
  bool cache_broken_ = false;  // an Error inside a cached forward: refuse until reset
};

// Listing 4.8: greedy decoding. idx holds token ids [batch, n]; appends max_new_tokens ids, each
// the argmax of the model's next-token distribution given the last context_size ids. Runs under
// NoGradGuard; returns [batch, n + max_new_tokens]. For a GPTModel only the last position's
// logits are computed (GPTForward::last_token_only: the same bits), and with use_cache its KV
// cache feeds each new token alone (the book's generate_text_simple_cached) while the sequence
// fits in context_size; past it, each step runs on the last context_size ids as without the
// cache (their positions shift). The same ids either way. Generation owns the cache: it starts
// from an empty one (reset_kv_cache(): tokens a caller had cached are forgotten) and leaves it
// empty, error or not. A window longer than the model's context_length is an Error, and so are
// logits of another shape than the model's (a hook's).
Tensor generate_text_simple(Module& model, Tensor idx, int64_t max_new_tokens, int64_t context_size,
                            bool use_cache = false);

// Chapter 5's generate: like generate_text_simple, but the logits may be limited to the top_k
// largest of each row (the others set to -inf), divided by temperature and sampled with
// multinomial (from `gen`, the default generator when null), PyTorch's draws for the same seed;
// temperature 0 is greedy (argmax). Stops early when every batch row drew eos_id. top_k must be
// in [1, vocab_size] and eos_id in [0, vocab_size) (Errors, the lower bounds before any step).
// use_cache as in generate_text_simple (the model must be a GPTModel).
Tensor generate(Module& model, Tensor idx, int64_t max_new_tokens, int64_t context_size,
                double temperature = 0.0, std::optional<int64_t> top_k = std::nullopt,
                std::optional<int64_t> eos_id = std::nullopt, Generator* gen = nullptr,
                bool use_cache = false);

}  // namespace ember::nn
