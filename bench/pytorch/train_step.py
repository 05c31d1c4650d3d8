#!/usr/bin/python3
"""PyTorch baseline for bench/train_step_bench.cpp: one training step of the same decoder.

The model is bench/pytorch/tuned_model.py: the function moelab is checked against
(tests/reference/make_fixtures.py; bench/pytorch/check_tuned_model.py shows the two agree to
float64 rounding), written the fast way: fused qkv product, rotary tables built once,
scaled_dot_product_attention(is_causal=True) and F.rms_norm where this torch has them, AdamW with
fused=True where it has that (else foreach=True), and a choice of MoE implementations (--moe):
loop (Hugging Face style, a host wait per expert on a GPU), padded-bmm (sorted, padded to one
capacity, batched products) and grouped-mm (torch._grouped_mm, bf16). What was used is written
to the JSON (attention, rms_norm, optimizer, moe), so a record says which PyTorch it beat.
Prints and writes tokens per second (batch * seq / median step time) to JSON.

    /usr/bin/python3 bench/pytorch/train_step.py --threads 2 --out bench-results/train_step_pytorch.json
    python3 bench/pytorch/train_step.py --device cuda --preset gpu --experts 8 --k 2 --moe padded-bmm --out ...

On a GPU (--device cuda) the model and the batch live there and the clock is read after
torch.cuda.synchronize(). --precision: fp32 keeps float32 products in full float32 (TF32 off, as
moelab's cuBLAS calls: cuda/context.cu); tf32 lets cuBLAS use TF32 tensor cores (GPU only); bf16
runs forward and loss under torch.autocast(device, torch.bfloat16) with float32 master weights
(on the CPU too: PyTorch 1.13 has CPU autocast), which is what `train_step_bench --precision bf16`
is compared with. --preset gpu is train_step_bench's: seq 256, batch 64, d 512, 8 heads, 8 layers
(options given explicitly win). --compile runs the model through torch.compile (its compile time
is the warm-up's, reported apart as warmup_seconds, not in the median).

Debian's python3-torch uses the system BLAS: install libopenblas0-pthread, or its matrix
products run on the slow reference BLAS and the comparison means nothing.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "reference"))
sys.path.insert(0, here)
from make_fixtures import loss_fn  # noqa: E402
import tuned_model  # noqa: E402


def make_optimizer(model):
    """AdamW(fused=True) where this torch has it for this device, else foreach=True; and its name."""
    params = list(model.parameters())
    try:
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, fused=True), "AdamW fused"
    except (TypeError, RuntimeError, ValueError):
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, foreach=True), "AdamW foreach"


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
    ap.add_argument("--ffn", type=int, default=0, help="FFN (expert) hidden width; 0: d")
    ap.add_argument("--experts", type=int, default=0, help="MoE experts per layer (0: dense FFN)")
    ap.add_argument("--k", type=int, default=2, help="experts per token (with --experts)")
    ap.add_argument("--moe", choices=tuned_model.MOE_KINDS, default="padded-bmm",
                    help="the MoE implementation (with --experts): loop (HF style), padded-bmm, grouped-mm (bf16)")
    ap.add_argument("--capacity-factor", type=float, default=0.0,
                    help="padded-bmm's capacity: 0 reads the largest load once per layer (a host wait); "
                         "F > 0 fixes it at ceil(F N k / E), no host wait, and refuses the run if a load passed it")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32",
                    help="fp32 (TF32 off), tf32 (GPU: TF32 tensor cores), bf16 (autocast, float32 master weights)")
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
    elif a.precision == "tf32":
        sys.exit("train_step.py: --precision tf32 is for --device cuda")
    if a.moe == "grouped-mm" and a.experts > 0 and a.precision != "bf16":
        sys.exit("train_step.py: --moe grouped-mm computes in bfloat16: give --precision bf16")
    if a.ffn < 0:
        sys.exit("train_step.py: --ffn must be 0 (the width d) or positive")
    if a.capacity_factor < 0:
        sys.exit("train_step.py: --capacity-factor must be 0 (read per layer) or positive")
    if a.compile and not hasattr(torch, "compile"):
        sys.exit(f"train_step.py: --compile: torch {torch.__version__} has no torch.compile (2.0 and later)")
    device = torch.device(a.device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = dict(vocab=a.vocab, d=a.d, heads=a.heads, layers=a.layers, ffn=a.ffn if a.ffn > 0 else a.d,
               rope_theta=10000.0, norm_eps=1e-5,
               seq=a.seq, experts=a.experts, k=a.k if a.experts > 0 else 0)
    try:
        model = tuned_model.Decoder(cfg, a.moe, a.capacity_factor)
    except RuntimeError as e:  # grouped-mm on a torch without it
        sys.exit(f"train_step.py: {e}")
    model.to(device)
    opt, optimizer_name = make_optimizer(model)
    forward = torch.compile(model) if a.compile else model
    autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if a.precision == "bf16"
                else contextlib.nullcontext())
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
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
    moe_layers = model.moe_layers()
    overflow = [(m.max_load.item(), m.capacity) for m in moe_layers
                if isinstance(m, tuned_model.PaddedBmmMoE) and a.capacity_factor > 0 and m.max_load.item() > m.capacity]
    if overflow:
        sys.exit(f"train_step.py: refused: a load of {overflow[0][0]} tokens passed the fixed capacity {overflow[0][1]} "
                 f"(tokens were dropped, so this is another model): raise --capacity-factor")
    config_text = torch.__config__.show()
    result = dict(engine="pytorch-compile" if a.compile else "pytorch-eager", precision=a.precision,
                  model="bench/pytorch/tuned_model.py",
                  attention="scaled_dot_product_attention" if tuned_model.has_sdpa() else "written out (no SDPA)",
                  rms_norm="F.rms_norm" if hasattr(torch.nn.functional, "rms_norm") else "written out",
                  optimizer=optimizer_name,
                  moe=(a.moe if a.experts > 0 else None),
                  capacity_factor=(a.capacity_factor if a.experts > 0 and a.moe == "padded-bmm" else None),
                  capacity_last_step=(max(m.capacity for m in moe_layers) if a.experts > 0 and a.moe == "padded-bmm" else None),
                  torch_version=torch.__version__, device=a.device, preset=a.preset,
                  threads=a.threads, config=cfg, batch=a.batch, seq=a.seq, steps=a.steps,
                  median_step_seconds=median, warmup_seconds=warmup_seconds, tokens_per_second=a.batch * a.seq / median,
                  blas=config_text.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in config_text else "unknown")
    if device.type == "cuda":
        result.update(gpu=torch.cuda.get_device_name(device), cuda_version=torch.version.cuda,
                      allow_tf32=torch.backends.cuda.matmul.allow_tf32,
                      peak_memory_bytes=torch.cuda.max_memory_allocated(device))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    what = f"{a.precision}" + (f", moe {a.moe}" if a.experts > 0 else "") + (", compiled" if a.compile else "")
    print(f"pytorch {torch.__version__} ({what}): {result['tokens_per_second']:.0f} tokens/s "
          f"(median step {median * 1e3:.1f} ms, {a.device}, {a.threads} threads) -> {a.out}")


if __name__ == "__main__":
    main()
