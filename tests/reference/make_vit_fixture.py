#!/usr/bin/python3
"""Reference fixture for moelab's vision transformer with a Soft MoE block (nn/vit/vit.h), by PyTorch.

Builds the model independently from PyTorch's own layers where it has them:
  patch embedding   torch.nn.Conv2d(C, d, kernel_size=p, stride=p), flatten(2).transpose(1, 2)
  class token       a [1, 1, d] parameter in front of the patches; learned positions [1, T, d]
  blocks            pre-norm: x = x + attn(LN(x)); x = x + ffn(LN(x)); LayerNorm eps 1e-6
  attention         torch.nn.MultiheadAttention(d, heads, batch_first=True, bias=True), no mask
  dense ffn         Linear(d, f) -> GELU (torch.nn.functional.gelu, exact) -> Linear(f, d), with biases
  Soft MoE ffn      written from Puigcerver et al. (2023) with the implicit-bias paper's
                    normalisation: X_hat = X / (||X|| + 1e-6) per token, phi_hat = phi / (||phi_col|| + 1e-6)
                    per slot, logits L = X_hat @ (scale * phi_hat), D = softmax over tokens,
                    C = softmax over slots, slot inputs Xs = D^T X_hat, slot s = e * p + j runs expert e
                    (relu(x @ w_in[e]) @ w_out[e], no biases), Y = C Ys
  head              final LayerNorm, the class token's row, Linear(d, classes)
and Algorithm 1 of the implicit-bias paper on the Soft MoE block: per image, expert e's score is
the sum of C over the tokens and e's slots; only the k best experts' slot outputs are kept (C and D
not renormalised).

Writes, next to this script:
  vit_weights.safetensors   every parameter under moelab's names (patch.proj.weight = the conv's
                            weight [d, C, p, p] viewed as [d, C*p*p]; attn.q/k/v = in_proj's row blocks)
  vit_expected.safetensors  images [B, C, H, W], labels [B] int32, logits [B, classes], loss [],
                            grad.<name> for every parameter, logits_top<k> [B, classes] (Algorithm 1),
                            kept_top<k> [B, n] int32 (the experts it kept)
Run with Debian's PyTorch:  /usr/bin/python3 tests/reference/make_vit_fixture.py
tests/test_vit_reference.cpp reads the files; the engine never runs PyTorch.
"""
import json
import os

import torch

from make_fixtures import write_safetensors

CONFIG = {"channels": 3, "height": 8, "width": 8, "patch": 4, "dim": 16, "heads": 2, "depth": 2,
          "mlp_hidden": 32, "mlp_activation": "gelu", "classes": 5, "pool": "cls", "moe_blocks": [1], "experts": 4,
          "slots_per_expert": 2, "expert_hidden": 8, "norm_eps": 1e-6, "batch": 3, "top_k": 2, "seed": 3}


class SoftMoE(torch.nn.Module):
    def __init__(self, d, n, p, h):
        super().__init__()
        self.n, self.p = n, p
        self.phi = torch.nn.Parameter(torch.empty(d, n * p).uniform_(-1, 1))
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.w_in = torch.nn.Parameter(torch.randn(n, d, h) / d ** 0.5)
        self.w_out = torch.nn.Parameter(torch.randn(n, h, d) / h ** 0.5)
        self.keep_k = None   # Algorithm 1: keep this many experts per image (None: all)
        self.kept = None

    def forward(self, x):                       # x [B, m, d]
        B, m, d = x.shape
        xh = x / (x.norm(dim=-1, keepdim=True) + 1e-6)
        ph = self.phi / (self.phi.norm(dim=0, keepdim=True) + 1e-6) * self.scale
        L = xh @ ph                             # [B, m, S]
        D, C = L.softmax(dim=1), L.softmax(dim=2)
        xs = D.transpose(1, 2) @ xh             # [B, S, d]
        xs = xs.reshape(B, self.n, self.p, d)
        ys = torch.stack([torch.relu(xs[:, e] @ self.w_in[e]) @ self.w_out[e] for e in range(self.n)], 1)
        keep = torch.ones(B, self.n)
        if self.keep_k is not None:
            scores = C.reshape(B, m, self.n, self.p).sum(dim=(1, 3))   # [B, n]
            ranked = scores.sort(dim=1, descending=True).values
            self.gap = (ranked[:, self.keep_k - 1] - ranked[:, self.keep_k]).min().item()
            top = scores.topk(self.keep_k, dim=1).indices
            keep = torch.zeros(B, self.n).scatter_(1, top, 1.0)
        self.kept = keep
        ys = ys * keep[:, :, None, None]
        return C @ ys.reshape(B, self.n * self.p, d)


class Block(torch.nn.Module):
    def __init__(self, c, moe):
        super().__init__()
        d = c["dim"]
        self.attn_norm = torch.nn.LayerNorm(d, eps=c["norm_eps"])
        self.attn = torch.nn.MultiheadAttention(d, c["heads"], batch_first=True)
        self.ffn_norm = torch.nn.LayerNorm(d, eps=c["norm_eps"])
        if moe:
            self.moe = SoftMoE(d, c["experts"], c["slots_per_expert"], c["expert_hidden"])
        else:
            self.up, self.down = torch.nn.Linear(d, c["mlp_hidden"]), torch.nn.Linear(c["mlp_hidden"], d)

    def forward(self, x):
        a = self.attn_norm(x)
        x = x + self.attn(a, a, a, need_weights=False)[0]
        f = self.ffn_norm(x)
        return x + (self.moe(f) if hasattr(self, "moe") else self.down(torch.nn.functional.gelu(self.up(f))))


