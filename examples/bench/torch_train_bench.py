#!/usr/bin/env python3
"""PyTorch side of Ember's training benchmark (examples/bench/bench_train.cpp).

Times whole training steps of the book's chapter-4 GPTModel (imported from
scripts/fixtures/gen_gpt.py, the book's code), each step as bench_train runs it:
    loss = cross_entropy(model(inputs).flatten(0, 1), targets.flatten()); loss.backward()
    clip_grad_norm_(model.parameters(), clip); optimizer.step(); optimizer.zero_grad()
Configs (--config): ch5 (GPT-124M, context 256, batch 2, dropout 0.1, AdamW lr 4e-4 wd 0.1,
clip 1.0) and small (vocab 65, context 64, emb 128, 4 heads, 4 layers, no dropout, batch 12,
AdamW lr 1e-3 betas (0.9, 0.99) wd 0.1, clip 1.0); the other flags override one value. Same seed
(123) and token stream as bench_train: token[step][b][t] = (31 b + 17 t + 7 step + (b t) % 5) % vocab.

One JSON line with bench_train's keys: median ms per step after two warm-up steps, tokens/s,
process CPU ms per step, peak RSS, minor page faults per timed step (getrusage), every step's loss. Needs Debian's
python3-torch (PyTorch 1.13): /usr/bin/python3 examples/bench/torch_train_bench.py --config small
"""
import argparse, os, resource, sys, time, json

# Debian's PyTorch does its matrix products in OpenBLAS, whose thread pool ignores
# torch.set_num_threads: pin both pools before torch is imported.
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = _threads
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "fixtures"))
from gen_gpt import GPTModel  # noqa: E402

CONFIGS = {
    "ch5": dict(model=dict(vocab_size=50257, context_length=256, emb_dim=768, n_heads=12, n_layers=12,
                           drop_rate=0.1, qkv_bias=False), batch=2, lr=4e-4, beta2=0.999, clip=1.0),
    "small": dict(model=dict(vocab_size=65, context_length=64, emb_dim=128, n_heads=4, n_layers=4,
                             drop_rate=0.0, qkv_bias=False), batch=12, lr=1e-3, beta2=0.99, clip=1.0),
}


def batch_of(cfg, batch, step):
    T, V = cfg["context_length"], cfg["vocab_size"]
    tokens = torch.tensor([[(31 * b + 17 * t + 7 * step + (b * t) % 5) % V for t in range(T + 1)]
                           for b in range(batch)])
    return tokens[:, :T], tokens[:, 1:]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="small", choices=sorted(CONFIGS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    for key, kind in (("batch", int), ("context", int), ("vocab", int), ("emb", int), ("heads", int),
                      ("layers", int), ("dropout", float), ("lr", float), ("clip", float)):
        ap.add_argument("--" + key, type=kind)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c = CONFIGS[a.config]
    cfg = dict(c["model"])
    for key, name in (("context", "context_length"), ("vocab", "vocab_size"), ("emb", "emb_dim"),
                      ("heads", "n_heads"), ("layers", "n_layers"), ("dropout", "drop_rate")):
        if getattr(a, key) is not None:
            cfg[name] = getattr(a, key)
    batch = a.batch if a.batch is not None else c["batch"]
    lr = a.lr if a.lr is not None else c["lr"]
    clip = a.clip if a.clip is not None else c["clip"]
    steps = max(3, a.steps)

    torch.manual_seed(123)
    model = GPTModel(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, c["beta2"]), weight_decay=0.1)
    times, cpu_times, losses, faults_before = [], [], [], 0
    for step in range(steps):
        if step == 2:
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        inputs, targets = batch_of(cfg, batch, step)
        t, c0 = time.perf_counter(), time.process_time()
        loss = torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if step >= 2:
            times.append((time.perf_counter() - t) * 1e3)
            cpu_times.append((time.process_time() - c0) * 1e3)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    ms = median(times)
    print(json.dumps({"impl": "pytorch-" + torch.__version__, "config": a.config, "threads": a.threads,
                      "steps": steps, "step_ms": round(ms, 3), "step_cpu_ms": round(median(cpu_times), 3),
                      "tokens_per_s": round(batch * cfg["context_length"] / (ms * 1e-3), 1),
                      "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                      "faults_per_step": (usage.ru_minflt - faults_before) / (steps - 2),
                      "losses": losses}))


if __name__ == "__main__":
    main()
