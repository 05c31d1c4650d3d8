#!/usr/bin/python3
"""Reference fixture for moelab's experts with relu, gelu and swiglu activations, by PyTorch.

Each expert is an independent set of PyTorch modules, as the released MoE code writes them:
  relu, gelu   up = torch.nn.Linear(d, f), down = torch.nn.Linear(f, d); y = down(act(up(x)))
               (gelu: torch.nn.functional.gelu, exact)
  swiglu       Mixtral's MixtralBlockSparseTop2MLP: w1, w3 = torch.nn.Linear(d, f), w2 = Linear(f, d);
               y = w2(silu(w1(x)) * w3(x)) (torch.nn.functional.silu)
with and without biases (Mixtral has none; the bias rows check moelab's per-row bias gather).
The rows of x [N, d] are grouped by expert by offsets [E + 1] (expert 1 gets no rows; the last row
belongs to no expert and must come out 0), expert e runs on its rows in a Python loop (no grouped
product), and the loss is sum(y * r) for a fixed random r.
Also moelab's dense MLP with swiglu (LLaMA's FFN, the same three Linears) on x.

moelab's layout (nn/moe/expert_bank.h): w_in[e] = up.weight^T [d, f], or for swiglu
cat(w1.weight, w3.weight)^T [d, 2f] (gate columns first); b_in[e] likewise; w_out[e] = down.weight^T
(w2.weight^T); MLP up.weight = cat(w1.weight, w3.weight) [2f, d], down.weight = w2.weight.

Writes next to this script expert_bank_expected.safetensors (float64): x, offsets (int32), r, and
for each case <act>_bias<0|1>.{w_in, w_out, b_in, b_out, y, grad.x, grad.w_in, ...} and
mlp_swiglu_bias<0|1>.{up.weight, up.bias, down.weight, down.bias, y, grad.x, grad.<name>}.
Run with Debian's PyTorch:  /usr/bin/python3 tests/reference/make_expert_fixture.py
tests/test_expert_activation.cpp reads it; the engine never runs PyTorch.
"""
import json
import os

import torch
import torch.nn.functional as F

from make_fixtures import write_safetensors

E, D, FFN, N, SEED = 3, 5, 4, 10, 11


class Expert(torch.nn.Module):
    def __init__(self, act, bias):
        super().__init__()
        self.act = act
        if act == "swiglu":
            self.w1 = torch.nn.Linear(D, FFN, bias=bias)
            self.w3 = torch.nn.Linear(D, FFN, bias=bias)
            self.w2 = torch.nn.Linear(FFN, D, bias=bias)
        else:
            self.up = torch.nn.Linear(D, FFN, bias=bias)
            self.down = torch.nn.Linear(FFN, D, bias=bias)

    def forward(self, x):
        if self.act == "swiglu":
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        u = self.up(x)
        return self.down(torch.relu(u) if self.act == "relu" else F.gelu(u))

    def up_weight(self):   # [F, d] in moelab's order: the gate's rows, then the linear one's
        return torch.cat([self.w1.weight, self.w3.weight]) if self.act == "swiglu" else self.up.weight

    def up_bias(self):
        return torch.cat([self.w1.bias, self.w3.bias]) if self.act == "swiglu" else self.up.bias

    def down_layer(self):
        return self.w2 if self.act == "swiglu" else self.down


def grad(p):
    """p's gradient; zeros for an expert that got no rows (PyTorch leaves its .grad None)."""
    return p.grad if p.grad is not None else torch.zeros_like(p)


def main():
    torch.manual_seed(SEED)
    torch.set_default_dtype(torch.float64)
    out = {}
    x0 = torch.randn(N, D)
    r = torch.randn(N, D)
    out["x"], out["r"] = x0, r
    # expert 0: rows 0-2, expert 1: none, expert 2: rows 3-8; row 9 belongs to no expert (must come out 0)
    out["offsets"] = torch.tensor([0, 3, 3, 9], dtype=torch.int32)  # [E + 1]
    offsets = out["offsets"].tolist()
    for act in ("relu", "gelu", "swiglu"):
        for bias in (False, True):
            key = f"{act}_bias{int(bias)}"
            experts = [Expert(act, bias) for _ in range(E)]
            x = x0.clone().requires_grad_(True)
            y = torch.zeros(N, D)
            for e in range(E):
                a, b = offsets[e], offsets[e + 1]
                if b > a:
                    y = y.index_put((torch.arange(a, b),), experts[e](x[a:b]))
            (y * r).sum().backward()
            w_in = torch.stack([ex.up_weight().t() for ex in experts])          # [E, d, F]
            w_out = torch.stack([ex.down_layer().weight.t() for ex in experts])  # [E, f, d]
            out[f"{key}.w_in"], out[f"{key}.w_out"] = w_in, w_out
            out[f"{key}.grad.w_in"] = torch.stack([torch.cat([grad(ex.w1.weight), grad(ex.w3.weight)]).t()
                                                   if act == "swiglu" else grad(ex.up.weight).t() for ex in experts])
            out[f"{key}.grad.w_out"] = torch.stack([grad(ex.down_layer().weight).t() for ex in experts])
            if bias:
                out[f"{key}.b_in"] = torch.stack([ex.up_bias() for ex in experts])
                out[f"{key}.b_out"] = torch.stack([ex.down_layer().bias for ex in experts])
                out[f"{key}.grad.b_in"] = torch.stack([torch.cat([grad(ex.w1.bias), grad(ex.w3.bias)])
                                                       if act == "swiglu" else grad(ex.up.bias) for ex in experts])
                out[f"{key}.grad.b_out"] = torch.stack([grad(ex.down_layer().bias) for ex in experts])
            out[f"{key}.y"], out[f"{key}.grad.x"] = y, x.grad
    for bias in (False, True):
        key = f"mlp_swiglu_bias{int(bias)}"
        mlp = Expert("swiglu", bias)
        x = x0.clone().requires_grad_(True)
        y = mlp(x)
        (y * r).sum().backward()
        out[f"{key}.up.weight"], out[f"{key}.down.weight"] = mlp.up_weight(), mlp.w2.weight
        out[f"{key}.grad.up.weight"] = torch.cat([mlp.w1.weight.grad, mlp.w3.weight.grad])
        out[f"{key}.grad.down.weight"] = mlp.w2.weight.grad
        if bias:
            out[f"{key}.up.bias"], out[f"{key}.down.bias"] = mlp.up_bias(), mlp.w2.bias
            out[f"{key}.grad.up.bias"] = torch.cat([mlp.w1.bias.grad, mlp.w3.bias.grad])
            out[f"{key}.grad.down.bias"] = mlp.w2.bias.grad
        out[f"{key}.y"], out[f"{key}.grad.x"] = y, x.grad
    here = os.path.dirname(os.path.abspath(__file__))
    meta = {"experts": json.dumps(E), "d": json.dumps(D), "ffn": json.dumps(FFN), "seed": json.dumps(SEED),
            "torch": json.dumps(torch.__version__)}
    write_safetensors(os.path.join(here, "expert_bank_expected.safetensors"), out, meta)


if __name__ == "__main__":
    main()