class Vit(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.c = c
        self.patch = torch.nn.Conv2d(c["channels"], d, kernel_size=c["patch"], stride=c["patch"])
        n_patches = (c["height"] // c["patch"]) * (c["width"] // c["patch"])
        self.cls = torch.nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.pos = torch.nn.Parameter(0.02 * torch.randn(1, n_patches + 1, d))
        self.blocks = torch.nn.ModuleList([Block(c, l in c["moe_blocks"]) for l in range(c["depth"])])
        self.norm = torch.nn.LayerNorm(d, eps=c["norm_eps"])
        self.head = torch.nn.Linear(d, c["classes"])

    def forward(self, images):
        x = self.patch(images).flatten(2).transpose(1, 2)        # [B, N, d]
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def moelab_names(model, c):
    """Every parameter under moelab's name, in moelab's layout."""
    d = c["dim"]
    w = {"patch.proj.weight": model.patch.weight.reshape(d, -1), "patch.proj.bias": model.patch.bias,
         "cls": model.cls, "pos": model.pos}
    for l, b in enumerate(model.blocks):
        pre = f"layers.{l}."
        w[pre + "attn_norm.weight"], w[pre + "attn_norm.bias"] = b.attn_norm.weight, b.attn_norm.bias
        for i, name in enumerate("qkv"):
            w[pre + f"attn.{name}.weight"] = b.attn.in_proj_weight[i * d:(i + 1) * d]
            w[pre + f"attn.{name}.bias"] = b.attn.in_proj_bias[i * d:(i + 1) * d]
        w[pre + "attn.o.weight"], w[pre + "attn.o.bias"] = b.attn.out_proj.weight, b.attn.out_proj.bias
        w[pre + "ffn_norm.weight"], w[pre + "ffn_norm.bias"] = b.ffn_norm.weight, b.ffn_norm.bias
        if hasattr(b, "moe"):
            w[pre + "moe.phi"], w[pre + "moe.scale"] = b.moe.phi, b.moe.scale
            w[pre + "moe.experts.w_in"], w[pre + "moe.experts.w_out"] = b.moe.w_in, b.moe.w_out
        else:
            w[pre + "mlp.up.weight"], w[pre + "mlp.up.bias"] = b.up.weight, b.up.bias
            w[pre + "mlp.down.weight"], w[pre + "mlp.down.bias"] = b.down.weight, b.down.bias
    w["norm.weight"], w["norm.bias"] = model.norm.weight, model.norm.bias
    w["head.weight"], w["head.bias"] = model.head.weight, model.head.bias
    return w


def main():
    c = CONFIG
    torch.manual_seed(c["seed"])
    torch.set_num_threads(1)
    model = Vit(c)
    with torch.no_grad():  # norms away from identity and scale away from 1, so their gradients show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            if name.endswith("scale"):
                p.fill_(2.5)
    images = torch.randn(c["batch"], c["channels"], c["height"], c["width"])
    labels = torch.randint(0, c["classes"], (c["batch"],))
    logits = model(images)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()

    weights = {k: v.detach().clone() for k, v in moelab_names(model, c).items()}
    grads = {"grad." + k: v.grad.detach().clone() for k, v in moelab_names(model, c).items() if v.is_leaf}
    d = c["dim"]
    # The views of in_proj and of the conv weight have no .grad of their own: take the slices.
    for l, b in enumerate(model.blocks):
        for i, name in enumerate("qkv"):
            grads[f"grad.layers.{l}.attn.{name}.weight"] = b.attn.in_proj_weight.grad[i * d:(i + 1) * d].clone()
            grads[f"grad.layers.{l}.attn.{name}.bias"] = b.attn.in_proj_bias.grad[i * d:(i + 1) * d].clone()
    grads["grad.patch.proj.weight"] = model.patch.weight.grad.reshape(c["dim"], -1).clone()
    assert sorted(grads) == sorted("grad." + k for k in weights), "a parameter has no reference gradient"

    moe = model.blocks[c["moe_blocks"][0]].moe
    moe.keep_k = c["top_k"]
    with torch.no_grad():
        logits_top = model(images)
    kept = moe.kept.to(torch.int32)
    # Algorithm 1 must not sit near a tie: the k-th and (k+1)-th scores of every image well apart.
    print("kept experts per image:", kept.tolist(), "smallest k-th/(k+1)-th score gap:", moe.gap)
    assert moe.gap >= 1e-3, "Algorithm 1 is near a tie: pick another seed"

    here = os.path.dirname(os.path.abspath(__file__))
    meta = {k: json.dumps(v) for k, v in c.items()}
    meta["torch_version"] = torch.__version__
    write_safetensors(os.path.join(here, "vit_weights.safetensors"), weights, meta)
    expected = {"images": images, "labels": labels.to(torch.int32), "logits": logits.detach(),
                "loss": loss.detach().reshape(()), f"logits_top{c['top_k']}": logits_top,
                f"kept_top{c['top_k']}": kept}
    expected.update(grads)
    write_safetensors(os.path.join(here, "vit_expected.safetensors"), expected, meta)
    print(f"vit: loss {loss.item():.6f}; parameters: {', '.join(weights)}")


if __name__ == "__main__":
    main()
