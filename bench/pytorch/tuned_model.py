"""The benchmark decoder written the way a PyTorch user who cares about speed writes it.

The same function as tests/reference/make_fixtures.py's Decoder (the definition moelab is checked
against), so that a benchmark compares engines and not models: token embedding; L pre-norm blocks
x = x + attn(rmsnorm(x)); x = x + ffn(rmsnorm(x)); final RMSNorm; untied head; no biases; rotary
embeddings on pairs (2i, 2i+1); causal attention scaled by 1/sqrt(head_dim); FFN down(relu(up(x)));
MoE: softmax router, top-k, Mixtral gates (renormalised over the k chosen). What differs is only
how it is computed:

- q, k and v come from one [3d, d] product (one GEMM instead of three);
- the rotary tables are built once, at construction, and moved with the model to its device (the fixture
  rebuilds them in float64 on every call);
- attention is torch.nn.functional.scaled_dot_product_attention(is_causal=True) where this torch
  has it (2.0 and later: flash / memory-efficient kernels on a GPU); torch 1.13 has none and runs
  the written-out softmax(q k^T / sqrt(hd) + mask) v, said in the JSON (`attention`);
- RMSNorm is torch.nn.functional.rms_norm where present (2.4 and later), else the written-out form;
- the MoE layer is one of three implementations, chosen by name (MOE_KINDS):
    loop        the Hugging Face / Mixtral way: a Python loop over experts, each finding its tokens
                with nonzero() (on a GPU the host waits for that once per expert per layer) and
                index_add-ing its output back. Kept, labelled, as what many MoE codes still run.
    padded-bmm  no loop: the (token, expert) pairs are sorted by expert, each expert's rows are
                padded to one capacity C, and the experts run as two batched products torch.bmm
                [E, C, d] x [E, d, f] (float32, or bf16 under autocast). C is either read from the
                device once per layer (capacity_factor 0: C = the largest load rounded up to 8, one
                host wait per layer and no dropped token) or fixed, C = ceil(factor * N k / E) (no
                host wait at all); a fixed C records the largest load it met (max_load) and the
                benchmark refuses its figure if any load ever passed C, so no token was dropped in a
                reported run.
    grouped-mm  torch.nn.functional.grouped_mm or torch._grouped_mm (PyTorch 2.8 and later; fast on
                sm_90): one grouped product over the sorted rows, in bfloat16 (those kernels' type),
                without padding to a common capacity (each group only to a multiple of 16 rows,
                inside a buffer whose size is fixed, so the host never waits).
The weights can be copied from the fixture's Decoder (load_fixture_weights) to check that the two
compute the same function: bench/pytorch/check_tuned_model.py.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from make_fixtures import MLP  # noqa: E402  (the dense FFN, down(relu(up(x))): nothing to speed up there)

MOE_KINDS = ("loop", "padded-bmm", "grouped-mm")


def grouped_mm_function():
    """torch's grouped product (mat_a [M, K], mat_b [G, K, N], offs [G] int32 ends) or None."""
    return getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


def has_sdpa():
    return hasattr(F, "scaled_dot_product_attention")


