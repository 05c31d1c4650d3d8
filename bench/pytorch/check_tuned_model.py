#!/usr/bin/python3
"""Checks that bench/pytorch/tuned_model.py computes the function moelab is tested against.

Builds tests/reference/make_fixtures.py's Decoder (dense, and the 8-expert top-2 MoE with each MoE
implementation this torch has), copies its weights into the tuned Decoder, and compares on one
batch: the logits, the loss, and every parameter's gradient (q, k, v against the rows of the fused
qkv weight; each expert's). Float64, so that only a wrong formula can show: a real difference is
O(1), float64 rounding ~1e-15; the bound is 1e-10. The grouped-mm MoE (torch._grouped_mm) runs in
bf16 only, so it is compared in bf16: the tuned model in float32 under torch.autocast(bfloat16) on
the GPU against the fixture in float64, each tensor by ||got - want|| / ||want|| (Frobenius),
with bounds from bf16's 8-bit significand: 16 x 2^-8 = 0.0625 for the logits and the loss (each
product rounds its operands by up to 2^-9 relative, a few are chained), 64 x 2^-8 = 0.25 for the
gradients, where ReLU units and top-k choices that flip under that rounding add more (measured on
padded-bmm on this project's CPU: at most 0.10). A wrong formula is off by O(1). Where this torch
has no grouped_mm or no GPU, the same bf16 comparison runs on padded-bmm on the CPU instead, which
checks the check.

    /usr/bin/python3 bench/pytorch/check_tuned_model.py          # prints one line per model; exit 1 on a mismatch
"""
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "reference"))
sys.path.insert(0, here)
import make_fixtures  # noqa: E402
import tuned_model  # noqa: E402


def gradients(model):
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def fixture_grads_in_tuned_names(fixture, tuned):
    """The fixture's gradients, renamed and reshaped to the tuned model's parameters."""
    g = gradients(fixture)
    out = {}
    for name in gradients(tuned):
        if name.endswith("attn.qkv.weight"):
            p = name[: -len("qkv.weight")]
            out[name] = torch.cat((g[p + "q.weight"], g[p + "k.weight"], g[p + "v.weight"]))
        elif ".ffn.experts." in name and (name.endswith("up.weight") or name.endswith("down.weight")):
            layer, e = name.split(".ffn.experts.")[0], int(name.split(".ffn.experts.")[1].split(".")[0])
            which = "w_in" if name.endswith("up.weight") else "w_out"
            out[name] = g[f"{layer}.ffn.experts.{which}"][e].t()
        elif name.endswith(".ffn.w_in") or name.endswith(".ffn.w_out"):
            layer, which = name.rsplit(".ffn.", 1)
            out[name] = g[f"{layer}.ffn.experts.{which}"]
        else:
            out[name] = g[name]
    return out


def compare(label, config, moe_kind=None, capacity_factor=0.0, tolerance=1e-10, bf16_device=None):
    """bf16_device: run the tuned model in float32 under bf16 autocast on that device (the fixture
    stays float64 on the CPU) and compare there, at bf16's tolerance."""
    torch.manual_seed(config["seed"])
    fixture = make_fixtures.Decoder(config)
    tuned_config = dict(config, experts=config.get("experts", 0))
    tuned = tuned_model.Decoder(tuned_config, moe_kind or "padded-bmm", capacity_factor)
    tuned_model.load_fixture_weights(tuned, fixture)
    tokens = torch.randint(0, config["vocab"], (config["batch"], config["seq"]))
    targets = torch.randint(0, config["vocab"], (config["batch"], config["seq"]))
    worst = {}  # name -> (relative difference, its bound)
    logits_f = fixture(tokens)
    loss_f = make_fixtures.loss_fn(logits_f, targets)
    loss_f.backward()
    if bf16_device is None:
        logits_t = tuned(tokens)
        loss_t = make_fixtures.loss_fn(logits_t, targets)
    else:
        tuned = tuned.to(device=bf16_device, dtype=torch.float32)
        with torch.autocast(torch.device(bf16_device).type, dtype=torch.bfloat16):
            logits_t = tuned(tokens.to(bf16_device))
            loss_t = make_fixtures.loss_fn(logits_t.float(), targets.to(bf16_device))
    loss_t.backward()
    logits_t = logits_t.detach().to("cpu", torch.float64)

    def difference(got, want):  # float64: the largest element's; bf16: the norms' (see the header)
        if bf16_device is None:
            return ((got - want).abs().max() / (want.abs().max() or 1.0)).item()
        return ((got - want).norm() / (want.norm() or 1.0)).item()

    # Each tensor's (difference, bound); in bf16 the gradients' bound is 4x the values' (see the header).
    grad_bound = tolerance if bf16_device is None else 4 * tolerance
    worst["logits"] = (difference(logits_t, logits_f), tolerance)
    worst["loss"] = (abs(loss_t.item() - loss_f.item()) / abs(loss_f.item()), tolerance)
    expected = fixture_grads_in_tuned_names(fixture, tuned)
    for name, g in gradients(tuned).items():
        worst["grad " + name] = (difference(g.to("cpu", torch.float64), expected[name]), grad_bound)
    key, (value, bound) = max(worst.items(), key=lambda kv: kv[1][0] / kv[1][1])
    ok = value <= bound
    print(f"{'ok' if ok else 'MISMATCH'}  {label}: largest relative difference {value:.2e} ({key}), "
          f"bound {bound:g}; attention: {'sdpa' if tuned_model.has_sdpa() else 'written out'}")
    return ok


def main():
    torch.set_default_dtype(torch.float64)  # parameters and the rotary tables
    config = dict(make_fixtures.CONFIG, seq=16, batch=4)
    moe_config = dict(make_fixtures.MOE_CONFIG, seq=16, batch=4)
    results = [compare("dense", config)]
    results.append(compare("moe loop", moe_config, "loop"))
    results.append(compare("moe padded-bmm (capacity read per layer)", moe_config, "padded-bmm"))
    results.append(compare("moe padded-bmm (fixed capacity, factor 8)", moe_config, "padded-bmm", 8.0))
    bf16_bound = 16 * 2.0 ** -8
    if tuned_model.grouped_mm_function() is not None and torch.cuda.is_available():
        results.append(compare("moe grouped-mm (bf16 autocast, cuda)", moe_config, "grouped-mm",
                               tolerance=bf16_bound, bf16_device="cuda"))
    else:
        print(f"skipped  moe grouped-mm: torch {torch.__version__} has no grouped_mm or no GPU here; "
              "the bf16 comparison runs on padded-bmm on the CPU instead")
        results.append(compare("moe padded-bmm (bf16 autocast, cpu)", moe_config, "padded-bmm",
                               tolerance=bf16_bound, bf16_device="cpu"))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
