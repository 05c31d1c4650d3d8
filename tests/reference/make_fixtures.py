#!/usr/bin/python3
"""Reference fixtures for moelab's dense decoder, written by PyTorch (the llm.c way).

Builds the decoder exactly as moelab specifies it (nn/decoder.h), independently, in PyTorch:
token embedding; L pre-norm blocks x = x + attn(attn_norm(x)); x = x + ffn(ffn_norm(x)); final
RMSNorm; untied LM head; no biases. Attention: q/k/v/o projections [d, d], head_dim = d / heads,
rotary embeddings on pairs (2i, 2i+1) of each head with angle pos * theta^(-2i/head_dim),
scores scaled by 1/sqrt(head_dim), causal mask. FFN: down(relu(up(x))), f = d. RMSNorm:
x / sqrt(mean(x^2) + 1e-5) * w.

Writes two small safetensors files next to this script:
  decoder_weights.safetensors   every parameter under moelab's names (embed.weight, layers.0...)
  decoder_expected.safetensors  tokens [B, T] int32, targets [B, T] int32 (-100 = ignored),
                                logits [B, T, V], loss [], grad.<name> for every parameter,
                                adamw_losses [3]: the loss after each of 3 AdamW steps
The configuration is in both files' __metadata__.

Run with Debian's PyTorch:  /usr/bin/python3 tests/reference/make_fixtures.py
The C++ test tests/test_reference.cpp reads the files; the engine never runs PyTorch.
"""
import json
import math
import os
import struct

import torch

CONFIG = dict(vocab=16, d=32, heads=4, layers=2, ffn=32, rope_theta=10000.0, norm_eps=1e-5,
              batch=2, seq=8, seed=1234, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)


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


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_norm = RMSNorm(c["d"], c["norm_eps"])
        self.attn = Attention(c["d"], c["heads"], c["rope_theta"])
        self.ffn_norm = RMSNorm(c["d"], c["norm_eps"])
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


DTYPES = {torch.float32: "F32", torch.int32: "I32"}


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


def main():
    c = CONFIG
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

    here = os.path.dirname(os.path.abspath(__file__))
    meta = {k: json.dumps(v) for k, v in c.items()}
    meta["torch_version"] = torch.__version__
    write_safetensors(os.path.join(here, "decoder_weights.safetensors"), weights, meta)
    expected = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32), "logits": logits,
                "loss": loss.reshape(()), "adamw_losses": torch.tensor(adamw_losses, dtype=torch.float32)}
    expected.update(grads)
    write_safetensors(os.path.join(here, "decoder_expected.safetensors"), expected, meta)
    print(f"loss {loss.item():.6f}, AdamW losses {[round(x, 6) for x in adamw_losses]}")
    print("parameters:", ", ".join(weights))


if __name__ == "__main__":
    main()
