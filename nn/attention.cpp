#include "nn/attention.h"

#include <cmath>

#include "core/base/allocator.h"
#include "core/base/grad_mode.h"
#include "core/base/shape.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/tensor/random.h"

namespace ember::nn {

namespace {

// Batched inputs [b, num_tokens, d_in], no longer than the mask.
void check_batch(const Tensor& x, int64_t d_in, int64_t context_length, const char* module) {
  detail::check_defined(x, module);
  check(x.dim() == 3, module, ": expected input of shape [batch, num_tokens, d_in], got ",
        x.shape());
  check(x.size(2) == d_in, module, ": expected d_in = ", d_in, " features, got input of shape ",
        x.shape());
  check(x.size(1) <= context_length, module, ": input has ", x.size(1),
        " tokens but context_length is ", context_length, " (input shape ", x.shape(), ")");
}

// Are rows [r0, r1) of mask[:, :n] those of the causal mask triu(ones(n, n), 1) (1 above the
// diagonal, 0 elsewhere)? The rows a forward reads: all n of them, or a KV cache's new ones.
bool is_causal_mask(const Tensor& mask, int64_t r0, int64_t r1, int64_t n) {
  if (mask.dim() != 2 || mask.size(0) < r1 || mask.size(1) < n || !is_floating(mask.dtype())) {
    return false;
  }
  bool causal = true;
  dispatch_floating(mask.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* m = mask.data_ptr<T>();
    const int64_t row_stride = mask.stride(0), column_stride = mask.stride(1);
    for (int64_t i = r0; i < r1 && causal; ++i) {
      const T* row = m + i * row_stride;
      // n^2 values on every forward (1M at T = 1024): for contiguous rows two passes without
      // branches, which GCC vectorizes (OR-ing into an int; into a bool it does not).
      if (column_stride == 1) {
        int bad = 0;
        for (int64_t j = 0; j <= i; ++j) bad |= row[j] != T(0);
        for (int64_t j = i + 1; j < n; ++j) bad |= row[j] != T(1);
        causal = bad == 0;
        continue;
      }
      for (int64_t j = 0; j < n; ++j) causal &= row[j * column_stride] == (j > i ? T(1) : T(0));
    }
  });
  return causal;
}

// Keeps t in the trace with its gradient, for study.
Tensor keep(const Tensor& t) {
  if (t.requires_grad()) t.retain_grad();
  return t;
}

}  // namespace

// ---- SelfAttention_v1 ----

SelfAttentionV1::SelfAttentionV1(int64_t d_in, int64_t d_out_)
    : Module("SelfAttention_v1"), d_out(d_out_) {
  W_query = Parameter(rand({d_in, d_out}));
  W_key = Parameter(rand({d_in, d_out}));
  W_value = Parameter(rand({d_in, d_out}));
  register_parameter("W_query", &W_query);
  register_parameter("W_key", &W_key);
  register_parameter("W_value", &W_value);
}

Tensor SelfAttentionV1::forward(const Tensor& x) {
  ForwardScope scope(*this);

  detail::check_defined(x, "SelfAttentionV1");
  Tensor keys = matmul(x, W_key);
  Tensor queries = matmul(x, W_query);
  Tensor values = matmul(x, W_value);
  Tensor attn_scores = matmul(queries, keys.t());  // omega
  Tensor attn_weights = softmax(attn_scores / std::sqrt(static_cast<double>(keys.size(-1))), -1);
  return matmul(attn_weights, values);
}

// ---- SelfAttention_v2 ----

SelfAttentionV2::SelfAttentionV2(int64_t d_in, int64_t d_out_, bool qkv_bias)
    : Module("SelfAttention_v2"), d_out(d_out_) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
}

Tensor SelfAttentionV2::forward(const Tensor& x) {
  ForwardScope scope(*this);

  detail::check_defined(x, "SelfAttentionV2");
  Tensor keys = (*W_key)(x);
  Tensor queries = (*W_query)(x);
  Tensor values = (*W_value)(x);
  Tensor attn_scores = matmul(queries, keys.t());
  Tensor attn_weights = softmax(attn_scores / std::sqrt(static_cast<double>(keys.size(-1))), -1);
  return matmul(attn_weights, values);
}

// ---- CausalAttention ----

CausalAttention::CausalAttention(int64_t d_in, int64_t d_out_, int64_t context_length,
                                 double dropout_p, bool qkv_bias)
    : Module("CausalAttention"), d_out(d_out_) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  mask = triu(ones({context_length, context_length}), 1);
  register_buffer("mask", &mask);
}

