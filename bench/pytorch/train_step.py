#!/usr/bin/python3
"""PyTorch eager baseline for bench/train_step_bench.cpp: one training step of the dense decoder.

The same model as moelab's (the PyTorch definition in tests/reference/make_fixtures.py, which the
reference test checks moelab against), the same sizes, AdamW, float32, on N CPU threads. Prints
and writes tokens per second (batch * seq / median step time) to JSON.

    /usr/bin/python3 bench/pytorch/train_step.py --threads 2 --out bench-results/train_step_pytorch.json

Debian's python3-torch uses the system BLAS: install libopenblas0-pthread, or its matrix
products run on the slow reference BLAS and the comparison means nothing.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from make_fixtures import MLP, Decoder, loss_fn  # noqa: E402


class LoopMoE(torch.nn.Module):
    """The usual PyTorch MoE: a router, softmax over experts, top-k, renormalised (Mixtral)
    gates, then a Python loop over experts, each running its tokens and index_add-ing them back."""

    def __init__(self, d, f, experts, k):
        super().__init__()
        self.k = k
        self.router = torch.nn.Linear(d, experts, bias=False)
        self.experts = torch.nn.ModuleList([MLP(d, f) for _ in range(experts)])

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])                                      # [T, d]
        probs = torch.softmax(self.router(x), dim=-1)                     # [T, E]
        gates, chosen = probs.topk(self.k, dim=-1)                        # [T, k]
        gates = gates / gates.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                out.index_add_(0, token, gates[token, slot, None] * expert(x[token]))
        return out.reshape(shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30, help="timed steps (after 5 warm-up steps)")
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=0, help="MoE experts per layer (0: dense FFN)")
    ap.add_argument("--k", type=int, default=2, help="experts per token (with --experts)")
    ap.add_argument("--out", default="bench-results/train_step_pytorch.json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = dict(vocab=a.vocab, d=a.d, heads=a.heads, layers=a.layers, ffn=a.d, rope_theta=10000.0, norm_eps=1e-5)
    model = Decoder(cfg)
    if a.experts > 0:
        for block in model.layers:
            block.ffn = LoopMoE(a.d, a.d, a.experts, a.k)
        cfg.update(experts=a.experts, k=a.k)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq))
    targets = torch.randint(0, a.vocab, (a.batch, a.seq))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(tokens), targets)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(5):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    result = dict(engine="pytorch-eager", torch_version=torch.__version__, threads=a.threads, config=cfg,
                  batch=a.batch, seq=a.seq, steps=a.steps, median_step_seconds=median,
                  tokens_per_second=a.batch * a.seq / median,
                  blas=torch.__config__.show().split("BLAS_INFO=")[1].split(",")[0])
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"pytorch {torch.__version__}: {result['tokens_per_second']:.0f} tokens/s "
          f"(median step {median * 1e3:.1f} ms, {a.threads} threads) -> {a.out}")


if __name__ == "__main__":
    main()
