#!/usr/bin/env bash
# bench/compare_train_step.sh — the dense-decoder training step in moelab and in PyTorch eager,
# same model, same number of cores; prints tokens/s and their ratio.
#   bench/compare_train_step.sh [threads] [model options...]   (after ./test.sh or a build into build/;
#   MOELAB_BUILD=<folder> uses another build folder)
#   e.g. bench/compare_train_step.sh 2 --experts 8 --k 2; bench/compare_train_step.sh 2 --experts 64 --k 2 --d 64
# Needs Debian's python3-torch and libopenblas0-pthread (PyTorch's BLAS; without it the
# comparison is meaningless). Run it on an idle machine.
#
# Debian's PyTorch runs its own OpenMP threads and calls OpenBLAS, which starts its own pthreads:
# left at their defaults the two oversubscribe the cores (on 2 cores: ~7,500 tokens/s against
# ~19,000 when only one of them is threaded). So PyTorch is run three ways and its best counts:
# default, torch threads with a single-threaded BLAS, one torch thread with a threaded BLAS.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
shift || true
model=("$@")   # passed to both programs: --experts, --k, --d, ...
mkdir -p bench-results
${MOELAB_BUILD:-build}/train_step_bench --threads "$threads" "${model[@]}" --out bench-results/train_step_moelab.json
py=bench/pytorch/train_step.py
/usr/bin/python3 $py --threads "$threads" "${model[@]}" --out bench-results/train_step_pytorch_default.json
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 $py --threads "$threads" "${model[@]}" --out bench-results/train_step_pytorch_omp.json
OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 $py --threads 1 "${model[@]}" --out bench-results/train_step_pytorch_blas.json
/usr/bin/python3 - "$threads" <<'PY'
import json, sys
m = json.load(open("bench-results/train_step_moelab.json"))
runs = {k: json.load(open(f"bench-results/train_step_pytorch_{k}.json")) for k in ("default", "omp", "blas")}
best = max(runs, key=lambda k: runs[k]["tokens_per_second"])
p = runs[best]["tokens_per_second"]
ratio = m["tokens_per_second"] / p
json.dump({"cores": int(sys.argv[1]), "moelab_tokens_per_second": m["tokens_per_second"],
           "pytorch_tokens_per_second": {k: r["tokens_per_second"] for k, r in runs.items()},
           "pytorch_best": best, "ratio_moelab_over_best_pytorch": ratio},
          open("bench-results/train_step_comparison.json", "w"), indent=2)
print(f"moelab {m['tokens_per_second']:.0f} tokens/s; pytorch best ({best}) {p:.0f} tokens/s "
      f"[default {runs['default']['tokens_per_second']:.0f}, torch-threads {runs['omp']['tokens_per_second']:.0f}, "
      f"blas-threads {runs['blas']['tokens_per_second']:.0f}]; ratio {ratio:.2f} -> bench-results/train_step_comparison.json")
PY
