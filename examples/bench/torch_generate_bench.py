#!/usr/bin/env python3
"""PyTorch side of Ember's generation benchmark (examples/bench/bench_generate.cpp).

The book's chapter-4 bonus, ch04/03_kv-cache/gpt_with_kv_cache.py of rasbt/LLMs-from-scratch:
its model (the chapter's GPTModel with a KV cache: use_cache, reset_kv_cache) and its
generate_text_simple_cached, with and without the cache, on GPT_CONFIG_124M with random weights
from torch.manual_seed(123) (the weights Ember draws from manual_seed(123)): "Hello, I am"
(15496, 11, 314, 716), --new-tokens (200) greedy tokens. Timed as bench_generate times Ember:
tokens/s = new tokens over the whole call (medians of --reps with the cache after a warm-up, one
run without), the read bandwidth of a streaming read of a 1 GiB buffer (torch.sum at the same
thread count) right before and after each timed run, the weights one cached token reads, and the
share of that memory-bandwidth floor (each run against the higher bandwidth beside it; and the
median against the best bandwidth of the program).
One JSON line with bench_generate's keys.

Needs Debian's python3-torch (PyTorch 1.13), run with /usr/bin/python3. Example:
  /usr/bin/python3 examples/bench/torch_generate_bench.py --threads 1
"""
import argparse, json, os, resource, sys, time

# Debian's PyTorch does its matrix products in OpenBLAS, whose thread pool ignores
# torch.set_num_threads: pin both pools before torch is imported.
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = _threads
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "fixtures"))
import gen_gpt  # noqa: E402
from gen_gpt import GPT_CONFIG_124M, FeedForward, LayerNorm  # noqa: E402

HELLO = [15496, 11, 314, 716]  # "Hello, I am"


# ---- the bonus's code (gpt_with_kv_cache.py): its new lines, on the chapter's classes as the
# fixture generator has them (scripts/fixtures/gen_gpt.py; the same construction, so the same
# weights from the same seed) ----

class MultiHeadAttention(gen_gpt.MultiHeadAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape
        keys_new = self.W_key(x)
        values_new = self.W_value(x)
        queries = self.W_query(x)
        keys_new = keys_new.view(b, num_tokens, self.num_heads, self.head_dim)
        values_new = values_new.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=1)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=1)
            keys, values = self.cache_k, self.cache_v
        else:
            keys, values = keys_new, values_new
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        num_tokens_Q = queries.shape[-2]
        num_tokens_K = keys.shape[-2]
        if use_cache:
            mask_bool = self.mask.bool()[self.ptr_current_pos:self.ptr_current_pos + num_tokens_Q, :num_tokens_K]
            self.ptr_current_pos += num_tokens_Q
        else:
            mask_bool = self.mask.bool()[:num_tokens_Q, :num_tokens_K]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"],
                                      context_length=cfg["context_length"], num_heads=cfg["n_heads"],
                                      dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x, use_cache=False):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x, use_cache=use_cache)
        x = self.drop_shortcut(x)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        return x + shortcut


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.current_pos = 0
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx, use_cache=False):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        if use_cache:
            pos_ids = torch.arange(self.current_pos, self.current_pos + seq_len, dtype=torch.long)
            self.current_pos += seq_len
        else:
            pos_ids = torch.arange(0, seq_len, dtype=torch.long)
        pos_embeds = self.pos_emb(pos_ids).unsqueeze(0)
        x = tok_embeds + pos_embeds
        x = self.drop_emb(x)
        for blk in self.trf_blocks:
            x = blk(x, use_cache=use_cache)
        x = self.final_norm(x)
        return self.out_head(x)

    def reset_kv_cache(self):
        for blk in self.trf_blocks:
            blk.att.reset_cache()
        self.current_pos = 0


def generate_text_simple_cached(model, idx, max_new_tokens, context_size=None, use_cache=True):
    model.eval()
    ctx_len = context_size or model.pos_emb.num_embeddings
    with torch.no_grad():
        if use_cache:
            model.reset_kv_cache()
            logits = model(idx[:, -ctx_len:], use_cache=True)
            for _ in range(max_new_tokens):
                next_idx = logits[:, -1].argmax(dim=-1, keepdim=True)
                idx = torch.cat([idx, next_idx], dim=1)
                logits = model(next_idx, use_cache=True)
        else:
            for _ in range(max_new_tokens):
                logits = model(idx[:, -ctx_len:], use_cache=False)
                next_idx = logits[:, -1].argmax(dim=-1, keepdim=True)
                idx = torch.cat([idx, next_idx], dim=1)
    return idx


# ---- the measurement ----

def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def read_bandwidth(buffer, passes=3):
    """Bytes/s: the best of `passes` sums of the buffer (1 GiB of float32: a streaming read)."""
    best = 0.0
    for _ in range(passes):
        t = time.perf_counter()
        buffer.sum()
        best = max(best, buffer.numel() * 4 / (time.perf_counter() - t))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=200)
    ap.add_argument("--no-uncached", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    buffer = torch.ones(1 << 28)

    torch.manual_seed(123)
    model = GPTModel(GPT_CONFIG_124M)
    model.eval()
    elements = sum(p.shape[1] if name in ("tok_emb.weight", "pos_emb.weight") else p.numel()
                   for name, p in model.named_parameters())
    weight_bytes = elements * 4
    hello = torch.tensor([HELLO])

    generate_text_simple_cached(model, hello, 8)  # warm-up
    # bandwidths[i] is measured right before run i, bandwidths[i + 1] right after it; each run is
    # held to the higher of its two (bench_generate.cpp says why).
    cached, ids, bandwidths = [], None, [read_bandwidth(buffer)]
    for _ in range(a.reps):
        t = time.perf_counter()
        ids = generate_text_simple_cached(model, hello, a.new_tokens)
        cached.append(time.perf_counter() - t)
        bandwidths.append(read_bandwidth(buffer))
    cached_tok_s = a.new_tokens / median(cached)
    run_bandwidths = [max(bandwidths[i], bandwidths[i + 1]) for i in range(a.reps)]
    shares = [a.new_tokens / cached[i] / (run_bandwidths[i] / weight_bytes) for i in range(a.reps)]
    bandwidth, best_bandwidth = median(run_bandwidths), max(bandwidths)
    uncached_tok_s, same_ids = 0.0, True
    if not a.no_uncached:
        t = time.perf_counter()
        plain = generate_text_simple_cached(model, hello, a.new_tokens, use_cache=False)
        uncached_tok_s = a.new_tokens / (time.perf_counter() - t)
        same_ids = plain.tolist() == ids.tolist()
    floor_tok_s = bandwidth / weight_bytes
    print(json.dumps({
        "impl": f"pytorch-{torch.__version__}", "threads": a.threads, "new_tokens": a.new_tokens,
        "cached_tok_s": round(cached_tok_s, 2), "uncached_tok_s": round(uncached_tok_s, 3),
        "read_gbs": round(bandwidth / 1e9, 2), "read_gbs_best": round(best_bandwidth / 1e9, 2),
        "weight_mb_per_token": round(weight_bytes / 1e6, 1),
        "floor_tok_s": round(floor_tok_s, 2), "floor_share": round(median(shares), 3),
        "floor_share_best": round(cached_tok_s / (best_bandwidth / weight_bytes), 3),
        "same_ids": same_ids, "generated": ids[0].tolist(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