Tensor CausalAttention::forward(const Tensor& x) {
  ForwardScope scope(*this);

  check_batch(x, W_query->in_features, mask.size(0), "CausalAttention");
  const int64_t num_tokens = x.size(1);
  Tensor keys = (*W_key)(x);
  Tensor queries = (*W_query)(x);
  Tensor values = (*W_value)(x);

  Tensor attn_scores = matmul(queries, keys.transpose(1, 2));
  // In place, as the book: positions above the diagonal (the future) get -inf.
  attn_scores.masked_fill_(mask.to_bool().index({Slice(None, num_tokens), Slice(None, num_tokens)}),
                           -INFINITY);
  Tensor attn_weights = softmax(attn_scores / std::sqrt(static_cast<double>(keys.size(-1))), -1);
  attn_weights = (*dropout)(attn_weights);

  Tensor context_vec = matmul(attn_weights, values);
  if (keep_trace) {
    trace = {keep(queries),     keep(keys),         keep(values),
             keep(attn_scores), keep(attn_weights), keep(context_vec)};
  }
  return context_vec;
}

// ---- MultiHeadAttentionWrapper ----

MultiHeadAttentionWrapper::MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out,
                                                     int64_t context_length, double dropout,
                                                     int64_t num_heads, bool qkv_bias)
    : Module("MultiHeadAttentionWrapper") {
  check(num_heads > 0, "MultiHeadAttentionWrapper: num_heads must be positive, got ", num_heads);
  // The heads' outputs are concatenated: d_out * num_heads features.
  checked_mul(d_out, num_heads, "MultiHeadAttentionWrapper: d_out * num_heads");
  heads = register_module("heads", std::make_shared<ModuleList>());
  // The heads must fit in memory, checked once the first is built (its own sizes are checked by
  // the tensors it makes) and before the others: they are made one by one, so a huge num_heads
  // of small heads would otherwise run for days before memory ran out. The estimate (in
  // doubles: no product overflows) counts each head's weights and causal mask in the default
  // dtype, and about 1 KiB of module objects per head.
  auto check_fits = [&] {
    const double in = static_cast<double>(d_in), out = static_cast<double>(d_out),
                 C = static_cast<double>(context_length), bias = qkv_bias ? 1.0 : 0.0;
    const double head = 3 * (in * out + bias * out) + C * C;
    const double bytes = static_cast<double>(num_heads) *
                         (head * static_cast<double>(dtype_size(get_default_dtype())) + 1024.0);
    const double physical = detail::physical_memory_bytes();
    check(bytes <= physical, "MultiHeadAttentionWrapper: ", num_heads, " heads of d_in=", d_in,
          ", d_out=", d_out, ", context_length=", context_length, " need about ",
          std::ceil(bytes / (1 << 20)), " MiB, more than the ",
          static_cast<int64_t>(physical / (1 << 20)), " MiB of memory this machine has");
  };
  for (int64_t i = 0; i < num_heads; ++i) {
    if (i == 1) check_fits();
    heads->push_back(
        std::make_shared<CausalAttention>(d_in, d_out, context_length, dropout, qkv_bias));
  }
}

Tensor MultiHeadAttentionWrapper::forward(const Tensor& x) {
  ForwardScope scope(*this);

  detail::check_defined(x, "MultiHeadAttentionWrapper");
  std::vector<Tensor> outputs;
  for (const auto& head : *heads) outputs.push_back((*head)(x));
  return cat(outputs, -1);
}

// ---- MultiHeadAttention ----

MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out_, int64_t context_length,
                                       double dropout_p, int64_t num_heads_, bool qkv_bias)
    : Module("MultiHeadAttention"),
      d_out(d_out_),
      num_heads(num_heads_),
      head_dim(num_heads_ > 0 ? d_out_ / num_heads_ : 0) {
  check(num_heads > 0 && d_out % num_heads == 0, "MultiHeadAttention: d_out must be divisible by ",
        "num_heads (got d_out = ", d_out, ", num_heads = ", num_heads, ")");
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  mask = triu(ones({context_length, context_length}), 1);
  register_buffer("mask", &mask);
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward(x, /*use_cache=*/false); }

void MultiHeadAttention::reset_cache() {
  cache_k = Tensor();
  cache_v = Tensor();
  ptr_current_pos = 0;
}

