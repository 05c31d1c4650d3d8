#!/usr/bin/python3
"""bench/pytorch/teacher_student_check.py — trains a `moelab teacher-student` point in PyTorch from
moelab's own start (the same teacher, the same initial student, the same test set), to tell an
engine bug from a property of the setting when a moelab curve surprises.

moelab writes the start with `--set save_init=true` (mode=point): points/<point>.init.safetensors
holds "teacher.*" and "student.*" (the layers' parameters: router.weight [m, d], router.bias [m]
when the student has one, experts.w_in [m, d, w], experts.b_in [m, w], experts.w_out [m, w, d],
experts.b_out [m, d]), test_x and test_y [n, d], and the settings in its metadata. The layer here
is tasks/teacher_student/teacher_student.h's: logits = x W_r^T (+ b_r), top-k of the raw logits, a
softmax over the k chosen ones, ReLU experts with biases, y = sum_e g_e (W2_e relu(W1_e x + b1_e)
+ b2_e). AdamW (PyTorch's, weight decay on every parameter), cosine decay over the epochs stepped
once per epoch, fresh N(0, 1) inputs every step, and after every epoch the test MSE divided by the
mean square of test_y (moelab's normalised loss).

The training batches are PyTorch's own (--data-seed): moelab draws them from its Philox stream
after the test set. Runs that start alike drift apart within about a hundred steps anyway (top-k
choices flip on rounding differences), so compare curves, not bits; run two data seeds to see
how much the sample path alone moves a curve.

  build/moelab teacher-student --preset cpu-fig3 --set mode=point \\
      --set point=t16e8a-s32e8a-seed1 --set save_init=true --out runs/ts-check
  /usr/bin/python3 bench/pytorch/teacher_student_check.py \\
      runs/ts-check/points/t16e8a-s32e8a-seed1.init.safetensors --lr 1e-3 [--epochs 200] [--data-seed 0]

It prints one CSV line per epoch (epoch, lr_used, train_normalised, test_normalised), then the
best epoch and the last, beside moelab's from points/<point>.csv when that file is there.
A dev-time check (PyTorch 1.13 from Debian's python3-torch); the engine never uses it.
"""
import argparse
import csv
import json
import os
import struct

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32}


