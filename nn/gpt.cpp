#include "nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/base/allocator.h"
#include "core/base/grad_mode.h"
#include "core/base/shape.h"
#include "core/kernels/gelu.h"
#include "core/ops/elementwise.h"
#include "core/ops/nn_ops.h"
#include "core/ops/reduce.h"
#include "core/ops/sampling.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/ops/sort.h"
#include "core/tensor/random.h"

namespace ember::nn {

// ---- LayerNorm (the book's) ----

GPTLayerNorm::GPTLayerNorm(int64_t emb_dim) : Module("LayerNorm") {
  check(emb_dim > 0, "LayerNorm: expected a positive emb_dim, got ", emb_dim);
  scale = Parameter(ones({emb_dim}));
  shift = Parameter(zeros({emb_dim}));
  register_parameter("scale", &scale);  // by address: assigning the member replaces it
  register_parameter("shift", &shift);
}

Tensor GPTLayerNorm::forward(const Tensor& x) {
  ForwardScope scope(*this);

  detail::check_defined(x, "LayerNorm");
  check(x.dim() >= 1 && x.size(-1) == scale.size(0), "LayerNorm: expected input with last dim ",
        scale.size(0), ", got shape ", x.shape());
  if (fused) return gpt_layer_norm(x, scale, shift, eps);
  // The composite, the book's lines (fused = false), for study:
  Tensor mean = x.mean(-1, /*keepdim=*/true);
  Tensor var = ember::var(x, {-1}, Correction(0), /*keepdim=*/true);  // unbiased=False
  Tensor norm_x = (x - mean) / sqrt(var + eps);
  return scale * norm_x + shift;
}

// ---- GELU (the book's) ----

GPTGELU::GPTGELU() : Module("GELU") {}

Tensor GPTGELU::forward(const Tensor& x) {
  ForwardScope scope(*this);

  detail::check_defined(x, "GELU");
  if (fused) return gpt_gelu(x);
  // The composite, the book's line (fused = false), for study:
  //   0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) *
  //                             (x + 0.044715 * torch.pow(x, 3))))
  // with its sqrt(2 / pi) in the default dtype of this call (kernels::book_sqrt_2_over_pi) and
  // 0.044715 (kGeluTanhCubic).
  const double sqrt_2_over_pi = kernels::book_sqrt_2_over_pi();
  return 0.5 * x * (1 + tanh(sqrt_2_over_pi * (x + kernels::kGeluTanhCubic * pow(x, 3))));
}

// ---- FeedForward ----

FeedForward::FeedForward(const GPTConfig& cfg) {
  // Built one after the other (not as arguments of one call, whose order C++ leaves open), so
  // the weights are drawn in PyTorch's order.
  const int64_t hidden = checked_mul(4, cfg.emb_dim, "FeedForward: 4 * emb_dim");
  auto first = std::make_shared<Linear>(cfg.emb_dim, hidden);
  auto gelu = std::make_shared<GPTGELU>();
  auto second = std::make_shared<Linear>(hidden, cfg.emb_dim);
  layers = register_module("layers", std::make_shared<Sequential>(first, gelu, second));
}

Tensor FeedForward::forward(const Tensor& x) {
  ForwardScope scope(*this);
  return (*layers)(x);
}

// ---- TransformerBlock ----

namespace {

// The first Dropout at or below `module` that draws (in training mode with p > 0), or null.
const Dropout* drawing_dropout(const Module& module) {
  const auto* dropout = dynamic_cast<const Dropout*>(&module);
  if (dropout != nullptr && dropout->is_training() && dropout->p > 0) return dropout;
  for (const auto& child : module.children()) {
    if (const Dropout* found = drawing_dropout(*child)) return found;
  }
  return nullptr;
}

// A KV cache's forward (of `module`, named op) with no dropout drawing below it: dropout draws
// for the new tokens only, not for the whole sequence's, so the outputs would not be those
// without the cache.
void check_no_dropout(Module& module, const char* op) {
  const Dropout* dropout = drawing_dropout(module);
  if (dropout == nullptr) return;
  std::string name;
  for (const auto& [path, found] : module.named_modules()) {
    if (found.get() == dropout) name = path;
  }
  fail(op, ": use_cache needs dropout off, got ", name, " with p = ", dropout->p,
       " in training mode (call eval())");
}

}  // namespace

TransformerBlock::TransformerBlock(const GPTConfig& cfg) {
  att = register_module("att", std::make_shared<MultiHeadAttention>(
                                   /*d_in=*/cfg.emb_dim, /*d_out=*/cfg.emb_dim, cfg.context_length,
                                   cfg.drop_rate, cfg.n_heads, cfg.qkv_bias));
  ff = register_module("ff", std::make_shared<FeedForward>(cfg));
  norm1 = register_module("norm1", std::make_shared<GPTLayerNorm>(cfg.emb_dim));
  norm2 = register_module("norm2", std::make_shared<GPTLayerNorm>(cfg.emb_dim));
  drop_shortcut = register_module("drop_shortcut", std::make_shared<Dropout>(cfg.drop_rate));
}

Tensor TransformerBlock::forward(const Tensor& input) { return forward(input, false); }

Tensor TransformerBlock::forward(const Tensor& input, bool use_cache) {
  ForwardScope scope(*this);

  detail::check_defined(input, "TransformerBlock");
  if (use_cache) check_no_dropout(*this, "TransformerBlock");
  // Shortcut connection around the attention block.
  Tensor shortcut = input;
  Tensor x = (*norm1)(input);
  x = (*att)(x, use_cache);  // [batch, num_tokens, emb_dim]
  x = (*drop_shortcut)(x);
  x = x + shortcut;  // add the original input back

  // Shortcut connection around the feed-forward block.
  shortcut = x;
  x = (*norm2)(x);
  x = (*ff)(x);
  x = (*drop_shortcut)(x);
  x = x + shortcut;
  return x;
}

// ---- GPTModel ----

GPTModel::GPTModel(const GPTConfig& cfg_) : cfg(cfg_) {
  check(cfg.vocab_size > 0 && cfg.context_length > 0 && cfg.emb_dim > 0 && cfg.n_heads > 0 &&
            cfg.n_layers >= 0,
        "GPTModel: expected positive sizes, got vocab_size=", cfg.vocab_size,
        ", context_length=", cfg.context_length, ", emb_dim=", cfg.emb_dim,
        ", n_heads=", cfg.n_heads, ", n_layers=", cfg.n_layers);
  check(cfg.emb_dim % cfg.n_heads == 0, "GPTModel: emb_dim (", cfg.emb_dim,
        ") must be divisible by n_heads (", cfg.n_heads, ")");
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(cfg.vocab_size, cfg.emb_dim));
  pos_emb =
      register_module("pos_emb", std::make_shared<Embedding>(cfg.context_length, cfg.emb_dim));
  drop_emb = register_module("drop_emb", std::make_shared<Dropout>(cfg.drop_rate));
  trf_blocks = register_module("trf_blocks", std::make_shared<Sequential>());
  // The model must fit in memory, checked once the first block is built (its own sizes are
  // checked by the tensors it makes) and before the others: n_layers blocks are made one by one,
  // so a huge n_layers of small blocks would otherwise run for days before memory ran out. The
  // estimate (in doubles: no product overflows) counts every parameter and buffer in the default
  // dtype, and about 4 KiB of module objects per block.
  auto check_fits = [&] {
    const double E = static_cast<double>(cfg.emb_dim), V = static_cast<double>(cfg.vocab_size),
                 C = static_cast<double>(cfg.context_length), L = static_cast<double>(cfg.n_layers),
                 bias = cfg.qkv_bias ? 1.0 : 0.0;
    const double block = 3 * (E * E + bias * E) + (E * E + E)  // W_query, W_key, W_value, out_proj
                         + (4 * E * E + 4 * E) + (4 * E * E + E)  // the feed-forward's Linears
                         + 4 * E                                  // norm1, norm2
                         + C * C;                                 // the causal mask
    const double elements = 2 * V * E + C * E + L * block + 2 * E;
    const double bytes =
        elements * static_cast<double>(dtype_size(get_default_dtype())) + L * 4096.0;
    const double physical = detail::physical_memory_bytes();
    check(bytes <= physical, "GPTModel: the configuration (vocab_size=", cfg.vocab_size,
          ", context_length=", cfg.context_length, ", emb_dim=", cfg.emb_dim,
          ", n_heads=", cfg.n_heads, ", n_layers=", cfg.n_layers, ") needs about ",
          std::ceil(bytes / (1 << 20)), " MiB, more than the ",
          static_cast<int64_t>(physical / (1 << 20)), " MiB of memory this machine has");
  };
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    if (i == 1) check_fits();
    trf_blocks->push_back(std::make_shared<TransformerBlock>(cfg));
  }
  final_norm = register_module("final_norm", std::make_shared<GPTLayerNorm>(cfg.emb_dim));
  out_head =
      register_module("out_head", std::make_shared<Linear>(cfg.emb_dim, cfg.vocab_size, false));
}

