#!/usr/bin/env bash
# bench/compare_train_step_rounds.sh — moelab's training step against PyTorch eager in alternating
# rounds, for a machine whose speed drifts (shared cores): each round runs moelab, then PyTorch in
# each thread setting that uses at most `threads` cores; the report is each one's median tokens/s
# over the rounds and the ratio of medians against PyTorch's best setting.
#   bench/compare_train_step_rounds.sh ROUNDS THREADS NAME [model options...]
#   e.g. bench/compare_train_step_rounds.sh 5 1 moe8 --experts 8 --k 2
# Writes bench-results/rounds_<NAME>_t<THREADS>.json. MOELAB_BUILD=<folder> picks the build (build/);
# MOELAB_BASE_BUILD=<folder> adds a second moelab build to every round (a before/after comparison).
#
# PyTorch settings (see compare_train_step.sh for why): `omp` = torch threads = THREADS with a
# single-threaded OpenBLAS; `blas` = one torch thread with OPENBLAS_NUM_THREADS = THREADS. At one
# thread the two are the same and only `omp` runs. PyTorch's untouched default (OpenBLAS on every
# core) is left out: at THREADS = 1 it uses more cores than moelab is given. PyTorch runs
# bench/pytorch/tuned_model.py; with --experts, its MoE runs both ways (padded-bmm: omp, blas; the
# loop: omp-loop, blas-loop) and the best setting of the four counts.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 threads=$2 name=$3
shift 3
model=("$@")
build=${MOELAB_BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench-results
py=bench/pytorch/train_step.py
moe_kinds=(padded-bmm)
[[ " ${model[*]} " == *" --experts "* ]] && moe_kinds=(padded-bmm loop)
for ((r = 0; r < rounds; ++r)); do
  "$build"/train_step_bench --threads "$threads" "${model[@]}" --out "$tmp/moelab_$r.json" > /dev/null
  if [[ -n "${MOELAB_BASE_BUILD:-}" ]]; then
    "$MOELAB_BASE_BUILD"/train_step_bench --threads "$threads" "${model[@]}" --out "$tmp/base_$r.json" > /dev/null
  fi
  for moe in "${moe_kinds[@]}"; do
    suffix=$([[ $moe == padded-bmm ]] && echo "" || echo "-$moe")
    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 $py --threads "$threads" --moe "$moe" "${model[@]}" \
      --out "$tmp/omp${suffix}_$r.json" > /dev/null
    if ((threads > 1)); then
      OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 $py --threads 1 --moe "$moe" "${model[@]}" \
        --out "$tmp/blas${suffix}_$r.json" > /dev/null
    fi
  done
done
/usr/bin/python3 - "$tmp" "$rounds" "$threads" "$name" "${model[*]:-}" <<'PY'
import glob, json, os, statistics, sys, time
tmp, rounds, threads, name, model = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
runs = {}
for kind in ("moelab", "base", "omp", "blas", "omp-loop", "blas-loop"):
    files = sorted(glob.glob(os.path.join(tmp, f"{kind}_*.json")))
    if files:
        runs[kind] = [json.load(open(f)) for f in files]
med = {k: statistics.median(r["tokens_per_second"] for r in v) for k, v in runs.items()}
best = max((k for k in ("omp", "blas", "omp-loop", "blas-loop") if k in med), key=lambda k: med[k])
m = runs["moelab"][0]
report = {"name": name, "threads": threads, "rounds": rounds, "model_options": model,
          "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpu": m["cpu"],
          "median_tokens_per_second": med, "tokens_per_second_by_round": {k: [r["tokens_per_second"] for r in v] for k, v in runs.items()},
          "pytorch_best": best, "ratio_moelab_over_best_pytorch": med["moelab"] / med[best],
          "moelab_model_flops_per_step": m["model_flops_per_step"],
          "moelab_gflops_at_median": med["moelab"] / (m["batch"] * m["seq"]) * m["model_flops_per_step"] / 1e9}
if "base" in med:
    report["ratio_moelab_over_base"] = med["moelab"] / med["base"]
out = f"bench-results/rounds_{name}_t{threads}.json"
json.dump(report, open(out, "w"), indent=2)
extra = f"; base {med['base']:.0f} (x{report['ratio_moelab_over_base']:.2f})" if "base" in med else ""
print(f"{name} t{threads}: moelab {med['moelab']:.0f} tokens/s ({report['moelab_gflops_at_median']:.1f} GFLOP/s), "
      f"pytorch best ({best}) {med[best]:.0f}; ratio {report['ratio_moelab_over_best_pytorch']:.2f}{extra} -> {out}")
PY
