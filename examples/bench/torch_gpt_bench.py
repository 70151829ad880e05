#!/usr/bin/env python3
"""PyTorch side of Ember's GPT benchmark (examples/bench/bench_gpt.cpp).

Times the three steps of chapter 4 of the book with GPT_CONFIG_124M, as the book runs them:
  construct_s  torch.manual_seed(123); model = GPTModel(GPT_CONFIG_124M)   (163M random numbers)
  forward_s    model(batch) on the book's batch [[6109, 3626, 6100, 345], [6109, 1110, 6622, 257]],
               in training mode with autograd on, as the book's first call (dropout 0.1 drawn)
  generate_s   model.eval(); generate_text_simple(model, [[15496, 11, 314, 716]], 6, 1024)
  randn_s      torch.manual_seed(123); torch.randn(163009536): as many normals as the model has
               parameters, from the generator alone (timed first, freed before the model)
Construction is timed --reps times (the previous model freed first), forward and generation
--reps times each after one warm-up call; medians in seconds. One JSON line with the same keys
as bench_gpt's, and the process's peak RSS.

The model is the book's code as the fixture generator has it (scripts/fixtures/gen_gpt.py),
imported from there rather than copied. Needs Debian's python3-torch (PyTorch 1.13), run with
/usr/bin/python3. Example: /usr/bin/python3 examples/bench/torch_gpt_bench.py --threads 1
"""
import argparse, gc, json, os, resource, sys, time

# Debian's PyTorch does its matrix products in OpenBLAS, whose thread pool ignores
# torch.set_num_threads: pin both pools before torch is imported.
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = _threads
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "fixtures"))
from gen_gpt import GPT_CONFIG_124M, GPTModel, generate_text_simple  # noqa: E402

BOOK_BATCH = [[6109, 3626, 6100, 345], [6109, 1110, 6622, 257]]
HELLO = [15496, 11, 314, 716]  # "Hello, I am"


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    randn = []
    for _ in range(a.reps):
        t = time.perf_counter()
        torch.manual_seed(123)
        normals = torch.randn(163009536)
        randn.append(time.perf_counter() - t)
        del normals

    construct, model = [], None
    for _ in range(a.reps):
        model = None
        gc.collect()
        t = time.perf_counter()
        torch.manual_seed(123)
        model = GPTModel(GPT_CONFIG_124M)
        construct.append(time.perf_counter() - t)

    batch = torch.tensor(BOOK_BATCH)
    model.train()
    model(batch)  # warm-up
    forward = []
    for _ in range(a.reps):
        t = time.perf_counter()
        model(batch)
        forward.append(time.perf_counter() - t)

    model.eval()
    start = torch.tensor([HELLO])
    out = generate_text_simple(model, start, 6, GPT_CONFIG_124M["context_length"])  # warm-up
    generate = []
    for _ in range(a.reps):
        t = time.perf_counter()
        generate_text_simple(model, start, 6, GPT_CONFIG_124M["context_length"])
        generate.append(time.perf_counter() - t)

    print(json.dumps({"impl": "pytorch-" + torch.__version__, "threads": a.threads,
                      "construct_s": round(median(construct), 4), "forward_s": round(median(forward), 4),
                      "generate_s": round(median(generate), 4), "randn_s": round(median(randn), 4),
                      "generated": out[0].tolist(),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