Tensor GPTModel::forward(const Tensor& in_idx) { return forward(in_idx, GPTForward{}); }

namespace {

// The attention's softmax adds the weights of a row of fewer than 8 keys in order, those of a
// longer row in eight lanes (PyTorch's order: vec_lane_sum, core/kernels/reduce_kernels.h).
// Without a cache every row of a sequence is as long as the sequence, so once it has 8 tokens
// its first rows' weights are added in lanes, where the cache computed them in order.
constexpr int64_t kSoftmaxLanes = 8;

TransformerBlock& block_at(const Sequential& blocks, int64_t i) {
  auto* block = dynamic_cast<TransformerBlock*>(blocks[i].get());
  check(block != nullptr, "GPTModel: the KV cache needs TransformerBlocks in trf_blocks, got ",
        blocks[i]->type_name(), " at ", i);
  return *block;
}

}  // namespace

void GPTModel::reset_kv_cache() {
  // Whatever trf_blocks holds: generation resets the cache when it ends, an error or not.
  for (int64_t i = 0; i < trf_blocks->size(); ++i) {
    if (auto* block = dynamic_cast<TransformerBlock*>((*trf_blocks)[i].get())) {
      block->att->reset_cache();
    }
  }
  current_pos = 0;
  short_prefix_ = Tensor();
  cache_batch_ = 0;
  cache_broken_ = false;
}

