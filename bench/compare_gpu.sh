#!/usr/bin/env bash
# bench/compare_gpu.sh — one training step on one GPU, moelab against the strongest PyTorch we can
# write, for the three benchmark models at the GPU scale (d 512, 8 layers, 8 heads, sequence 256,
# batch 64, vocabulary 64: train_step_bench --preset gpu):
#   dense           FFN width f = d
#   moe-8e-top2     8 experts of width d, top-2 (Mixtral gates)
#   moe-64e-top2    64 experts of width d, top-2
# PyTorch runs bench/pytorch/tuned_model.py (fused qkv, rotary tables built once, SDPA with
# is_causal, F.rms_norm, AdamW fused: bench/pytorch/train_step.py). Columns, each a name:
#   moelab          moelab, float32 (TF32 off)                                  [required]
#   moelab-tf32     moelab --precision tf32: every float32 product on the TF32 tensor cores
#                   (cuBLAS's TF32 mode, the grouped expert products' tensor-core tile)
#   moelab-tf32x3   moelab --precision tf32x3: the expert products on the tensor cores at float32
#                   accuracy (three TF32 products each), the dense ones full float32: a float32 column
#   moelab-bf16     moelab --precision bf16 (autograd/precision.h)
#   eager, compile  PyTorch float32 (TF32 off), eager / torch.compile; on the MoE models these are
#                   the padded-bmm MoE (sorted, padded to the largest load, read once per layer)
#   eager-loop, compile-loop   the MoE models with the Hugging Face style loop (a host wait per
#                   expert): the usual MoE code, labelled as such
#   eager-tf32      PyTorch eager with TF32 (padded-bmm on the MoE models)
#   eager-bf16, compile-bf16   PyTorch under bf16 autocast; on the MoE models the experts run as
#                   torch._grouped_mm in bfloat16 (PyTorch 2.8 and later; missing elsewhere)
# Every column but moelab may fail (an old torch, a compile error): it is then reported missing.
# The summary gives, per model, moelab's float32 step over the strongest float32 PyTorch column
# (the target: >= 1.0) and the strongest bf16 PyTorch column over moelab's float32 and bf16 steps
# (the gap to close). Writes bench-results/gpu_<model>_<column>.json per run and
# bench-results/gpu_comparison.json; prints a table.
#
#   bench/compare_gpu.sh [options for every program...]      e.g. --steps 50, --vocab 32768
# Environment:
#   MOELAB_BUILD   a build folder configured with CUDA (default build/; cmake -DMOELAB_CUDA=ON)
#   PYTHON         a Python whose torch has CUDA (default python3; Debian's python3-torch has none)
#   COLUMNS_RUN    the columns to run, space-separated (default: all of the above, in that order;
#                  31 runs in all, about 16 minutes with compiles on an H100: choose fewer for a
#                  short loan, e.g. "moelab eager compile eager-bf16")
#   MODELS         the models to run (default: dense moe-8e-top2 moe-64e-top2)
#   PEAK_TFLOPS, PEAK_TF32, PEAK_BF16   the GPU's peaks for the fractions (defaults 67, 495 and 990:
#                  H100 SXM / H200 dense figures; H100 PCIe: 51, 378, 756)
#   RUN_TIMEOUT    seconds allowed to each run (default 300)
#   COMPILE_TIMEOUT  seconds allowed to each torch.compile run, compiling included (default 300)
#   SUMMARY_ONLY=1 runs nothing: the summary of the JSON files already in bench-results/ (a run
#                  cut short by a time limit keeps the files of the runs that finished)
# Model FLOPs per step (the same count for every column, from moelab's JSON): batch * seq *
# (6 * (active non-embedding parameters + vocab * d) + 12 * layers * seq * d); see
# bench/train_step_bench.cpp. Run it on an otherwise idle GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MOELAB_BUILD:-build}
python=${PYTHON:-python3}
peak=${PEAK_TFLOPS:-67}
peak_tf32=${PEAK_TF32:-495}
peak_bf16=${PEAK_BF16:-990}
run_timeout=${RUN_TIMEOUT:-300}
compile_timeout=${COMPILE_TIMEOUT:-300}
all_columns=(moelab moelab-tf32 moelab-tf32x3 moelab-bf16 eager compile eager-loop compile-loop eager-tf32 eager-bf16 compile-bf16)
read -r -a columns <<< "${COLUMNS_RUN:-${all_columns[*]}}"
read -r -a names <<< "${MODELS:-dense moe-8e-top2 moe-64e-top2}"
extra=("$@")
if [[ ! -x "$build/train_step_bench" ]]; then
  echo "compare_gpu.sh: $build/train_step_bench not found (build with -DMOELAB_CUDA=ON, or set MOELAB_BUILD)" >&2
  exit 2
