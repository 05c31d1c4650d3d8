#!/usr/bin/env bash
# bench/compare_gpu.sh — one training step on one GPU, moelab against PyTorch eager, for the three
# benchmark models at the issue's GPU scale (d 512, 8 layers, 8 heads, sequence 256, batch 64,
# vocabulary 64: train_step_bench --preset gpu):
#   dense           FFN width f = d
#   moe-8e-top2     8 experts of width d, top-2 (Mixtral gates)
#   moe-64e-top2    64 experts of width d, top-2
# Prints tokens/s, achieved TFLOPS and the fraction of the GPU's peak for both engines, and the
# ratio moelab / PyTorch; writes bench-results/gpu_comparison.json (and one JSON per run,
# bench-results/gpu_<model>_{moelab,pytorch}.json).
#
#   bench/compare_gpu.sh [options for both programs...]      e.g. --steps 50, --vocab 32768
# Environment:
#   MOELAB_BUILD   a build folder configured with CUDA (default build/; cmake -DMOELAB_CUDA=ON)
#   PYTHON         a Python whose torch has CUDA (default python3; Debian's python3-torch has none)
#   PEAK_TFLOPS    the GPU's peak for the fraction (default 67: H100 SXM / H200 float32 without
#                  tensor cores, what both engines use here: moelab's cuBLAS calls are full
#                  float32 and train_step.py turns TF32 off; H100 PCIe: 51)
# Model FLOPs per step (the same count for both engines, from moelab's JSON): batch * seq *
# (6 * (active non-embedding parameters + vocab * d) + 12 * layers * seq * d); see
# bench/train_step_bench.cpp. Run it on an otherwise idle GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MOELAB_BUILD:-build}
python=${PYTHON:-python3}
peak=${PEAK_TFLOPS:-67}
extra=("$@")
if [[ ! -x "$build/train_step_bench" ]]; then
  echo "compare_gpu.sh: $build/train_step_bench not found (build with -DMOELAB_CUDA=ON, or set MOELAB_BUILD)" >&2
  exit 2
fi
mkdir -p bench-results

names=(dense moe-8e-top2 moe-64e-top2)
declare -A model_args=([dense]="" [moe-8e-top2]="--experts 8 --k 2" [moe-64e-top2]="--experts 64 --k 2")
for name in "${names[@]}"; do
  read -r -a model <<< "${model_args[$name]}"
  echo "== $name"
  "$build/train_step_bench" --device cuda --preset gpu --peak-tflops "$peak" ${model[@]+"${model[@]}"} \
    ${extra[@]+"${extra[@]}"} --out "bench-results/gpu_${name}_moelab.json"
  "$python" bench/pytorch/train_step.py --device cuda --preset gpu ${model[@]+"${model[@]}"} \
    ${extra[@]+"${extra[@]}"} --out "bench-results/gpu_${name}_pytorch.json"
done

"$python" - "${names[@]}" <<'PY'
import json, sys

names = sys.argv[1:]
rows = {}
for name in names:
    m = json.load(open(f"bench-results/gpu_{name}_moelab.json"))
    p = json.load(open(f"bench-results/gpu_{name}_pytorch.json"))
    # Both must have run the same model, or the ratio means nothing.
    keys = ("vocab", "d", "heads", "layers", "experts") + (("k",) if m["config"]["experts"] > 0 else ())
    for key in keys:
        if m["config"][key] != p["config"].get(key, 0):  # PyTorch's dense config has no experts, k
            sys.exit(f"compare_gpu.sh: {name}: moelab and PyTorch ran different models ({key}: "
                     f"{m['config'][key]} vs {p['config'].get(key)})")
    for key in ("batch", "seq"):
        if m[key] != p[key]:
            sys.exit(f"compare_gpu.sh: {name}: different {key} ({m[key]} vs {p[key]})")
    flops, peak = m["model_flops_per_step"], m["peak_tflops"]
    pt_tflops = flops / p["median_step_seconds"] / 1e12
    rows[name] = {
        "config": m["config"], "batch": m["batch"], "seq": m["seq"],
        "active_non_embedding_parameters": m["active_non_embedding_parameters"],
        "model_flops_per_step": flops,
        "moelab": {"tokens_per_second": m["tokens_per_second"], "median_step_seconds": m["median_step_seconds"],
                   "achieved_tflops": m["achieved_tflops"], "fraction_of_peak": m["fraction_of_peak"]},
        "pytorch": {"tokens_per_second": p["tokens_per_second"], "median_step_seconds": p["median_step_seconds"],
                    "achieved_tflops": pt_tflops, "fraction_of_peak": pt_tflops / peak},
        "ratio_moelab_over_pytorch": m["tokens_per_second"] / p["tokens_per_second"],
    }
first = json.load(open(f"bench-results/gpu_{names[0]}_pytorch.json"))
summary = {"gpu": first.get("gpu"), "torch_version": first.get("torch_version"),
           "cuda_version": first.get("cuda_version"), "peak_tflops": peak,
           "precision": "float32 (no TF32) in both engines", "models": rows}
with open("bench-results/gpu_comparison.json", "w") as f:
    json.dump(summary, f, indent=2)
print(f"\n{summary['gpu'] or 'GPU'}, peak {summary['peak_tflops']:g} TFLOPS (float32); model FLOPs as in train_step_bench.cpp")
print(f"{'model':<14} {'moelab tok/s':>13} {'% peak':>7} {'pytorch tok/s':>14} {'% peak':>7} {'ratio':>6}")
for name, r in rows.items():
    print(f"{name:<14} {r['moelab']['tokens_per_second']:>13.0f} {100 * r['moelab']['fraction_of_peak']:>6.1f}% "
          f"{r['pytorch']['tokens_per_second']:>14.0f} {100 * r['pytorch']['fraction_of_peak']:>6.1f}% "
          f"{r['ratio_moelab_over_pytorch']:>6.2f}")
print("-> bench-results/gpu_comparison.json")
PY