void GPTModel::check_kv_cache(const Tensor& in_idx, DType dtype) {
  check(!GradMode::is_enabled(), "GPTModel: use_cache is for inference; run it under NoGradGuard");
  check(!cache_broken_,
        "GPTModel: an error inside an earlier forward with use_cache left the KV cache "
        "incomplete; reset_kv_cache() starts again");
  check_no_dropout(*this, "GPTModel");
  const int64_t seq_len = in_idx.size(1);
  check(current_pos >= 0 && current_pos <= cfg.context_length,
        "GPTModel: current_pos = ", current_pos,
        " is not a length of the KV cache (0 to context_length = ", cfg.context_length,
        "); reset_kv_cache() starts again");
  check(current_pos + seq_len <= cfg.context_length, "GPTModel: the KV cache holds ", current_pos,
        " tokens; ", seq_len, " more would need positions up to ", current_pos + seq_len - 1,
        ", past context_length = ", cfg.context_length, " (reset_kv_cache() starts again)");
  check(current_pos == 0 || in_idx.size(0) == cache_batch_,
        "GPTModel: the KV cache holds a batch of ", cache_batch_, ", got token ids of shape ",
        in_idx.shape(), " (reset_kv_cache() starts again)");
  // The state the cache's parts keep must agree: current_pos, the short prefix's ids, every
  // attention's keys and values (reset or fed alone, or of another dtype since, they do not).
  for (int64_t i = 0; i < trf_blocks->size(); ++i) {
    const MultiHeadAttention& att = *block_at(*trf_blocks, i).att;
    const int64_t held = att.cache_k.defined() ? att.ptr_current_pos : 0;
    if (held != current_pos || att.ptr_current_pos != current_pos) {
      fail("GPTModel: current_pos = ", current_pos, " but the KV cache of trf_blocks.", i,
           ".att holds ", held != current_pos ? held : att.ptr_current_pos,
           " tokens (reset_kv_cache() starts again)");
    }
    if (current_pos > 0 && att.cache_k.dtype() != dtype) {
      fail("GPTModel: the KV cache of trf_blocks.", i, ".att holds ",
           dtype_name(att.cache_k.dtype()), " keys and values, got ", dtype_name(dtype),
           " embeddings (reset_kv_cache() starts again)");
    }
  }
  const int64_t prefix = short_prefix_.defined() ? short_prefix_.size(1) : 0;
  check(current_pos >= kSoftmaxLanes || prefix == current_pos,
        "GPTModel: current_pos = ", current_pos, " but the KV cache holds ", prefix,
        " token ids (reset_kv_cache() starts again)");
}