fi
for column in "${columns[@]}"; do
  [[ " ${all_columns[*]} " == *" $column "* ]] || { echo "compare_gpu.sh: unknown column '$column' (COLUMNS_RUN)" >&2; exit 2; }
done
[[ " ${columns[*]} " == *" moelab "* ]] || { echo "compare_gpu.sh: COLUMNS_RUN must include moelab" >&2; exit 2; }
mkdir -p bench-results
[[ ${SUMMARY_ONLY:-0} == 1 ]] && names_run=() || { rm -f bench-results/gpu_*.json; names_run=("${names[@]}"); }

declare -A model_args=([dense]="" [moe-8e-top2]="--experts 8 --k 2" [moe-64e-top2]="--experts 64 --k 2")
# column_command COLUMN IS_MOE: the program and options of one column (empty: not for this model)
column_command() {
  local column=$1 moe=$2 py=("$python" bench/pytorch/train_step.py)
  case $column in
    moelab) echo "$build/train_step_bench --peak-tflops $peak" ;;
    moelab-tf32) echo "$build/train_step_bench --precision tf32 --peak-tflops $peak_tf32" ;;
    moelab-tf32x3) echo "$build/train_step_bench --precision tf32x3 --peak-tflops $peak" ;;
    moelab-bf16) echo "$build/train_step_bench --precision bf16 --peak-tflops $peak_bf16" ;;
    eager) echo "${py[*]} --moe padded-bmm" ;;
    compile) echo "${py[*]} --moe padded-bmm --compile" ;;
    eager-loop) [[ $moe == 1 ]] && echo "${py[*]} --moe loop" ;;
    compile-loop) [[ $moe == 1 ]] && echo "${py[*]} --moe loop --compile" ;;
    eager-tf32) echo "${py[*]} --moe padded-bmm --precision tf32" ;;
    eager-bf16) echo "${py[*]} --moe grouped-mm --precision bf16" ;;
    compile-bf16) echo "${py[*]} --moe grouped-mm --precision bf16 --compile" ;;
  esac
  return 0
}
for name in ${names_run[@]+"${names_run[@]}"}; do
  [[ -v "model_args[$name]" ]] || { echo "compare_gpu.sh: unknown model '$name' (MODELS)" >&2; exit 2; }
  read -r -a model <<< "${model_args[$name]}"
  moe=0; [[ ${#model[@]} -gt 0 ]] && moe=1
  common=(--device cuda --preset gpu ${model[@]+"${model[@]}"} ${extra[@]+"${extra[@]}"})
  echo "== $name"
  for column in "${columns[@]}"; do
    read -r -a command <<< "$(column_command "$column" "$moe")"
    [[ ${#command[@]} -gt 0 ]] || continue
    limit=$run_timeout
    [[ $column == compile* ]] && limit=$compile_timeout
    if ! timeout "$limit" "${command[@]}" "${common[@]}" --out "bench-results/gpu_${name}_${column}.json"; then
      echo "compare_gpu.sh: $name, column $column failed or passed ${limit} s" >&2
      [[ $column == moelab ]] && exit 1
    fi
  done
done

"$python" - "$peak" "$peak_tf32" "$peak_bf16" "${columns[*]}" "${names[@]}" <<'PY'
import json, os, sys

peaks = {"fp32": float(sys.argv[1]), "tf32": float(sys.argv[2]), "bf16": float(sys.argv[3])}
columns = sys.argv[4].split()
names = sys.argv[5:]


def load(name, column):
    path = f"bench-results/gpu_{name}_{column}.json"
    return json.load(open(path)) if os.path.exists(path) else None


def precision(column):
    # moelab-tf32x3 is float32 in accuracy: held to float32's peak, not one of the tf32 columns
    return "tf32" if column.endswith("tf32") else "bf16" if column.endswith("bf16") else "fp32"


rows = {}
for name in list(names):
    runs = {c: load(name, c) for c in columns}
    m = runs["moelab"]
    if m is None:  # SUMMARY_ONLY after a cut run: a model whose moelab run did not finish
        print(f"compare_gpu.sh: {name}: no moelab run, left out", file=sys.stderr)
        names.remove(name)
        continue
    # Every run must have trained the same model, or the ratios mean nothing.
    keys = ("vocab", "d", "heads", "layers", "experts") + (("k",) if m["config"]["experts"] > 0 else ())
    for column, r in runs.items():
        if r is None or column == "moelab":
            continue
        for key in keys:
            if m["config"][key] != r["config"].get(key, 0):
                sys.exit(f"compare_gpu.sh: {name}: moelab and {column} ran different models ({key}: "
                         f"{m['config'][key]} vs {r['config'].get(key)})")
        for key in ("batch", "seq"):
            if m[key] != r[key]:
                sys.exit(f"compare_gpu.sh: {name}: {column} ran a different {key} ({m[key]} vs {r[key]})")
    flops = m["model_flops_per_step"]
    row = {"config": m["config"], "batch": m["batch"], "seq": m["seq"],
           "active_non_embedding_parameters": m["active_non_embedding_parameters"],
           "model_flops_per_step": flops, "columns": {}}
    for column, r in runs.items():
        if r is None:
            row["columns"][column] = None
            continue
        tflops = flops / r["median_step_seconds"] / 1e12
        cell = {"precision": precision(column), "tokens_per_second": r["tokens_per_second"],
                "median_step_seconds": r["median_step_seconds"], "achieved_tflops": tflops,
                "peak_tflops": peaks[precision(column)], "fraction_of_peak": tflops / peaks[precision(column)]}
        for key in ("warmup_seconds", "moe", "attention", "optimizer", "peak_memory_bytes"):
            if key in r:
                cell[key] = r[key]
        row["columns"][column] = cell

    if row["columns"].get("moelab-tf32x3"):
        row["ratio_moelab_tf32x3_over_moelab_fp32"] = (
            row["columns"]["moelab-tf32x3"]["tokens_per_second"] / m["tokens_per_second"])

    def strongest(prec):
        found = [(c, v) for c, v in row["columns"].items()
                 if v and not c.startswith("moelab") and v["precision"] == prec]
        return max(found, key=lambda cv: cv[1]["tokens_per_second"]) if found else (None, None)

    best32, best32_cell = strongest("fp32")
    best16, best16_cell = strongest("bf16")
    row["strongest_pytorch_fp32"] = best32
    row["strongest_pytorch_bf16"] = best16
    if best32:
        row["ratio_moelab_fp32_over_strongest_pytorch_fp32"] = m["tokens_per_second"] / best32_cell["tokens_per_second"]
    if best16:
        row["gap_strongest_pytorch_bf16_over_moelab_fp32"] = best16_cell["tokens_per_second"] / m["tokens_per_second"]
        if row["columns"].get("moelab-bf16"):
            row["gap_strongest_pytorch_bf16_over_moelab_bf16"] = (
                best16_cell["tokens_per_second"] / row["columns"]["moelab-bf16"]["tokens_per_second"])
    rows[name] = row

first = next((r for n in names for c in columns if not c.startswith("moelab") and (r := load(n, c))), {})
summary = {"gpu": first.get("gpu"), "torch_version": first.get("torch_version"),
           "cuda_version": first.get("cuda_version"), "peaks_tflops": peaks, "columns": columns,
           "pytorch_model": "bench/pytorch/tuned_model.py", "models": rows}
with open("bench-results/gpu_comparison.json", "w") as f:
    json.dump(summary, f, indent=2)

print(f"\n{summary['gpu'] or 'GPU'}, torch {summary['torch_version']}; tokens/s (% of the column's precision's peak: "
      f"fp32 {peaks['fp32']:g}, tf32 {peaks['tf32']:g}, bf16 {peaks['bf16']:g} TFLOPS)")
print(f"{'column':<14}" + "".join(f"{n:>22}" for n in names))
for column in columns:
    cells = []
    for n in names:
        c = rows[n]["columns"].get(column)
        cells.append(f"{c['tokens_per_second']:>13.0f} ({100 * c['fraction_of_peak']:4.1f}%)" if c else f"{'-':>22}")
    print(f"{column:<14}" + "".join(cells))


def line(label, key, fmt="{:.2f}"):
    cells = [(fmt.format(rows[n][key]) if key in rows[n] else "-") for n in names]
    print(f"{label:<14}" + "".join(f"{c:>22}" for c in cells))


print(f"{'strongest fp32':<14}" + "".join(f"{rows[n]['strongest_pytorch_fp32'] or '-':>22}" for n in names))
line("moelab / it", "ratio_moelab_fp32_over_strongest_pytorch_fp32")
print(f"{'strongest bf16':<14}" + "".join(f"{rows[n]['strongest_pytorch_bf16'] or '-':>22}" for n in names))
line("it / moelab", "gap_strongest_pytorch_bf16_over_moelab_fp32")
line("it / m. bf16", "gap_strongest_pytorch_bf16_over_moelab_bf16")
line("tf32x3 / fp32", "ratio_moelab_tf32x3_over_moelab_fp32")
print("-> bench-results/gpu_comparison.json (target: moelab / strongest fp32 >= 1.0 on every model)")
PY
