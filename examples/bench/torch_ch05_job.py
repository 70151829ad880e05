#!/usr/bin/env python3
"""PyTorch side of the whole-job benchmark (scripts/bench job): the book's chapter-5 run as its
notebook runs it (ch05/01_main-chapter-code/ch05.ipynb), the job train_gpt does by default: the
untrained model's text, the initial losses, train_model_simple (10 epochs of 9 steps, an evaluation
every 5 steps, a sample after each epoch), the greedy and top-k samples, and cell 123's save of the
model and AdamW state (torch.save, once, at the end). The book's functions are
scripts/fixtures/gen_ch05.py's (the fixture's generator), imported; only the run is here:

    /usr/bin/python3 examples/bench/torch_ch05_job.py --threads 1 --epochs 10 --out /tmp/t

It prints the book's lines; time it from outside (/usr/bin/time -v).
"""
import argparse
import os
import sys

# Debian's PyTorch does its matrix products in OpenBLAS, whose thread pool ignores
# torch.set_num_threads: pin both pools before torch is imported (gen_ch05 pins them to 1 when
# imported, after torch is: too late to matter).
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = _threads
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "fixtures"))
import gen_ch05 as book  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", default="torch_ch05_out")
    # A smaller model, as train_gpt's flags of the same names (a short run of the benchmark).
    parser.add_argument("--emb-dim", type=int, default=book.GPT_CONFIG_124M["emb_dim"])
    parser.add_argument("--layers", type=int, default=book.GPT_CONFIG_124M["n_layers"])
    parser.add_argument("--heads", type=int, default=book.GPT_CONFIG_124M["n_heads"])
    parser.add_argument("--context", type=int, default=book.GPT_CONFIG_124M["context_length"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    lines = []  # gen_ch05's fixture lines, printed as they come
    tokenizer = book.Encoder()
    cfg = dict(book.GPT_CONFIG_124M, emb_dim=args.emb_dim, n_layers=args.layers, n_heads=args.heads,
               context_length=args.context)
    ctx = cfg["context_length"]
    prompt = "Every effort moves you"

    torch.manual_seed(123)  # cells 11 and 15
    model = book.GPTModel(cfg)
    model.eval()
    token_ids = book.generate_text_simple(model=model, idx=book.text_to_token_ids(prompt, tokenizer),
                                          max_new_tokens=10, context_size=ctx)
    print("Output text:\n", book.token_ids_to_text(token_ids, tokenizer), flush=True)

    with open(book.VERDICT, "r", encoding="utf-8") as f:  # cells 53-61
        text_data = f.read()
    split_idx = int(0.90 * len(text_data))
    torch.manual_seed(123)
    train_loader = book.create_dataloader_v1(text_data[:split_idx], tokenizer, batch_size=2, max_length=ctx,
                                             stride=ctx, drop_last=True, shuffle=True, num_workers=0)
    val_loader = book.create_dataloader_v1(text_data[split_idx:], tokenizer, batch_size=2, max_length=ctx,
                                           stride=ctx, drop_last=False, shuffle=False, num_workers=0)

    torch.manual_seed(123)  # cell 71
    with torch.no_grad():
        print("Training loss:", book.calc_loss_loader(train_loader, model))
        print("Validation loss:", book.calc_loss_loader(val_loader, model), flush=True)

    torch.manual_seed(123)  # cell 77
    model = book.GPTModel(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)
    book.train_model_simple(model, train_loader, val_loader, optimizer, num_epochs=args.epochs, eval_freq=5,
                            eval_iter=5, start_context=prompt, tokenizer=tokenizer, lines=lines)

    model.eval()  # cells 86 and 115
    token_ids = book.generate_text_simple(model=model, idx=book.text_to_token_ids(prompt, tokenizer),
                                          max_new_tokens=25, context_size=ctx)
    print("Output text (greedy):\n", book.token_ids_to_text(token_ids, tokenizer))
    torch.manual_seed(123)
    token_ids = book.generate(model=model, idx=book.text_to_token_ids(prompt, tokenizer), max_new_tokens=15,
                              context_size=ctx, top_k=25, temperature=1.4)
    print("Output text (temperature 1.4, top-k 25):\n", book.token_ids_to_text(token_ids, tokenizer))

    torch.save({"model_state_dict": model.state_dict(),  # cell 123
                "optimizer_state_dict": optimizer.state_dict()},
               os.path.join(args.out, "model_and_optimizer.pth"))
    print("wrote", os.path.join(args.out, "model_and_optimizer.pth"), flush=True)


if __name__ == "__main__":
    main()