Tensor GPTModel::forward(const Tensor& in_idx, const GPTForward& options) {
  detail::check_defined(in_idx, "GPTModel");
  check(in_idx.dim() == 2 && in_idx.dtype() == DType::Int64,
        "GPTModel: expected token ids of dtype int64 and shape [batch, num_tokens], got ",
        dtype_name(in_idx.dtype()), " of shape ", in_idx.shape());
  const int64_t seq_len = in_idx.size(1);
  check(seq_len >= 1 && seq_len <= cfg.context_length, "GPTModel: input has ", seq_len,
        " tokens, expected 1 to context_length = ", cfg.context_length, " (input shape ",
        in_idx.shape(), ")");
  ForwardScope scope(*this);
  // The token embeddings first, as the book's forward takes them: an id outside the vocabulary
  // is an Error before the KV cache's state moves, and so is every check of check_kv_cache.
  Tensor tok_embeds = (*tok_emb)(in_idx);  // [batch, seq_len, emb_dim]
  int64_t start = 0;                       // the position of in_idx's first token
  if (options.use_cache) {
    check_kv_cache(in_idx, tok_embeds.dtype());
    // The sequence reaches 8 tokens (kSoftmaxLanes): its cached rows are computed again, once,
    // with the new tokens, as the whole sequence computes them.
    if (current_pos > 0 && current_pos < kSoftmaxLanes && current_pos + seq_len >= kSoftmaxLanes) {
      const Tensor ids = cat({short_prefix_, in_idx}, 1);
      reset_kv_cache();
      Tensor logits;
      try {
        logits = forward(ids, options);
      } catch (...) {
        // The prefix is gone unless the forward cached it all (an error after its blocks).
        if (current_pos != ids.size(1)) cache_broken_ = true;
        throw;
      }
      return options.last_token_only ? logits : logits.narrow(1, ids.size(1) - seq_len, seq_len);
    }
  }

  Tensor x;
  // From the first change to the KV cache's state until every attention holds the new tokens'
  // keys and values, an error (a hook's, say) leaves the cache's parts out of step: it refuses
  // further use until reset.
  try {
    if (options.use_cache) {
      if (current_pos + seq_len < kSoftmaxLanes) {
        short_prefix_ = current_pos == 0 ? in_idx.clone() : cat({short_prefix_, in_idx}, 1);
      } else {
        short_prefix_ = Tensor();
      }
      start = current_pos;
      current_pos += seq_len;
      cache_batch_ = in_idx.size(0);
    }
    Tensor pos_embeds = (*pos_emb)(arange(start, start + seq_len));  // [seq_len, emb_dim]
    x = tok_embeds + pos_embeds;
    x = (*drop_emb)(x);
    if (options.use_cache) {
      for (int64_t i = 0; i < trf_blocks->size(); ++i) x = block_at(*trf_blocks, i)(x, true);
      // A hook may have reset or fed the cache meanwhile: these logits would not be the
      // sequence's.
      const int64_t end = start + seq_len;
      for (int64_t i = 0; i < trf_blocks->size(); ++i) {
        const int64_t held = block_at(*trf_blocks, i).att->ptr_current_pos;
        check(held == end,
              "GPTModel: the KV cache changed during the forward (a hook's?): trf_blocks.", i,
              ".att holds ", held, " tokens, expected ", end, "; reset_kv_cache() starts again");
      }
      check(current_pos == end, "GPTModel: the KV cache changed during the forward (a hook's?): ",
            "current_pos = ", current_pos, ", expected ", end, "; reset_kv_cache() starts again");
    } else {
      x = (*trf_blocks)(x);
    }
  } catch (...) {
    if (options.use_cache) cache_broken_ = true;
    throw;
  }
  if (options.last_token_only) x = x.narrow(1, seq_len - 1, 1);  // [batch, 1, emb_dim]
  x = (*final_norm)(x);
  Tensor logits = (*out_head)(x);  // [batch, seq_len (or 1), vocab_size]
  return logits;
}

