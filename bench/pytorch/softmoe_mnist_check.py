#!/usr/bin/python3
"""bench/pytorch/softmoe_mnist_check.py — an independent PyTorch version of `moelab softmoe-mnist`'s
network and of its Algorithm 1 / random-subset evaluation, to tell an engine bug from a property of
the data when moelab's numbers surprise.

The same setup as tasks/softmoe_mnist/mnist_model.h: four 14x14 patches normalised with
0.1307 / 0.3081, one Soft MoE layer (n one-slot experts, phi uniform in [-1, 1], x and phi
l2-normalised with a learnable scale, bias-free ReLU experts 196 -> 784 // n -> 196), a bias-free
784 -> 10 head, Adam 1e-3, batch 256, reshuffled every epoch (the last batch of an epoch short).
Algorithm 1 keeps, per image, the k experts with the largest column sums of C (C not
renormalised); random subsets are drawn per image.

The Soft MoE layer is the implicit-bias paper's (docs/REFERENCES.md): its released code
(normalize_moe_input=True) l2-normalises the tokens before the layer, so the slots mix the
NORMALISED tokens,
xs = D^T X_hat, and the layer is scale-invariant. An earlier version of this script mixed the raw
tokens (xs = D^T X, the original Soft MoE's layer), the same choice moelab made then, so it could
not catch it; --slot-inputs raw still runs that layer, for comparison with moelab's
`--set slot_inputs=raw`.

  /usr/bin/python3 bench/pytorch/softmoe_mnist_check.py --data /usr/share/datasets/fashion-mnist \\
      --experts 8 --steps 3525 --seed 0 [--slot-inputs normalized|raw]
A dev-time check (PyTorch 1.13 from Debian's python3-torch); the engine never uses it.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(folder, stem):
    def find(name):
        for candidate in (name, name + ".gz"):
            if os.path.exists(os.path.join(folder, candidate)):
                return os.path.join(folder, candidate)
        raise FileNotFoundError(os.path.join(folder, name))
    images = read_idx(find(stem + "-images-idx3-ubyte")).astype(np.float32)
    labels = read_idx(find(stem + "-labels-idx1-ubyte")).astype(np.int64)
    x = (images / 255.0 - 0.1307) / 0.3081                        # [N, 28, 28]
    x = x.reshape(-1, 2, 14, 2, 14).transpose(0, 1, 3, 2, 4)      # [N, qr, qc, 14, 14]: quadrants row-major
    return torch.from_numpy(x.reshape(-1, 4, 196).copy()), torch.from_numpy(labels)


class SoftMoEClassifier(torch.nn.Module):
    def __init__(self, n, d=196, slot_inputs="normalized"):
        super().__init__()
        self.slot_inputs = slot_inputs
        h = 784 // n
        self.phi = torch.nn.Parameter(torch.empty(d, n).uniform_(-1, 1))
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.w_in = torch.nn.Parameter(torch.empty(n, d, h).uniform_(-d ** -0.5, d ** -0.5))
        self.w_out = torch.nn.Parameter(torch.empty(n, h, d).uniform_(-h ** -0.5, h ** -0.5))
        self.head = torch.nn.Linear(784, 10, bias=False)

    def routing(self, x):                                          # x: [B, 4, 196]
        xn = x / (x.norm(dim=-1, keepdim=True) + 1e-6)             # X_hat
        pn = self.phi / (self.phi.norm(dim=0, keepdim=True) + 1e-6)
        logits = xn @ (self.scale * pn)                            # [B, m, n]
        return logits.softmax(dim=1), logits.softmax(dim=2), xn    # D over tokens, C over slots, X_hat

    def forward(self, x, keep=None):                               # keep: [B, n] 0/1 or None
        d_w, c_w, xn = self.routing(x)
        mixed = xn if self.slot_inputs == "normalized" else x      # the paper's layer: X_hat
        xs = d_w.transpose(1, 2) @ mixed                           # [B, n, 196]
        ys = torch.relu(torch.einsum("bnd,ndh->bnh", xs, self.w_in))
        ys = torch.einsum("bnh,nhd->bnd", ys, self.w_out)          # [B, n, 196]
        if keep is not None:
            ys = ys * keep.unsqueeze(-1)
        y = c_w @ ys                                               # [B, m, 196]
        return self.head(y.reshape(x.shape[0], 784))


@torch.no_grad()
def accuracy(model, x, y, chooser=None):
    correct = 0
    for i in range(0, len(x), 1000):
        xb = x[i:i + 1000]
        keep = chooser(xb) if chooser else None
        correct += (model(xb, keep).argmax(1) == y[i:i + 1000]).sum().item()
    return correct / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--steps", type=int, default=3525)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train-only", action="store_true",
                   help="stop after training and the test accuracy (benchmarks: bench/compare_softmoe_rounds.sh)")
    p.add_argument("--slot-inputs", choices=("normalized", "raw"), default="normalized",
                   help="what the slots mix: normalised tokens (the paper's code) or raw tokens (original Soft MoE)")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    model = SoftMoEClassifier(a.experts, slot_inputs=a.slot_inputs)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start, step, order, pos = time.time(), 0, None, len(xtr)
    while step < a.steps:
        if pos >= len(xtr):
            order, pos = torch.randperm(len(xtr)), 0
        idx = order[pos:pos + 256]
        pos += len(idx)
        loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    n = a.experts
    seconds = time.time() - start
    print(f"n = {n}: {a.steps} steps in {seconds:.2f} s, test accuracy {100 * accuracy(model, xte, yte):.2f}%")
    if a.train_only:
        return
    for div in (2, 4, 8):
        if n % div:
            continue
        k = n // div

        def top_k(xb):
            scores = model.routing(xb)[1].sum(dim=1)               # column sums of C: [B, n]
            keep = torch.zeros_like(scores)
            return keep.scatter_(1, scores.topk(k, dim=1).indices, 1.0)

        def random_k(xb):
            ranks = torch.rand(xb.shape[0], n).argsort(dim=1)
            keep = torch.zeros(xb.shape[0], n)
            return keep.scatter_(1, ranks[:, :k], 1.0)

        alg1 = accuracy(model, xte, yte, top_k)
        rnd = np.array([accuracy(model, xte, yte, random_k) for _ in range(a.draws)])
        std = rnd.std(ddof=1)
        print(f"  k = n/{div} = {k}: Algorithm 1 {100 * alg1:.2f}%, random {100 * rnd.mean():.2f} +- {100 * std:.2f}% "
              f"({(alg1 - rnd.mean()) / std:.2f} std above)")


if __name__ == "__main__":
    main()