def rms_norm(x, weight, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Rotary(torch.nn.Module):
    """cos and sin of pos * theta^(-2i/hd) for pos < seq, built once in float64 and kept as [seq, hd/2]
    buffers of the default dtype (float32; float64 in check_tuned_model.py)."""

    def __init__(self, head_dim, seq, theta):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # [hd/2]
        angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]         # [T, hd/2]
        dtype = torch.get_default_dtype()
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)

    def forward(self, x):
        """x [B, H, T, hd] -> the same shape, pairs (2i, 2i+1) rotated."""
        t = x.shape[-2]
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)                        # [T, hd/2]
        pairs = x.unflatten(-1, (-1, 2))                                                      # [B, H, T, hd/2, 2]
        even, odd = pairs[..., 0], pairs[..., 1]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Attention(torch.nn.Module):
    def __init__(self, d, heads, seq, theta):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)   # rows: q, then k, then v
        self.o = torch.nn.Linear(d, d, bias=False)
        self.rotary = Rotary(d // heads, seq, theta)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)      # each [B, H, T, hd]
        q, k = self.rotary(q), self.rotary(k)
        if has_sdpa():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            out = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v  # [B, H, T, hd]
        return self.o(out.transpose(1, 2).reshape(b, t, d))


def mixtral_gates(router, x, k):
    """x [N, d] -> gates [N, k] (softmax over all experts, top-k, renormalised), chosen [N, k]."""
    probs = torch.softmax(router(x), dim=-1)                                          # [N, E]
    gates, chosen = probs.topk(k, dim=-1)
    return gates / gates.sum(-1, keepdim=True), chosen


class LoopMoE(torch.nn.Module):
    """Hugging Face / Mixtral style: one Python iteration per expert, nonzero() to find its tokens."""

    def __init__(self, d, f, experts, k):
        super().__init__()
        self.k = k
        self.router = torch.nn.Linear(d, experts, bias=False)
        self.experts = torch.nn.ModuleList([MLP(d, f) for _ in range(experts)])

    def forward(self, x):
        xf = x.reshape(-1, x.shape[-1])                                                   # [N, d]
        gates, chosen = mixtral_gates(self.router, xf, self.k)
        out = torch.zeros_like(xf)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                y = expert(xf[token]) * gates[token, slot, None]
                out.index_add_(0, token, y.to(out.dtype))
        return out.reshape(x.shape)


class SortedRouting:
    """The (token, expert) pairs of one forward sorted by expert, found without a host wait.

    chosen [N, k] -> order [N k] (pair indices sorted by expert, stable), token [N k] (each sorted
    pair's token), expert [N k], rank [N k] (its position among its expert's pairs), counts [E]."""

    def __init__(self, chosen, experts):
        flat = chosen.reshape(-1)                                                         # [N k]
        self.order = torch.argsort(flat, stable=True)
        self.expert = flat[self.order]
        self.token = torch.div(self.order, chosen.shape[1], rounding_mode="floor")
        # scatter_add, not bincount: bincount on a GPU reads its input's maximum on the host.
        self.counts = torch.zeros(experts, dtype=torch.long, device=flat.device).scatter_add_(
            0, flat, torch.ones_like(flat))
        starts = torch.cumsum(self.counts, 0) - self.counts                               # [E]
        self.rank = torch.arange(flat.numel(), device=flat.device) - starts[self.expert]


class PaddedBmmMoE(torch.nn.Module):
    """Sort by expert, pad every expert to capacity C, two torch.bmm over [E, C, .] (see the header)."""

    def __init__(self, d, f, experts, k, capacity_factor=0.0):
        super().__init__()
        self.k, self.experts, self.capacity_factor = k, experts, capacity_factor
        self.router = torch.nn.Linear(d, experts, bias=False)
        self.w_in = torch.nn.Parameter(torch.empty(experts, d, f).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.w_out = torch.nn.Parameter(torch.empty(experts, f, d).uniform_(-1 / math.sqrt(f), 1 / math.sqrt(f)))
        self.register_buffer("max_load", torch.zeros((), dtype=torch.long), persistent=False)
        self.capacity = 0  # the last forward's C

    def forward(self, x):
        xf = x.reshape(-1, x.shape[-1])                                                   # [N, d]
        n, d = xf.shape
        gates, chosen = mixtral_gates(self.router, xf, self.k)
        r = SortedRouting(chosen, self.experts)
        if self.capacity_factor > 0:
            c = math.ceil(self.capacity_factor * n * self.k / self.experts)
            self.max_load.copy_(torch.maximum(self.max_load, r.counts.max()))
        else:
            c = (int(r.counts.max()) + 7) // 8 * 8   # the one host wait of this layer
        self.capacity = c
        keep = r.rank < c
        # Row of each sorted pair in the padded [E * C] buffer; a pair past C goes to the spare
        # last row (only possible with a fixed C, and then the run's figure is refused).
        row = torch.where(keep, r.expert * c + r.rank, torch.full_like(r.rank, self.experts * c))
        padded = xf.new_zeros(self.experts * c + 1, d).index_copy(0, row, xf[r.token])     # [E C + 1, d]
        h = torch.relu(torch.bmm(padded[:-1].view(self.experts, c, d), self.w_in))         # [E, C, f]
        y = torch.bmm(h, self.w_out).reshape(self.experts * c, d)                           # [E C, d]
        y = torch.cat((y, y.new_zeros(1, d)))[row]                                          # [N k, d], sorted pairs
        g = gates.reshape(-1)[r.order]
        out = torch.zeros_like(xf).index_add(0, r.token, (y * g[:, None].to(y.dtype)).to(xf.dtype))
        return out.reshape(x.shape)


class GroupedMmMoE(torch.nn.Module):
    """Sort by expert, one bf16 grouped product per expert matrix, no common capacity (see the header)."""

    def __init__(self, d, f, experts, k):
        super().__init__()
        self.k, self.experts = k, experts
        self.router = torch.nn.Linear(d, experts, bias=False)
        self.w_in = torch.nn.Parameter(torch.empty(experts, d, f).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.w_out = torch.nn.Parameter(torch.empty(experts, f, d).uniform_(-1 / math.sqrt(f), 1 / math.sqrt(f)))
        self.grouped_mm = grouped_mm_function()
        if self.grouped_mm is None:
            raise RuntimeError(f"--moe grouped-mm: this torch ({torch.__version__}) has neither "
                               "torch.nn.functional.grouped_mm nor torch._grouped_mm (PyTorch 2.8 and later)")

    def forward(self, x):
        xf = x.reshape(-1, x.shape[-1])                                                   # [N, d]
        n, d = xf.shape
        gates, chosen = mixtral_gates(self.router, xf, self.k)
        r = SortedRouting(chosen, self.experts)
        # Each group starts at a multiple of 16 rows (the kernels' alignment); the buffer holds the
        # worst case, N k + 16 E rows, so its size never depends on the routing.
        padded_counts = (r.counts + 15) // 16 * 16
        ends = torch.cumsum(padded_counts, 0)                                               # [E]
        row = (ends - padded_counts)[r.expert] + r.rank                                     # [N k]
        rows = n * self.k + 16 * self.experts
        a = xf.new_zeros(rows, d, dtype=torch.bfloat16).index_copy(0, row, xf[r.token].to(torch.bfloat16))
        offs = ends.to(torch.int32)
        h = torch.relu(self.grouped_mm(a, self.w_in.to(torch.bfloat16), offs=offs))         # [rows, f]
        y = self.grouped_mm(h, self.w_out.to(torch.bfloat16), offs=offs)[row]               # [N k, d]
        g = gates.reshape(-1)[r.order]
        out = torch.zeros_like(xf).index_add(0, r.token, (y.float() * g[:, None].float()).to(xf.dtype))
        return out.reshape(x.shape)


def make_moe(kind, d, f, experts, k, capacity_factor=0.0):
    if kind == "loop":
        return LoopMoE(d, f, experts, k)
    if kind == "padded-bmm":
        return PaddedBmmMoE(d, f, experts, k, capacity_factor)
    if kind == "grouped-mm":
        return GroupedMmMoE(d, f, experts, k)
    raise ValueError(f"unknown MoE kind {kind!r} (one of {', '.join(MOE_KINDS)})")


class Block(torch.nn.Module):
    def __init__(self, c, moe_kind, capacity_factor):
        super().__init__()
        self.attn_norm = RMSNorm(c["d"], c["norm_eps"])
        self.attn = Attention(c["d"], c["heads"], c["seq"], c["rope_theta"])
        self.ffn_norm = RMSNorm(c["d"], c["norm_eps"])
        if c.get("experts", 0) > 0:
            self.ffn = make_moe(moe_kind, c["d"], c["ffn"], c["experts"], c["k"], capacity_factor)
        else:
            self.ffn = MLP(c["d"], c["ffn"])

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class Decoder(torch.nn.Module):
    """c: vocab, d, heads, layers, ffn, rope_theta, norm_eps, seq (the rotary tables' length), and
    experts, k for an MoE decoder (experts 0 or absent: dense)."""

    def __init__(self, c, moe_kind="padded-bmm", capacity_factor=0.0):
        super().__init__()
        self.embed = torch.nn.Embedding(c["vocab"], c["d"])
        self.layers = torch.nn.ModuleList([Block(c, moe_kind, capacity_factor) for _ in range(c["layers"])])
        self.norm = RMSNorm(c["d"], c["norm_eps"])
        self.head = torch.nn.Linear(c["d"], c["vocab"], bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.layers:
            x = block(x)
        return self.head(self.norm(x))

    def moe_layers(self):
        return [b.ffn for b in self.layers if not isinstance(b.ffn, MLP)]


@torch.no_grad()
def load_fixture_weights(tuned, fixture):
    """Copies make_fixtures.Decoder's weights (its MoE: router, experts.w_in [E, d, f], w_out [E, f, d])
    into this Decoder, whatever its MoE kind."""
    tuned.embed.weight.copy_(fixture.embed.weight)
    tuned.norm.weight.copy_(fixture.norm.weight)
    tuned.head.weight.copy_(fixture.head.weight)
    for mine, theirs in zip(tuned.layers, fixture.layers):
        mine.attn_norm.weight.copy_(theirs.attn_norm.weight)
        mine.ffn_norm.weight.copy_(theirs.ffn_norm.weight)
        a = theirs.attn
        mine.attn.qkv.weight.copy_(torch.cat((a.q.weight, a.k.weight, a.v.weight)))
        mine.attn.o.weight.copy_(a.o.weight)
        if isinstance(mine.ffn, MLP):
            mine.ffn.up.weight.copy_(theirs.ffn.up.weight)
            mine.ffn.down.weight.copy_(theirs.ffn.down.weight)
            continue
        mine.ffn.router.weight.copy_(theirs.ffn.router.weight)
        w_in, w_out = theirs.ffn.experts.w_in, theirs.ffn.experts.w_out
        if isinstance(mine.ffn, LoopMoE):
            for e, expert in enumerate(mine.ffn.experts):
                expert.up.weight.copy_(w_in[e].t())    # Linear keeps [out, in]
                expert.down.weight.copy_(w_out[e].t())
        else:
            mine.ffn.w_in.copy_(w_in)
            mine.ffn.w_out.copy_(w_out)