// ---- generation ----

namespace {

void check_ids(const Tensor& idx, int64_t max_new_tokens, int64_t context_size, const char* op) {
  check(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::Int64 && idx.size(1) >= 1, op,
        ": expected token ids of dtype int64 and shape [batch, n] with n >= 1, got ",
        idx.defined() ? dtype_name(idx.dtype()) : "undefined", " of shape ",
        idx.defined() ? idx.shape() : Shape{});
  check(max_new_tokens >= 0, op, ": max_new_tokens must be >= 0, got ", max_new_tokens);
  check(context_size >= 1, op, ": context_size must be >= 1, got ", context_size);
  // The output's length, n + max_new_tokens ids per row, must be a size, and the output must fit
  // in memory: one that does not could never be returned (the steps would run until memory ran
  // out, for ever in practice).
  const int64_t length = checked_add(idx.size(1), max_new_tokens, op);
  const double physical = detail::physical_memory_bytes();
  check(
      static_cast<double>(idx.size(0)) * static_cast<double>(length) * sizeof(int64_t) <= physical,
      op, ": the output, [batch, n + max_new_tokens] = [", idx.size(0), ", ", idx.size(1), " + ",
      max_new_tokens, "] int64 ids, would take more than the ",
      static_cast<int64_t>(physical / (1 << 20)), " MiB of memory this machine has");
}

// Sampling takes a distribution from every row of softmax(logits / temperature), and softmax
// gives nan for a row holding nan or +inf or only -inf (it gives no inf and nothing negative).
// PyTorch's book code stops in multinomial then ("probability tensor contains either `inf`,
// `nan` or element < 0"); here, called when multinomial refused `probs`, a row with nan is an
// Error naming generate and its cause (no row with nan: it returns, and multinomial's stands): the
// model's logits (`masked`: after top_k, before the division), or the temperature, which
// PyTorch and Ember round to the logits' dtype before dividing: a tiny one (or one that rounds
// to 0) makes logits / temperature overflow to +-inf, and one beyond the dtype's range is inf,
// which turns the -inf that top_k sets into nan.
void check_distribution(const Tensor& masked, const Tensor& probs, double temperature) {
  const int64_t vocab = probs.size(-1);
  const std::vector<double> p = probs.to_vector<double>();
  const auto bad = std::find_if(p.begin(), p.end(), [](double v) { return std::isnan(v); });
  if (bad == p.end()) return;
  const int64_t row = (bad - p.begin()) / vocab;
  const std::vector<double> raw = masked.narrow(0, row, 1).to_vector<double>();
  bool nan = false, pos_inf = false, finite = false;
  double largest = 0;  // the largest |logit| that is finite
  for (double v : raw) {
    nan = nan || std::isnan(v);
    pos_inf = pos_inf || v == INFINITY;
    if (std::isfinite(v)) {
      finite = true;
      largest = std::max(largest, std::abs(v));
    }
  }
  check(!nan && !pos_inf && finite, "generate: the logits of row ", row,
        nan       ? " hold nan"
        : pos_inf ? " hold inf"
                  : " are all -inf",
        " (the model's output), so softmax(logits / temperature) has no distribution to sample "
        "from; expected finite logits");
  double max_value = 0, min_positive = 0;
  bool inf_temperature = false;
  dispatch_floating(masked.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_value = static_cast<double>(std::numeric_limits<T>::max());
    min_positive = static_cast<double>(std::numeric_limits<T>::denorm_min());
    inf_temperature = std::isinf(static_cast<T>(temperature));
  });
  const std::string dtype = dtype_name(masked.dtype());
  check(!inf_temperature, "generate: temperature ", temperature, " is inf in ", dtype,
        " (above its largest value ", max_value, "), and the logits top_k set to -inf divided by ",
        "it are nan, so softmax(logits / temperature) has no distribution to sample from; "
        "expected a temperature <= ",
        max_value);
  fail("generate: temperature ", temperature, " makes logits / temperature overflow ", dtype,
       " (the largest |logit| of row ", row, " is ", largest, ", and ", dtype, " holds up to ",
       max_value,
       "), so softmax(logits / temperature) has no distribution to sample from; expected a "
       "temperature >= ",
       std::max(largest / max_value, min_positive), ", or 0 for greedy decoding");
}

