#!/usr/bin/python3
"""Checks that bench/pytorch/tuned_model.py computes the function moelab is tested against.

Builds tests/reference/make_fixtures.py's Decoder (dense, and the 8-expert top-2 MoE with each MoE
implementation this torch has), copies its weights into the tuned Decoder, and compares on one
batch: the logits, the loss, and every parameter's gradient (q, k, v against the rows of the fused
qkv weight; each expert's). Float64, so that only a wrong formula can show: a real difference is
O(1), float64 rounding ~1e-15; the bound is 1e-10. The grouped-mm MoE (torch._grouped_mm, bf16 only)
is not compared here: float64 cannot run it, and no bf16 comparison is written yet, so that
column's function is not checked.

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


def compare(label, config, moe_kind=None, capacity_factor=0.0, tolerance=1e-10):
    torch.manual_seed(config["seed"])
    fixture = make_fixtures.Decoder(config)
    tuned_config = dict(config, experts=config.get("experts", 0))
    tuned = tuned_model.Decoder(tuned_config, moe_kind or "padded-bmm", capacity_factor)
    tuned_model.load_fixture_weights(tuned, fixture)
    tokens = torch.randint(0, config["vocab"], (config["batch"], config["seq"]))
    targets = torch.randint(0, config["vocab"], (config["batch"], config["seq"]))
    worst = {}
    logits_f = fixture(tokens)
    loss_f = make_fixtures.loss_fn(logits_f, targets)
    loss_f.backward()
    logits_t = tuned(tokens)
    loss_t = make_fixtures.loss_fn(logits_t, targets)
    loss_t.backward()
    worst["logits"] = ((logits_t - logits_f).abs().max() / logits_f.abs().max()).item()
    worst["loss"] = abs(loss_t.item() - loss_f.item()) / abs(loss_f.item())
    expected = fixture_grads_in_tuned_names(fixture, tuned)
    for name, g in gradients(tuned).items():
        scale = expected[name].abs().max().item() or 1.0
        worst["grad " + name] = (g - expected[name]).abs().max().item() / scale
    key, value = max(worst.items(), key=lambda kv: kv[1])
    ok = value <= tolerance
    print(f"{'ok' if ok else 'MISMATCH'}  {label}: largest relative difference {value:.2e} ({key}), "
          f"bound {tolerance:g}; attention: {'sdpa' if tuned_model.has_sdpa() else 'written out'}")
    return ok


def main():
    torch.set_default_dtype(torch.float64)  # parameters and the rotary tables
    config = dict(make_fixtures.CONFIG, seq=16, batch=4)
    moe_config = dict(make_fixtures.MOE_CONFIG, seq=16, batch=4)
    results = [compare("dense", config)]
    results.append(compare("moe loop", moe_config, "loop"))
    results.append(compare("moe padded-bmm (capacity read per layer)", moe_config, "padded-bmm"))
    results.append(compare("moe padded-bmm (fixed capacity, factor 8)", moe_config, "padded-bmm", 8.0))
    if tuned_model.grouped_mm_function() is None:
        print(f"skipped  moe grouped-mm: torch {torch.__version__} has no grouped_mm")
    else:
        print("grouped-mm is bf16 only: run the benchmark with --moe grouped-mm --precision bf16 to exercise it")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
