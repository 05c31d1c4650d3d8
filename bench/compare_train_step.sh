#!/usr/bin/env bash
# bench/compare_train_step.sh — the decoder training step in moelab and in PyTorch eager (the
# tuned definition, bench/pytorch/tuned_model.py), same model, same number of cores; prints
# tokens/s and their ratio. Options after the thread count go to both programs: model sizes,
# --experts/--k, --precision bf16 (moelab's policy against PyTorch's CPU autocast).
#   bench/compare_train_step.sh [threads] [model options...]   (after ./test.sh or a build into build/;
#   MOELAB_BUILD=<folder> uses another build folder)
#   e.g. bench/compare_train_step.sh 2 --experts 8 --k 2; bench/compare_train_step.sh 2 --experts 64 --k 2 --d 64
# Needs Debian's python3-torch and libopenblas0-pthread (PyTorch's BLAS; without it the
# comparison is meaningless). Run it on an idle machine.
#
# Debian's PyTorch runs its own OpenMP threads and calls OpenBLAS, which starts its own pthreads:
# left at their defaults the two oversubscribe the cores (on 2 cores: ~7,500 tokens/s against
# ~19,000 when only one of them is threaded). So PyTorch is run three ways and its best counts:
# default, torch threads with a single-threaded BLAS, one torch thread with a threaded BLAS. The
# default's OpenBLAS is held to `threads` threads too (its own default is every core, so with
# threads 1 it used to run its products on two cores: user time above the wall time, 12,236 tokens/s
# against 9,301 held to one); with threads = the core count that is OpenBLAS's default. With
# --experts, each of the three runs twice, with the loop MoE and with padded-bmm (on a CPU the
# loop's host waits cost nothing, so either can be faster), and the best of the six counts.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
shift || true
model=("$@")   # passed to both programs: --experts, --k, --d, ...
mkdir -p bench-results
${MOELAB_BUILD:-build}/train_step_bench --threads "$threads" "${model[@]}" --out bench-results/train_step_moelab.json
py=bench/pytorch/train_step.py
moe_kinds=(padded-bmm)
[[ " ${model[*]} " == *" --experts "* ]] && moe_kinds=(padded-bmm loop)
runs=()
for moe in "${moe_kinds[@]}"; do
  suffix=$([[ $moe == padded-bmm ]] && echo "" || echo "_$moe")
  OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 $py --threads "$threads" --moe "$moe" "${model[@]}" \
    --out "bench-results/train_step_pytorch_default$suffix.json"
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 $py --threads "$threads" --moe "$moe" "${model[@]}" \
    --out "bench-results/train_step_pytorch_omp$suffix.json"
  OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 $py --threads 1 --moe "$moe" "${model[@]}" \
    --out "bench-results/train_step_pytorch_blas$suffix.json"
  runs+=("default$suffix" "omp$suffix" "blas$suffix")
done
/usr/bin/python3 - "$threads" "${runs[@]}" <<'PY'
import json, sys
m = json.load(open("bench-results/train_step_moelab.json"))
runs = {k: json.load(open(f"bench-results/train_step_pytorch_{k}.json")) for k in sys.argv[2:]}
best = max(runs, key=lambda k: runs[k]["tokens_per_second"])
p = runs[best]["tokens_per_second"]
ratio = m["tokens_per_second"] / p
json.dump({"cores": int(sys.argv[1]), "moelab_tokens_per_second": m["tokens_per_second"],
           "pytorch_tokens_per_second": {k: r["tokens_per_second"] for k, r in runs.items()},
           "pytorch_best": best, "ratio_moelab_over_best_pytorch": ratio},
          open("bench-results/train_step_comparison.json", "w"), indent=2)
every = ", ".join(f"{k} {r['tokens_per_second']:.0f}" for k, r in runs.items())
print(f"moelab {m['tokens_per_second']:.0f} tokens/s; pytorch best ({best}) {p:.0f} tokens/s "
      f"[{every}]; ratio {ratio:.2f} -> bench-results/train_step_comparison.json")
PY