def read_safetensors(path):
    """Returns ({name: array}, metadata) from a safetensors file (8-byte header length, JSON, data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        lo, hi = entry["data_offsets"]
        tensors[name] = np.frombuffer(blob[base + lo:base + hi], dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors, metadata


class TopKMoE:
    """One routed MoE layer of ReLU experts, its parameters taken from `tensors` under `prefix`."""

    def __init__(self, tensors, prefix, k, trainable):
        def get(name):
            return torch.tensor(np.array(tensors[prefix + name]), requires_grad=trainable)

        self.k = k
        self.router_weight = get("router.weight")                                                # [m, d]
        self.router_bias = get("router.bias") if prefix + "router.bias" in tensors else None  # [m]
        self.w_in, self.b_in = get("experts.w_in"), get("experts.b_in")                       # [m, d, w], [m, w]
        self.w_out, self.b_out = get("experts.w_out"), get("experts.b_out")                   # [m, w, d], [m, d]
        self.params = [p for p in (self.router_weight, self.router_bias, self.w_in, self.b_in, self.w_out,
                                   self.b_out) if p is not None]

    def __call__(self, x):                                                     # x [B, d] -> [B, d]
        logits = x @ self.router_weight.t()                                    # [B, m]
        if self.router_bias is not None:
            logits = logits + self.router_bias
        top, chosen = logits.topk(self.k, dim=1)                               # [B, k]
        gates = torch.zeros_like(logits).scatter(1, chosen, torch.softmax(top, dim=1))  # [B, m]
        m, d, w = self.w_in.shape
        hidden = torch.relu((x @ self.w_in.permute(1, 0, 2).reshape(d, m * w)).view(-1, m, w) + self.b_in)
        gated = (hidden * gates.unsqueeze(2)).reshape(-1, m * w)              # [B, m * w]
        return gated @ self.w_out.reshape(m * w, d) + gates @ self.b_out


def moelab_curve(init_path, lr):
    """moelab's (epoch, test_normalised) for this lr from points/<point>.csv beside the init file."""
    curve_path = init_path.replace(".init.safetensors", ".csv")
    if not os.path.exists(curve_path):
        return None
    rows = [r for r in csv.DictReader(open(curve_path)) if abs(float(r["lr"]) - lr) <= 1e-12 * lr]
    return [(int(r["epoch"]), float(r["test_normalised"])) for r in rows] or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("init", help="points/<point>.init.safetensors written by moelab with save_init=true")
    ap.add_argument("--lr", type=float, required=True, help="AdamW learning rate (one of the point's lrs)")
    ap.add_argument("--epochs", type=int, help="epochs (default: the point's)")
    ap.add_argument("--data-seed", type=int, default=0, help="torch.manual_seed for the training batches")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    tensors, meta = read_safetensors(a.init)
    for who in ("teacher", "student"):
        if meta.get(who + "_gates", "topk-softmax") != "topk-softmax":
            raise SystemExit(f"{who}_gates = {meta[who + '_gates']}: this script has only topk-softmax gates")
    if meta.get("student_router", "topk") != "topk":
        raise SystemExit(f"student_router = {meta['student_router']}: this script has only the topk router")
    epochs = a.epochs or int(meta["epochs"])
    batch = int(meta["batch"])
    steps_per_epoch = int(meta["samples_per_epoch"]) // batch
    teacher = TopKMoE(tensors, "teacher.", int(meta["teacher_k"]), False)
    student = TopKMoE(tensors, "student.", int(meta["student_k"]), True)
    test_x, test_y = torch.tensor(np.array(tensors["test_x"])), torch.tensor(np.array(tensors["test_y"]))
    d = test_x.shape[1]
    with torch.no_grad():
        gap = (teacher(test_x) - test_y).abs().max().item()
    print(f"# {meta['point']}: lr {a.lr}, {epochs} epochs of {steps_per_epoch} steps of {batch}, "
          f"weight decay {meta['weight_decay']}, data seed {a.data_seed}; teacher(test_x) vs moelab's test_y: "
          f"max |diff| {gap:.2e}")
    test_zero = (test_y ** 2).mean()

    opt = torch.optim.AdamW(student.params, lr=a.lr, weight_decay=float(meta["weight_decay"]))
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    torch.manual_seed(a.data_seed)
    print("epoch,lr_used,train_normalised,test_normalised")
    curve = []
    for epoch in range(1, epochs + 1):
        lr_used, train = opt.param_groups[0]["lr"], 0.0
        for _ in range(steps_per_epoch):
            x = torch.randn(batch, d)
            with torch.no_grad():
                y = teacher(x)
            loss = ((student(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            train += (loss / (y ** 2).mean()).item()
        schedule.step()
        with torch.no_grad():
            test = (((student(test_x) - test_y) ** 2).mean() / test_zero).item()
        curve.append((epoch, test))
        print(f"{epoch},{lr_used:.9g},{train / steps_per_epoch:.9g},{test:.9g}", flush=True)

    def describe(c):
        best = min(c, key=lambda t: t[1])
        return f"best {best[1]:.4f} at epoch {best[0]}, last {c[-1][1]:.4f} at epoch {c[-1][0]}"

    print(f"# PyTorch: {describe(curve)}")
    theirs = moelab_curve(a.init, a.lr)
    if theirs and len(theirs) == epochs:
        print(f"# moelab:  {describe(theirs)} (points/{meta['point']}.csv)")
    elif theirs:
        print(f"# moelab's curve has {len(theirs)} epochs, not {epochs}: not compared")


if __name__ == "__main__":
    main()