// The output of a batch of no rows after its step `step`: every step gives it an empty column
// and draws nothing, so the steps after the first (whose model call checks what it checks) only
// make its shape, [0, n + max_new_tokens]; stepping max_new_tokens times (up to what the
// memory check lets through, which no rows never fill) could take days.
Tensor no_rows(const Tensor& idx, int64_t step, int64_t max_new_tokens) {
  return zeros({0, idx.size(1) + (max_new_tokens - step - 1)}, DType::Int64);
}

// The last context_size ids of each row: idx[:, -context_size:].
Tensor crop(const Tensor& idx, int64_t context_size) {
  const int64_t n = idx.size(1);
  return idx.slice(1, std::max<int64_t>(0, n - context_size), n);
}

// The logits of the last position, [batch, vocab_size], from logits [batch, rows, vocab_size]
// a model returned (its hooks may have replaced them) for ids of shape idx_shape.
Tensor last_logits(const Tensor& logits, const Shape& idx_shape, int64_t rows, const char* op) {
  check(logits.defined() && logits.dim() == 3 && logits.size(0) == idx_shape[0] &&
            logits.size(1) == rows && logits.size(2) >= 1,
        op, ": expected the model to return logits [batch, ", rows == 1 ? "1" : "num_tokens",
        ", vocab_size] = [", idx_shape[0], ", ", rows, ", vocab_size] for ids of shape ", idx_shape,
        ", got ", logits.defined() ? logits.shape() : Shape{});
  return logits.select(1, -1);
}

// The next-token logits of a growing sequence, step after step: a GPTModel computes its last
// position only, and with use_cache is fed only the ids its KV cache has not seen, while the
// sequence fits in context_size (its window then starts at position 0, as the cache's does).
class NextTokenLogits {
 public:
  NextTokenLogits(Module& model, int64_t context_size, bool use_cache, const char* op)
      : model_(model),
        gpt_(dynamic_cast<GPTModel*>(&model)),
        context_size_(context_size),
        use_cache_(use_cache),
        op_(op) {
    check(!use_cache || gpt_ != nullptr, op, ": use_cache needs a GPTModel");
    if (use_cache_) {
      gpt_->reset_kv_cache();
      panels_.emplace();  // each token's linear layers read their weights packed
    }
  }
  ~NextTokenLogits() {
    if (use_cache_) gpt_->reset_kv_cache();  // gives the cache's memory back
  }
  NextTokenLogits(const NextTokenLogits&) = delete;
  NextTokenLogits& operator=(const NextTokenLogits&) = delete;

  // [batch, vocab_size] for idx [batch, n].
  Tensor operator()(const Tensor& idx) {
    const int64_t n = idx.size(1);
    const Tensor window = crop(idx, context_size_);
    if (gpt_ == nullptr) return last_logits(model_(window), window.shape(), window.size(1), op_);
    check(window.size(1) <= gpt_->cfg.context_length, op_, ": the last ", window.size(1),
          " ids of the sequence (context_size = ", context_size_,
          ") are more than the model's context_length = ", gpt_->cfg.context_length);
    if (use_cache_ && n <= context_size_) {
      const Tensor fresh = idx.slice(1, fed_, n);  // the ids the cache has not seen
      const Tensor logits = (*gpt_)(fresh, {.use_cache = true, .last_token_only = true});
      // The model's hooks may have fed its cache other ids, or reset it.
      check(gpt_->current_pos == n, op_, ": the model's KV cache holds ", gpt_->current_pos,
            " tokens after the sequence's first ", n,
            " ids were fed to it (did a hook feed or reset it?)");
      fed_ = n;
      return last_logits(logits, idx.shape(), 1, op_);
    }
    return last_logits((*gpt_)(window, {.last_token_only = true}), window.shape(), 1, op_);
  }

