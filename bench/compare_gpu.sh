#!/usr/bin/env bash
# bench/compare_gpu.sh — one training step on one GPU, moelab against PyTorch, for the three
# benchmark models at the GPU scale (d 512, 8 layers, 8 heads, sequence 256, batch 64,
# vocabulary 64: train_step_bench --preset gpu):
#   dense           FFN width f = d
#   moe-8e-top2     8 experts of width d, top-2 (Mixtral gates)
#   moe-64e-top2    64 experts of width d, top-2
# Columns, per model: moelab and PyTorch eager in full float32 (TF32 off in both: the main
# comparison), PyTorch with torch.compile in float32 (COMPILE=0 leaves it out), and moelab and
# PyTorch eager with --precision tf32 (TF32=0 leaves them out; moelab's grouped expert products
# stay float32 there, only cuBLAS's products use TF32). Prints tokens/s and the ratios; writes
# bench-results/gpu_comparison.json and one JSON per run, bench-results/gpu_<model>_<column>.json.
# A column that fails (torch.compile on an MoE model, say) is reported as missing; the float32
# moelab and eager columns must succeed.
#
#   bench/compare_gpu.sh [options for every program...]      e.g. --steps 50, --vocab 32768
# Environment:
#   MOELAB_BUILD   a build folder configured with CUDA (default build/; cmake -DMOELAB_CUDA=ON)
#   PYTHON         a Python whose torch has CUDA (default python3; Debian's python3-torch has none)
#   PEAK_TFLOPS    the GPU's float32 peak without tensor cores, for the fraction (default 67: H100
#                  SXM / H200; H100 PCIe: 51)
#   COMPILE, TF32  1 (default) or 0: whether to run those columns
#   RUN_TIMEOUT    seconds allowed to each run (default 300)
#   COMPILE_TIMEOUT  seconds allowed to each torch.compile run, compiling included (default 300)
# Model FLOPs per step (the same count for both engines, from moelab's JSON): batch * seq *
# (6 * (active non-embedding parameters + vocab * d) + 12 * layers * seq * d); see
# bench/train_step_bench.cpp. Run it on an otherwise idle GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MOELAB_BUILD:-build}
python=${PYTHON:-python3}
peak=${PEAK_TFLOPS:-67}
compile=${COMPILE:-1}
tf32=${TF32:-1}
run_timeout=${RUN_TIMEOUT:-300}
compile_timeout=${COMPILE_TIMEOUT:-300}
extra=("$@")
if [[ ! -x "$build/train_step_bench" ]]; then
  echo "compare_gpu.sh: $build/train_step_bench not found (build with -DMOELAB_CUDA=ON, or set MOELAB_BUILD)" >&2
  exit 2
fi
mkdir -p bench-results
rm -f bench-results/gpu_*.json

names=(dense moe-8e-top2 moe-64e-top2)
declare -A model_args=([dense]="" [moe-8e-top2]="--experts 8 --k 2" [moe-64e-top2]="--experts 64 --k 2")
# run COLUMN REQUIRED COMMAND...: one run with its timeout; a required column's failure stops the script
run() {
  local column=$1 required=$2 limit=$run_timeout
  shift 2
  [[ $column == compile ]] && limit=$compile_timeout
  if ! timeout "$limit" "$@"; then
    echo "compare_gpu.sh: the $column run failed or passed ${limit} s" >&2
    [[ $required == 1 ]] && exit 1
  fi
  return 0
}
for name in "${names[@]}"; do
  read -r -a model <<< "${model_args[$name]}"
  common=(--device cuda --preset gpu ${model[@]+"${model[@]}"} ${extra[@]+"${extra[@]}"})
  echo "== $name"
  run moelab 1 "$build/train_step_bench" --peak-tflops "$peak" "${common[@]}" --out "bench-results/gpu_${name}_moelab.json"
  run eager 1 "$python" bench/pytorch/train_step.py "${common[@]}" --out "bench-results/gpu_${name}_eager.json"
  if [[ $compile == 1 ]]; then
    run compile 0 "$python" bench/pytorch/train_step.py --compile "${common[@]}" --out "bench-results/gpu_${name}_compile.json"
  fi
  if [[ $tf32 == 1 ]]; then
    run moelab-tf32 0 "$build/train_step_bench" --precision tf32 --peak-tflops "$peak" "${common[@]}" \
      --out "bench-results/gpu_${name}_moelab-tf32.json"
    run eager-tf32 0 "$python" bench/pytorch/train_step.py --precision tf32 "${common[@]}" \
      --out "bench-results/gpu_${name}_eager-tf32.json"
  fi
