#!/usr/bin/python3
"""Reference fixtures for moelab's dense and MoE decoders, written by PyTorch (the llm.c way).

Builds the decoder exactly as moelab specifies it (nn/decoder.h), independently, in PyTorch:
token embedding; L pre-norm blocks x = x + attn(attn_norm(x)); x = x + ffn(ffn_norm(x)); final
RMSNorm; untied LM head; no biases. Attention: q/k/v/o projections [d, d], head_dim = d / heads,
rotary embeddings on pairs (2i, 2i+1) of each head with angle pos * theta^(-2i/head_dim),
scores scaled by 1/sqrt(head_dim), causal mask. FFN: down(relu(up(x))), f = d. RMSNorm:
x / sqrt(mean(x^2) + 1e-5) * w.

The MoE decoder (nn/moe/moe_decoder.h) is the same decoder with every FFN a mixture of experts
(nn/moe/moe_layer.h), written here the plain per-expert-loop way: router logits = x W^T
(W = router.weight [E, d], no bias), p = softmax(logits), each token's top-k experts by logit,
Mixtral gates g = p_top / sum p_top; expert e(x) = relu(x @ w_in[e]) @ w_out[e] with
experts.w_in [E, d, f] and experts.w_out [E, f, d]; y_t = sum_j g_tj expert_{e_tj}(x_t).
8 experts, top-2, f = d, no biases, no aux loss, no capacity. Top-k selection is discontinuous,
so the script asserts that in every forward it makes (the first and the 3 after AdamW steps),
every token's k-th and (k+1)-th router logits are at least MOE_MIN_GAP apart, and that every
expert of every layer gets tokens in the first forward (so every expert's gradient is tested).

Writes four small safetensors files next to this script:
  decoder_weights.safetensors       every dense parameter under moelab's names (embed.weight, layers.0...)
  decoder_expected.safetensors      tokens [B, T] int32, targets [B, T] int32 (-100 = ignored),
                                    logits [B, T, V], loss [], grad.<name> for every parameter,
                                    adamw_losses [3]: the loss after each of 3 AdamW steps
  moe_decoder_weights.safetensors   the same for the MoE decoder (layers.{i}.ffn.router.weight,
  moe_decoder_expected.safetensors  layers.{i}.ffn.experts.w_in / w_out instead of ffn.up / down)
The configuration is in each file's __metadata__. The dense files are made first and do not
depend on the MoE ones (the MoE model is seeded afresh after them).

Run with Debian's PyTorch:  /usr/bin/python3 tests/reference/make_fixtures.py
The C++ tests tests/test_reference.cpp and tests/test_reference_moe.cpp read the files; the
engine never runs PyTorch.
"""
import json
import math
import os
import struct

import torch

