#!/usr/bin/env python3
"""PyTorch side of Ember's attention benchmark.

Times the book's chapter-3 MultiHeadAttention (composed from matmul, masked_fill, softmax,
dropout) on CPU: forward alone under no_grad, and forward + backward of out.sum().
Prints one JSON line per configuration, so a benchmark run can put Ember's figure beside it.

Needs PyTorch: `apt-get install -y python3-torch` (Debian's 1.13), run with Debian's own python3
(the one that package installs into, not a pyenv python3 earlier on the PATH).
A copy of ../shared/bench/torch_attention_bench.py kept with Ember's bench_attention (scripts/bench
runs the two alternately); it adds peak_rss_mb (the process's peak resident set) and prints times
with 3 decimals, --calls n (time per call over n calls, for the microsecond-size book module), and
the median process CPU times fwd_cpu_ms / fwdbwd_cpu_ms (steadier than wall time on a busy machine).
Example: python3 torch_attention_bench.py --threads 2 --batch 1 --tokens 1024 --dim 768 --heads 12
"""
import argparse, json, os, resource, sys, time

# Debian's PyTorch does its matrix products in OpenBLAS, whose thread pool ignores
# torch.set_num_threads: pin both pools before torch is imported.
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = _threads
import torch, torch.nn as nn  # noqa: E402


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        s = q @ k.transpose(2, 3)
        s.masked_fill_(self.mask.bool()[:n, :n], -torch.inf)
        w = self.dropout(torch.softmax(s / k.shape[-1] ** 0.5, dim=-1))
        ctx = (w @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(ctx)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = MultiHeadAttention(a.dim, a.dim, a.tokens, 0.0, a.heads)
    x = torch.randn(a.batch, a.tokens, a.dim, requires_grad=True)
    for _ in range(2):
        m(x).sum().backward()
    fwd, fwdbwd, fwd_cpu, fwdbwd_cpu = [], [], [], []
    for _ in range(a.reps):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(a.calls):
            with torch.no_grad():
                m(x)
        fwd.append((time.perf_counter() - t) / a.calls)
        fwd_cpu.append((time.process_time() - c) / a.calls)
        t, c = time.perf_counter(), time.process_time()
        for _ in range(a.calls):
            m(x).sum().backward()
        fwdbwd.append((time.perf_counter() - t) / a.calls)
        fwdbwd_cpu.append((time.process_time() - c) / a.calls)
    print(json.dumps({"impl": "pytorch-" + torch.__version__, "threads": a.threads, "batch": a.batch,
                      "tokens": a.tokens, "dim": a.dim, "heads": a.heads,
                      "fwd_ms": round(median(fwd) * 1e3, 3), "fwdbwd_ms": round(median(fwdbwd) * 1e3, 3),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 3),
                      "fwd_cpu_ms": round(median(fwd_cpu) * 1e3, 3),
                      "fwdbwd_cpu_ms": round(median(fwdbwd_cpu) * 1e3, 3)}))


if __name__ == "__main__":
    main()