done

"$python" - "$peak" "${names[@]}" <<'PY'
import json, os, sys

peak = float(sys.argv[1])
names = sys.argv[2:]
columns = ["moelab", "eager", "compile", "moelab-tf32", "eager-tf32"]


def load(name, column):
    path = f"bench-results/gpu_{name}_{column}.json"
    return json.load(open(path)) if os.path.exists(path) else None


rows = {}
for name in names:
    runs = {c: load(name, c) for c in columns}
    m, p = runs["moelab"], runs["eager"]
    # Every run must have trained the same model, or the ratios mean nothing.
    keys = ("vocab", "d", "heads", "layers", "experts") + (("k",) if m["config"]["experts"] > 0 else ())
    for column, r in runs.items():
        if r is None or column == "moelab":
            continue
        for key in keys:
            if m["config"][key] != r["config"].get(key, 0):  # PyTorch's dense config has no experts, k
                sys.exit(f"compare_gpu.sh: {name}: moelab and {column} ran different models ({key}: "
                         f"{m['config'][key]} vs {r['config'].get(key)})")
        for key in ("batch", "seq"):
            if m[key] != r[key]:
                sys.exit(f"compare_gpu.sh: {name}: {column} ran a different {key} ({m[key]} vs {r[key]})")
    flops = m["model_flops_per_step"]
    row = {"config": m["config"], "batch": m["batch"], "seq": m["seq"],
           "active_non_embedding_parameters": m["active_non_embedding_parameters"],
           "model_flops_per_step": flops}
    for column, r in runs.items():
        if r is None:
            row[column] = None
            continue
        tflops = flops / r["median_step_seconds"] / 1e12
        row[column] = {"tokens_per_second": r["tokens_per_second"], "median_step_seconds": r["median_step_seconds"],
                       "achieved_tflops": tflops, "fraction_of_peak": tflops / peak}
        if "warmup_seconds" in r:
            row[column]["warmup_seconds"] = r["warmup_seconds"]
    row["ratio_moelab_over_eager"] = m["tokens_per_second"] / p["tokens_per_second"]
    if runs["compile"]:
        row["ratio_moelab_over_compile"] = m["tokens_per_second"] / runs["compile"]["tokens_per_second"]
    if runs["moelab-tf32"] and runs["eager-tf32"]:
        row["ratio_tf32_moelab_over_eager"] = (runs["moelab-tf32"]["tokens_per_second"] /
                                               runs["eager-tf32"]["tokens_per_second"])
    rows[name] = row
first = load(names[0], "eager")
summary = {"gpu": first.get("gpu"), "torch_version": first.get("torch_version"),
           "cuda_version": first.get("cuda_version"), "peak_tflops": peak,
           "precision": "float32 (no TF32) in both engines, except the -tf32 columns", "models": rows}
with open("bench-results/gpu_comparison.json", "w") as f:
    json.dump(summary, f, indent=2)


def cell(row, column):
    r = row[column]
    return f"{r['tokens_per_second']:>10.0f} ({100 * r['fraction_of_peak']:4.1f}%)" if r else f"{'-':>18}"


print(f"\n{summary['gpu'] or 'GPU'}, torch {summary['torch_version']}; tokens/s (% of {peak:g} TFLOPS float32 peak)")
print(f"{'model':<13} {'moelab':>18} {'eager':>18} {'compile':>18} {'x eager':>7} {'x comp':>7} "
      f"{'moelab tf32':>18} {'eager tf32':>18} {'x tf32':>7}")
for name, r in rows.items():
    def ratio(key):
        return f"{r[key]:>7.2f}" if key in r else f"{'-':>7}"
    print(f"{name:<13} {cell(r, 'moelab')} {cell(r, 'eager')} {cell(r, 'compile')} {ratio('ratio_moelab_over_eager')} "
          f"{ratio('ratio_moelab_over_compile')} {cell(r, 'moelab-tf32')} {cell(r, 'eager-tf32')} "
          f"{ratio('ratio_tf32_moelab_over_eager')}")
print("-> bench-results/gpu_comparison.json")
PY