Tensor MultiHeadAttention::forward(const Tensor& x, bool use_cache) {
  ForwardScope scope(*this);

  check_batch(x, W_query->in_features, mask.size(0), "MultiHeadAttention");
  const int64_t b = x.size(0), num_tokens = x.size(1);

  Tensor keys = (*W_key)(x);  // [b, num_tokens, d_out]
  Tensor queries = (*W_query)(x);
  Tensor values = (*W_value)(x);

  // Split the last dim into heads: [b, num_tokens, num_heads, head_dim]...
  keys = keys.view({b, num_tokens, num_heads, head_dim});
  values = values.view({b, num_tokens, num_heads, head_dim});
  queries = queries.view({b, num_tokens, num_heads, head_dim});
  // ...and bring heads forward: [b, num_heads, num_tokens, head_dim].
  keys = keys.transpose(1, 2);
  queries = queries.transpose(1, 2);
  values = values.transpose(1, 2);

  // The new tokens' positions are [start, start + num_tokens); they see keys [0, num_keys).
  int64_t start = 0, num_keys = num_tokens;
  if (use_cache) {
    // Every check before the cache moves: an Error leaves it as it was.
    const int64_t context_length = mask.size(0);
    check(!GradMode::is_enabled(),
          "MultiHeadAttention: use_cache is for inference; run it under NoGradGuard");
    // Dropout draws for the new rows only, not for the whole sequence's: other numbers.
    check(!dropout->is_training() || dropout->p == 0,
          "MultiHeadAttention: use_cache needs dropout off, got p = ", dropout->p,
          " in training mode (call eval())");
    const int64_t rows = cache_k.defined() ? cache_k.size(2) : 0;
    check(ptr_current_pos >= 0 && ptr_current_pos <= rows &&
              (ptr_current_pos == 0 || cache_v.defined()),
          "MultiHeadAttention: ptr_current_pos = ", ptr_current_pos,
          " is not a length of its KV cache (0 to ", rows, "); reset_cache() starts again");
    check(ptr_current_pos + num_tokens <= context_length, "MultiHeadAttention: the KV cache holds ",
          ptr_current_pos, " tokens; ", num_tokens,
          " more would pass context_length = ", context_length,
          " (call reset_cache() to start again)");
    if (ptr_current_pos > 0) {
      check(cache_k.size(0) == b, "MultiHeadAttention: the KV cache holds a batch of ",
            cache_k.size(0), ", got a batch of ", b, " (input shape ", x.shape(),
            "; reset_cache() starts again)");
      check(cache_k.dtype() == keys.dtype(), "MultiHeadAttention: the KV cache holds ",
            dtype_name(cache_k.dtype()), " keys and values, got ", dtype_name(keys.dtype()),
            " ones (input of dtype ", dtype_name(x.dtype()), "; reset_cache() starts again)");
    } else if (!cache_k.defined() || cache_k.size(0) != b || cache_k.dtype() != keys.dtype()) {
      cache_k = empty({b, num_heads, context_length, head_dim}, keys.dtype());
      cache_v = empty({b, num_heads, context_length, head_dim}, keys.dtype());
    }
    start = ptr_current_pos;
    num_keys = start + num_tokens;
    cache_k.narrow(2, start, num_tokens).copy_(keys);
    cache_v.narrow(2, start, num_tokens).copy_(values);
    keys = cache_k.narrow(2, 0, num_keys);  // [b, num_heads, num_keys, head_dim]
    values = cache_v.narrow(2, 0, num_keys);
    ptr_current_pos = num_keys;
  }

  // (A hook on `dropout` must see attn_weights, so it takes the book's lines too.)
  if (fused_attention && !keep_trace && !dropout->has_hooks() &&
      is_causal_mask(mask, start, num_keys, num_keys)) {
    // The lines below in one op (same numbers, same dropout draws): causal_attention, whose
    // derivation is in core/ops/attention.cpp (its kernel in core/kernels/attention.cpp).
    Tensor context = causal_attention(queries, keys, values, dropout->p, dropout->is_training());
    Tensor context_vec = context.transpose(1, 2).contiguous().view({b, num_tokens, d_out});
    return (*out_proj)(context_vec);
  }

  // One [num_tokens, num_keys] score matrix per (batch, head).
  Tensor attn_scores = matmul(queries, keys.transpose(2, 3));
  Tensor mask_bool =
      mask.to_bool().index({Slice(start, start + num_tokens), Slice(None, num_keys)});
  attn_scores.masked_fill_(mask_bool, -INFINITY);

  Tensor attn_weights = softmax(attn_scores / std::sqrt(static_cast<double>(keys.size(-1))), -1);
  attn_weights = (*dropout)(attn_weights);

  // [b, num_tokens, num_heads, head_dim], then heads merged back into d_out.
  Tensor context = matmul(attn_weights, values);
  Tensor context_vec = context.transpose(1, 2);
  context_vec = context_vec.contiguous().view({b, num_tokens, d_out});
  if (keep_trace) {
    trace = {keep(queries),     keep(keys),         keep(values),
             keep(attn_scores), keep(attn_weights), keep(context)};
  }
  return (*out_proj)(context_vec);
}

}  // namespace ember::nn