 private:
  Module& model_;
  GPTModel* gpt_;
  const int64_t context_size_;
  const bool use_cache_;
  const char* op_;
  int64_t fed_ = 0;  // ids of the sequence in the cache
  std::optional<RowPanelScope> panels_;
};

}  // namespace

Tensor generate_text_simple(Module& model, Tensor idx, int64_t max_new_tokens, int64_t context_size,
                            bool use_cache) {
  check_ids(idx, max_new_tokens, context_size, "generate_text_simple");
  NoGradGuard no_grad;
  NextTokenLogits next_logits(model, context_size, use_cache, "generate_text_simple");
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    Tensor logits = next_logits(idx);  // [batch, vocab_size]
    Tensor probas = softmax(logits, -1);
    Tensor idx_next = argmax(probas, -1, /*keepdim=*/true);  // [batch, 1]
    idx = cat({idx, idx_next}, 1);
    if (idx.size(0) == 0) return no_rows(idx, step, max_new_tokens);
  }
  return idx;
}

Tensor generate(Module& model, Tensor idx, int64_t max_new_tokens, int64_t context_size,
                double temperature, std::optional<int64_t> top_k, std::optional<int64_t> eos_id,
                Generator* gen, bool use_cache) {
  check_ids(idx, max_new_tokens, context_size, "generate");
  check(temperature >= 0 && std::isfinite(temperature),
        "generate: temperature must be finite and >= 0, got ", temperature);
  // The upper bounds, vocab_size, are known with the first logits.
  check(!top_k || *top_k >= 1, "generate: top_k must be >= 1, got ", top_k.value_or(0));
  check(!eos_id || *eos_id >= 0, "generate: eos_id must be >= 0, got ", eos_id.value_or(0));
  NoGradGuard no_grad;
  NextTokenLogits next_logits(model, context_size, use_cache, "generate");
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    Tensor logits = next_logits(idx);  // [batch, vocab_size]
    check(!eos_id || *eos_id < logits.size(-1),
          "generate: eos_id must be in [0, vocab_size = ", logits.size(-1), "), got ",
          eos_id.value_or(0));
    if (top_k) {
      check(*top_k <= logits.size(-1),
            "generate: top_k must be in [1, vocab_size = ", logits.size(-1), "], got ", *top_k);
      // Keep the top_k largest logits of each row; the others become -inf. (The book compares
      // with top_logits[:, -1], which broadcasts right only for a batch of one.)
      Tensor top_logits = topk(logits, *top_k).values;
      Tensor min_val = top_logits.narrow(-1, *top_k - 1, 1);  // [batch, 1]
      logits = where(lt(logits, min_val), full_like(logits, -INFINITY), logits);
    }
    Tensor idx_next;
    if (temperature > 0.0) {
      Tensor probs = softmax(logits / temperature, -1);
      try {
        idx_next = multinomial(probs, 1, /*replacement=*/false, gen);  // [batch, 1]
      } catch (const Error&) {
        // multinomial refuses a row with nan; say why the row has one (only then: the check
        // reads every probability, which multinomial has just done).
        check_distribution(logits, probs, temperature);
        throw;
      }
    } else {
      idx_next = argmax(logits, -1, /*keepdim=*/true);
    }
    if (eos_id) {
      const std::vector<int64_t> next = idx_next.to_vector<int64_t>();
      // (A batch of no rows has none to stop: it gets max_new_tokens columns, as without eos_id.)
      if (!next.empty() &&
          std::all_of(next.begin(), next.end(), [&](int64_t id) { return id == *eos_id; })) {
        break;
      }
    }
    idx = cat({idx, idx_next}, 1);
    if (idx.size(0) == 0) return no_rows(idx, step, max_new_tokens);
  }
  return idx;
}

}  // namespace ember::nn
