#!/usr/bin/python3
"""Reference fixture for moelab's bfloat16 dtype and its mixed-precision policy, by PyTorch's CPU autocast.

  cast       x (F32: ties, overflow, NaN, infinities, subnormals, random values at many scales) and
             x.to(torch.bfloat16) (BF16): moelab's rounding must give the same bits
  linear     y = F.linear(x, w, b) under torch.autocast("cpu", dtype=torch.bfloat16): y is bfloat16;
             loss = sum(y.float() * r); the gradients of x, w, b (float32: autocast's casts pass the
             gradient back to the float32 leaves)
  matmul     y = F.linear(a, b) under autocast (no bias, a @ b^T): y (bfloat16)
  bmm        y = a @ b, batched, under autocast: y (bfloat16)
  experts    three experts' products x_e @ w_e under autocast, one per group of rows (as a grouped
             product computes them), y (bfloat16) and the gradients of x and w (float32)
  attention  softmax(q k^T * scale) v per head under autocast (q k^T and p v are bf16 matmuls; PyTorch
             1.13's CPU autocast runs softmax in float32 and casts p back to bf16 for p v), y (bfloat16)

PyTorch rounds every product's output to bfloat16; moelab keeps the float32 sum (autograd/precision.h),
so tests/test_mixed_precision.cpp compares with tolerances that allow for that one rounding.
Measured with Debian's PyTorch 1.13.1 on an AVX2 CPU (no AVX512_BF16, so no oneDNN bf16 kernels):
F.linear (a @ b^T, with or without bias) sums in float32 and rounds once, bit for bit what
bfloat16 operands with a float32 sum give; but a @ b (batched or not) and the backward's products
(g @ w, g^T @ x) give those bits for only 20-50% of the elements: that version's fallback
accumulates in bfloat16. The test bounds those with bfloat16 accumulation's error, K * 2^-9 *
sum |a_k b_k|, and checks the float32-sum path's bits on F.linear.
Writes bf16_autocast.safetensors next to this script. Run with Debian's PyTorch:
    /usr/bin/python3 tests/reference/make_bf16_fixture.py
tests/test_bfloat16_tensor.cpp and tests/test_mixed_precision.cpp read it; the engine never runs PyTorch.
"""
import json
import os
import struct

import torch
import torch.nn.functional as F

SEED = 5


def raw_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes(), "BF16"
    names = {torch.float32: ("<f4", "F32"), torch.float64: ("<f8", "F64"), torch.int32: ("<i4", "I32")}
    fmt, name = names[t.dtype]
    return t.numpy().astype(fmt).tobytes(), name


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        data, dtype = raw_bytes(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    out = {}
    bf16 = torch.bfloat16
    auto = lambda: torch.autocast("cpu", dtype=bf16)

    # cast: special values, then random ones from 1e-30 to 1e30
    one_ulp = 2.0 ** -7
    special = [0.0, -0.0, 1.0, 1.0 + one_ulp / 2, 1.0 + 3 * one_ulp / 2, 1.0 + one_ulp / 2 + 2.0 ** -20,
               -1.0 - one_ulp / 2, 0.1, -0.1, 1.99609375, 3.3895313892515355e38, 3.4028234663852886e38,
               -3.4028234663852886e38, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40, 1.4e-45,
               1.1754943508222875e-38, 65504.0, 1e-30, 123456.789]
    scales = torch.pow(10.0, torch.randint(-30, 31, (977,)).double())
    x = torch.cat([torch.tensor(special, dtype=torch.float64), torch.randn(977, dtype=torch.float64) * scales]).float()
    out["cast.x"] = x
    out["cast.y"] = x.to(bf16)

    # linear: x [16, 24], w [20, 24], b [20]
    x = torch.randn(16, 24, requires_grad=True)
    w = (torch.randn(20, 24) * 0.3).requires_grad_()
    b = (torch.randn(20) * 0.5).requires_grad_()
    r = torch.randn(16, 20)
    with auto():
        y = F.linear(x, w, b)
    assert y.dtype == bf16
    (y.float() * r).sum().backward()
    out.update({"linear.x": x, "linear.w": w, "linear.b": b, "linear.r": r, "linear.y": y,
                "linear.grad.x": x.grad, "linear.grad.w": w.grad, "linear.grad.b": b.grad})

    # matmul: F.linear(a [66, 40], b [27, 40]) = a @ b^T; bmm: a [2, 33, 40] @ b [2, 40, 27]
    a = torch.randn(66, 40)
    bb = torch.randn(27, 40)
    with auto():
        y = F.linear(a, bb)
    assert y.dtype == bf16
    out.update({"matmul.a": a, "matmul.b": bb, "matmul.y": y})
    a = torch.randn(2, 33, 40)
    bb = torch.randn(2, 40, 27)
    with auto():
        y = a @ bb
    assert y.dtype == bf16
    out.update({"bmm.a": a, "bmm.b": bb, "bmm.y": y})

    # experts: rows of x [N, d] grouped by offsets; expert e: x_e @ w[e], w [E, d, f]
    E, N, D, FF = 3, 14, 12, 10
    offsets = [0, 5, 5, 13]  # expert 1 empty; row 13 belongs to no expert (output 0)
    x = torch.randn(N, D, requires_grad=True)
    w = (torch.randn(E, D, FF) * 0.4).requires_grad_()
    r = torch.randn(N, FF)
    with auto():
        parts = [x[offsets[e]:offsets[e + 1]] @ w[e] for e in range(E)]
        y = torch.cat(parts + [torch.zeros(N - offsets[E], FF, dtype=bf16)])
    assert y.dtype == bf16
    (y.float() * r).sum().backward()
    out.update({"experts.x": x, "experts.w": w, "experts.offsets": torch.tensor(offsets, dtype=torch.int32),
                "experts.r": r, "experts.y": y, "experts.grad.x": x.grad, "experts.grad.w": w.grad})

    # attention: q, k, v [B, T, H, hd], bidirectional, scale 1/sqrt(hd)
    B, T, H, HD = 2, 7, 2, 8
    q, k, v = (torch.randn(B, T, H, HD) for _ in range(3))
    scale = HD ** -0.5
    with auto():
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, hd]
        s = (qh @ kh.transpose(-1, -2)) * scale
        p = torch.softmax(s, dim=-1)
        y = (p.to(bf16) @ vh).transpose(1, 2)  # [B, T, H, hd]
    assert y.dtype == bf16
    out.update({"attention.q": q, "attention.k": k, "attention.v": v, "attention.y": y})

    meta = {"seed": json.dumps(SEED), "torch": json.dumps(torch.__version__), "attention.scale": json.dumps(scale)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bf16_autocast.safetensors")
    write_safetensors(path, out, meta)
    print("wrote", path)


if __name__ == "__main__":
    main()