CONFIG = dict(vocab=16, d=32, heads=4, layers=2, ffn=32, rope_theta=10000.0, norm_eps=1e-5,
              batch=2, seq=8, seed=1234, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
# The MoE decoder: the dense configuration with an 8-expert top-2 FFN (f = ffn = d) and its own seed,
# chosen so that no token's 2nd and 3rd router logits come closer than MOE_MIN_GAP (float32 rounding
# in either engine is ~1e-6) and every expert of every layer gets tokens in the first forward.
MOE_CONFIG = dict(CONFIG, experts=8, k=2, gates="softmax-topk-renorm", seed=158)
MOE_MIN_GAP = 1e-3


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta):
    """x: [B, T, H, hd]; rotates pairs (2i, 2i+1) by pos * theta^(-2i/hd)."""
    _, t, _, hd = x.shape
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)       # [hd/2]
    angles = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]    # [T, hd/2]
    cos = angles.cos().to(x.dtype)[None, :, None, :]
    sin = angles.sin().to(x.dtype)[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class Attention(torch.nn.Module):
    def __init__(self, d, heads, theta):
        super().__init__()
        self.heads, self.theta = heads, theta
        self.q = torch.nn.Linear(d, d, bias=False)
        self.k = torch.nn.Linear(d, d, bias=False)
        self.v = torch.nn.Linear(d, d, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q = rope(self.q(x).view(b, t, self.heads, hd), self.theta).transpose(1, 2)  # [B, H, T, hd]
        k = rope(self.k(x).view(b, t, self.heads, hd), self.theta).transpose(1, 2)
        v = self.v(x).view(b, t, self.heads, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v                                     # [B, H, T, hd]
        return self.o(out.transpose(1, 2).reshape(b, t, d))


class MLP(torch.nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.up = torch.nn.Linear(d, f, bias=False)
        self.down = torch.nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Experts(torch.nn.Module):
    """E ReLU MLPs stacked: w_in [E, d, f], w_out [E, f, d]; expert e(x) = relu(x @ w_in[e]) @ w_out[e]."""

    def __init__(self, experts, d, f):
        super().__init__()
        self.w_in = torch.nn.Parameter(torch.empty(experts, d, f).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.w_out = torch.nn.Parameter(torch.empty(experts, f, d).uniform_(-1 / math.sqrt(f), 1 / math.sqrt(f)))

    def expert(self, e, x):
        return torch.relu(x @ self.w_in[e]) @ self.w_out[e]


class MoE(torch.nn.Module):
    """Token-choice top-k mixture of experts with Mixtral gates (softmax, top-k, renormalise)."""

    def __init__(self, d, f, experts, k):
        super().__init__()
        self.k = k
        self.router = torch.nn.Linear(d, experts, bias=False)
        self.experts = Experts(experts, d, f)
        self.gaps = []   # per forward: each token's (k-th largest logit) - ((k+1)-th largest)
        self.loads = []  # per forward: assignments per expert [E]

    def forward(self, x):
        xf = x.reshape(-1, x.shape[-1])                                  # [N, d]
        logits = self.router(xf)                                         # [N, E]
        probs = torch.softmax(logits, dim=-1)
        ranked = torch.sort(logits.detach(), dim=-1, descending=True).values
        self.gaps.append(ranked[:, self.k - 1] - ranked[:, self.k])
        chosen = torch.topk(logits.detach(), self.k, dim=-1).indices    # [N, k]
        self.loads.append(torch.bincount(chosen.flatten(), minlength=logits.shape[-1]))
        gates = probs.gather(-1, chosen)
        gates = gates / gates.sum(-1, keepdim=True)                      # [N, k]
        y = torch.zeros_like(xf)
        for e in range(self.router.out_features):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel() == 0:
                continue
            out = self.experts.expert(e, xf[token]) * gates[token, slot][:, None]
            y = y.index_add(0, token, out)
        return y.reshape(x.shape)


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_norm = RMSNorm(c["d"], c["norm_eps"])
        self.attn = Attention(c["d"], c["heads"], c["rope_theta"])
        self.ffn_norm = RMSNorm(c["d"], c["norm_eps"])
        if "experts" in c:
            self.ffn = MoE(c["d"], c["ffn"], c["experts"], c["k"])
        else:
            self.ffn = MLP(c["d"], c["ffn"])

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class Decoder(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed = torch.nn.Embedding(c["vocab"], c["d"])
        self.layers = torch.nn.ModuleList([Block(c) for _ in range(c["layers"])])
        self.norm = RMSNorm(c["d"], c["norm_eps"])
        self.head = torch.nn.Linear(c["d"], c["vocab"], bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.layers:
            x = block(x)
        return self.head(self.norm(x))


def loss_fn(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                             ignore_index=-100)


DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}


def write_safetensors(path, tensors, metadata):
    """The safetensors format by hand: u64 header length, JSON header, raw little-endian data."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        array = t.detach().contiguous().numpy()
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_fixture(c, prefix):
    """Builds the decoder for configuration c (MoE FFNs when c has "experts"), runs it, and writes
    {prefix}_weights.safetensors and {prefix}_expected.safetensors (MoE: only when the routing checks pass)."""
    torch.manual_seed(c["seed"])
    torch.set_num_threads(1)
    model = Decoder(c)
    with torch.no_grad():  # norm weights away from 1 so their gradients are exercised
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    tokens = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), dtype=torch.int64)
    targets = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), dtype=torch.int64)
    targets[0, 0] = -100  # ignored positions exercise the mask
    targets[1, 5] = -100

    weights = {name: p.detach().clone() for name, p in model.named_parameters()}
    logits = model(tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    grads = {"grad." + name: p.grad.detach().clone() for name, p in model.named_parameters()}

    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=c["betas"], eps=c["eps"],
                            weight_decay=c["weight_decay"])
    adamw_losses = []
    for _ in range(3):  # step from the gradient of the current loss, then record the new loss
        opt.step()
        opt.zero_grad()
        step_loss = loss_fn(model(tokens), targets)
        step_loss.backward()
        adamw_losses.append(step_loss.item())

    if "experts" in c:  # every forward above (the first and 3 after steps) must be clear of top-k ties
        gap = min(g.min().item() for block in model.layers for g in block.ffn.gaps)
        print(f"{prefix}: smallest gap between a token's k-th and (k+1)-th router logit, over all "
              f"{len(model.layers[0].ffn.gaps)} forwards and {len(model.layers)} layers: {gap:.6f}")
        assert gap >= MOE_MIN_GAP, f"top-k selection is near a tie (gap {gap} < {MOE_MIN_GAP}): pick another seed"
        loads = [block.ffn.loads[0].tolist() for block in model.layers]
        print(f"{prefix}: assignments per expert in the first forward, per layer: {loads}")
        assert all(n > 0 for load in loads for n in load), "an expert gets no token: pick another seed"

    here = os.path.dirname(os.path.abspath(__file__))
    meta = {k: json.dumps(v) for k, v in c.items()}
    meta["torch_version"] = torch.__version__
    write_safetensors(os.path.join(here, prefix + "_weights.safetensors"), weights, meta)
    expected = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32), "logits": logits,
                "loss": loss.reshape(()), "adamw_losses": torch.tensor(adamw_losses, dtype=torch.float32)}
    expected.update(grads)
    write_safetensors(os.path.join(here, prefix + "_expected.safetensors"), expected, meta)
    print(f"{prefix}: loss {loss.item():.6f}, AdamW losses {[round(x, 6) for x in adamw_losses]}")
    print("parameters:", ", ".join(weights))


def main():
    make_fixture(CONFIG, "decoder")
    make_fixture(MOE_CONFIG, "moe_decoder")


if __name__ == "__main__":
    main()
