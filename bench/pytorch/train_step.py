#!/usr/bin/python3
"""PyTorch eager baseline for bench/train_step_bench.cpp: one training step of the dense decoder.

The same model as moelab's (the PyTorch definition in tests/reference/make_fixtures.py, which the
reference test checks moelab against), the same sizes, AdamW, float32, on N CPU threads or one
GPU. Prints and writes tokens per second (batch * seq / median step time) to JSON.

    /usr/bin/python3 bench/pytorch/train_step.py --threads 2 --out bench-results/train_step_pytorch.json
    python3 bench/pytorch/train_step.py --device cuda --preset gpu --experts 8 --k 2 --out ...

On a GPU (--device cuda) the model and the batch live there, float32 matrix products are kept in
full float32 (TF32 off, as moelab's cuBLAS calls: cuda/context.cu), and the clock is read after
torch.cuda.synchronize(). The fixture's rope() and attention build their tables and causal mask
with torch.arange / torch.ones, which default to the CPU; here they are rebuilt on the input's
device (same values), since PyTorch cannot mix a CUDA tensor with a CPU one in these ops.
--preset gpu is train_step_bench's: seq 256, batch 64, d 512, 8 heads, 8 layers (options given
explicitly win). --precision tf32 lets cuBLAS use TF32 tensor cores (as train_step_bench's
option); --compile runs the model through torch.compile (its compile time is the warm-up's,
reported apart as warmup_seconds, not in the median).

Debian's python3-torch uses the system BLAS: install libopenblas0-pthread, or its matrix
products run on the slow reference BLAS and the comparison means nothing.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
import make_fixtures  # noqa: E402
from make_fixtures import MLP, Decoder, loss_fn  # noqa: E402


def rope_on_device(x, theta):
    """make_fixtures.rope with its angle table made on x's device (the same values)."""
    _, t, _, hd = x.shape
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64, device=x.device) / hd)     # [hd/2]
    angles = torch.arange(t, dtype=torch.float64, device=x.device)[:, None] * inv_freq[None, :]  # [T, hd/2]
    cos = angles.cos().to(x.dtype)[None, :, None, :]
    sin = angles.sin().to(x.dtype)[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def attention_forward_on_device(self, x):
    """make_fixtures.Attention.forward with the causal mask made on x's device."""
    b, t, d = x.shape
    hd = d // self.heads
    q = rope_on_device(self.q(x).view(b, t, self.heads, hd), self.theta).transpose(1, 2)  # [B, H, T, hd]
    k = rope_on_device(self.k(x).view(b, t, self.heads, hd), self.theta).transpose(1, 2)
    v = self.v(x).view(b, t, self.heads, hd).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v                                     # [B, H, T, hd]
    return self.o(out.transpose(1, 2).reshape(b, t, d))


make_fixtures.rope = rope_on_device
make_fixtures.Attention.forward = attention_forward_on_device


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
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--preset", choices=["cpu", "gpu"], default="cpu",
                    help="gpu: seq 256, batch 64, d 512, 8 heads, 8 layers unless given")
    ap.add_argument("--steps", type=int, default=30, help="timed steps (after 5 warm-up steps)")
    ap.add_argument("--vocab", type=int, default=64)
    # None: the preset's value (cpu: 64, 32, 128, 4, 4; gpu: 256, 64, 512, 8, 8).
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--d", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--experts", type=int, default=0, help="MoE experts per layer (0: dense FFN)")
    ap.add_argument("--k", type=int, default=2, help="experts per token (with --experts)")
    ap.add_argument("--precision", choices=["fp32", "tf32"], default="fp32",
                    help="float32 products on the GPU: full float32 (default) or TF32 tensor cores")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (default mode; the MoE's data-dependent loop runs with graph breaks)")
    ap.add_argument("--out", default="bench-results/train_step_pytorch.json")
    a = ap.parse_args()
    preset = dict(cpu=dict(seq=64, batch=32, d=128, heads=4, layers=4),
                  gpu=dict(seq=256, batch=64, d=512, heads=8, layers=8))[a.preset]
    for key, value in preset.items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("train_step.py: --device cuda: torch.cuda.is_available() is False")
        tf32 = a.precision == "tf32"  # default: full float32 products, as moelab's cuBLAS calls
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    elif a.precision != "fp32":
        sys.exit("train_step.py: --precision tf32 is for --device cuda")
    device = torch.device(a.device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = dict(vocab=a.vocab, d=a.d, heads=a.heads, layers=a.layers, ffn=a.d, rope_theta=10000.0, norm_eps=1e-5)
    model = Decoder(cfg)
    if a.experts > 0:
        for block in model.layers:
            block.ffn = LoopMoE(a.d, a.d, a.experts, a.k)
        cfg.update(experts=a.experts, k=a.k)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    forward = torch.compile(model) if a.compile else model
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(tokens), targets)
        loss.backward()
        opt.step()
        return loss.item()

    warm_start = time.perf_counter()
    for _ in range(5):  # with --compile, the first steps compile (timed apart, below)
        step()
    warmup_seconds = time.perf_counter() - warm_start
    times = []
    for _ in range(a.steps):
        sync()
        t0 = time.perf_counter()
        step()
        sync()  # (loss.item() already waits for the step; this makes the bracket explicit)
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    config_text = torch.__config__.show()
    result = dict(engine="pytorch-compile" if a.compile else "pytorch-eager", precision=a.precision,
                  torch_version=torch.__version__, device=a.device, preset=a.preset,
                  threads=a.threads, config=cfg, batch=a.batch, seq=a.seq, steps=a.steps,
                  median_step_seconds=median, warmup_seconds=warmup_seconds, tokens_per_second=a.batch * a.seq / median,
                  blas=config_text.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in config_text else "unknown")
    if device.type == "cuda":
        result.update(gpu=torch.cuda.get_device_name(device), cuda_version=torch.version.cuda,
                      allow_tf32=torch.backends.cuda.matmul.allow_tf32)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"pytorch {torch.__version__}: {result['tokens_per_second']:.0f} tokens/s "
          f"(median step {median * 1e3:.1f} ms, {a.device}, {a.threads} threads) -> {a.out}")


if __name__ == "__main__":
    main()
