// The attention modules of chapter 3, in the book's order. Each has the book's constructor
// arguments, attribute names and construction order, so the same seed draws the same weights:
//   torch.manual_seed(123); MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
//   ember::manual_seed(123); nn::MultiHeadAttention(3, 2, 6, 0.0, 2)
// Their forwards are compositions of core ops, line for line the book's Python.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor/tensor.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ember::nn {

// The intermediate tensors of one attention forward, kept (with retain_grad) when a module's
// `keep_trace` is set, so a learner can print them and their gradients after backward.
struct AttentionTrace {
  Tensor queries, keys, values;  // after the projections (and head split, for MultiHeadAttention)
  Tensor attn_scores;            // queries @ keys^T (masked, for the causal modules)
  Tensor attn_weights;           // softmax(scores / sqrt(d_k)), after dropout
  Tensor context;                // attn_weights @ values (before out_proj)
};

// 3.4.2, listing 3.1: three weight matrices nn.Parameter(torch.rand(d_in, d_out)).
class SelfAttentionV1 : public Module {
 public:
  SelfAttentionV1(int64_t d_in, int64_t d_out);
  Tensor forward(const Tensor& x) override;

  const int64_t d_out;
  Tensor W_query, W_key, W_value;  // [d_in, d_out], drawn in this order
};

// 3.4.2, listing 3.2: the same with nn.Linear projections (Kaiming-uniform initialised).
class SelfAttentionV2 : public Module {
 public:
  SelfAttentionV2(int64_t d_in, int64_t d_out, bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;

  const int64_t d_out;
  std::shared_ptr<Linear> W_query, W_key, W_value;
};

// 3.5.3, listing 3.3: causal mask and dropout, on batches [b, num_tokens, d_in].
class CausalAttention : public Module {
 public:
  CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                  bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;

  const int64_t d_out;
  std::shared_ptr<Linear> W_query, W_key, W_value;
  std::shared_ptr<Dropout> dropout;
  Tensor mask;  // buffer: triu(ones(context_length, context_length), diagonal=1)
  bool keep_trace = false;
  AttentionTrace trace;
};

// 3.6.1, listing 3.4: num_heads CausalAttention heads side by side; outputs concatenated.
class MultiHeadAttentionWrapper : public Module {
 public:
  MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                            int64_t num_heads, bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<ModuleList> heads;
};

// 3.6.2, listing 3.5: one projection of width d_out split into num_heads heads of head_dim,
// batched matmuls over (batch, head), then out_proj.
//
// With use_cache (chapter 4's bonus, ch04/03_kv-cache/gpt_with_kv_cache.py of the book's
// repository) the keys and values of every token seen are kept, and a forward takes only the
// new tokens: their queries attend to all cached keys (mask[pos : pos + new, :pos + new]).
// Inference only (under NoGradGuard, dropout off: eval()), on a batch of the cached size and
// dtype, each an Error before the cache moves; reset_cache() forgets the tokens. Call it as
// mha(x, use_cache) (the book's self.att(x, use_cache=use_cache)): the module's hooks run, as
// for mha(x).
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                     int64_t num_heads, bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, bool use_cache);
  using Module::operator();
  Tensor operator()(const Tensor& x, bool use_cache) { return call(*this, x, use_cache); }
  void reset_cache();

  const int64_t d_out;
  const int64_t num_heads;
  const int64_t head_dim;
  std::shared_ptr<Linear> W_query, W_key, W_value, out_proj;
  std::shared_ptr<Dropout> dropout;
  Tensor mask;  // buffer: triu(ones(context_length, context_length), diagonal=1)
  bool keep_trace = false;
  AttentionTrace trace;
  // Scores, mask, softmax, dropout and the weighted sum in one fused op (causal_attention,
  // core/ops/attention.h): the same numbers, a fraction of the time and memory. Set to false
  // to run the book's composite line by line (keep_trace, a modified mask and a hook on `dropout` do so too).
  bool fused_attention = true;
  // The KV cache: [b, num_heads, context_length, head_dim] each, rows [0, ptr_current_pos)
  // filled (the book's cache_k, cache_v, ptr_current_pos; allocated once, not concatenated).
  Tensor cache_k, cache_v;
  int64_t ptr_current_pos = 0;
};

}  // namespace ember::nn
