#!/usr/bin/env bash
# bench/compare_softmoe_rounds.sh — Soft MoE training time, the two figures issue 14 asks for, in
# alternating rounds (a shared VM's speed drifts, so each round runs every contender once):
#   1. n = 8 experts, 1,000 Adam steps of 256 Fashion-MNIST images, one thread: moelab's
#      `softmoe-mnist` (mode=train: training plus one test-set evaluation, its points/*.json
#      `seconds`) against bench/pytorch/softmoe_mnist_check.py (the same layer and recipe in
#      PyTorch 1.13 eager; training only, timed by the script). Target: moelab >= 1.5x faster.
#   2. n = 128 against n = 16, 600 steps on the MNIST digits (data/mnist: scripts/get-mnist.sh),
#      moelab only, one thread. Target: n = 128 within 2x of n = 16 per step.
#   bench/compare_softmoe_rounds.sh ROUNDS
# Writes bench-results/softmoe_rounds.json (every round's seconds, the medians and the ratios).
# MOELAB_BUILD=<folder> picks the build (build/). Wants an idle machine (docs/results/bench.md says why).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?usage: bench/compare_softmoe_rounds.sh ROUNDS}
build=${MOELAB_BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench-results

# record NAME SECONDS: appends one figure; an empty one (a run that failed to report) stops here.
record() {
  [[ -n "$2" ]] || { echo "compare_softmoe_rounds.sh: no time for $1 in round $r" >&2; exit 1; }
  echo "$1 $2" >> "$tmp/moelab.txt"
}
# moelab_seconds OUT_DIR POINT: the `seconds` a trained point recorded.
moelab_seconds() {
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["row"]["seconds"])' "$1/points/$2.json"
}
common=(--set seeds=0 --set mode=train --set eval_every=100000 --threads 1)
for ((r = 0; r < rounds; ++r)); do
  rm -rf "$tmp"/run_*
  "$build"/moelab softmoe-mnist "${common[@]}" --set dataset=fashion-mnist --set experts=8 --set steps=1000 \
    --set table1_experts=8 --set timing_experts=8 --out "$tmp/run_n8" > /dev/null
  record n8 "$(moelab_seconds "$tmp/run_n8" n8-seed0)"
  record pytorch_n8 "$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/pytorch/softmoe_mnist_check.py --experts 8 \
    --steps 1000 --threads 1 --train-only | sed -n 's/^n = 8: 1000 steps in \([0-9.]*\) s.*/\1/p')"
  "$build"/moelab softmoe-mnist "${common[@]}" --set dataset=mnist --set experts=16,128 --set steps=600 \
    --set table1_experts=16 --set timing_experts=16 --out "$tmp/run_mnist" > /dev/null
  record n16 "$(moelab_seconds "$tmp/run_mnist" n16-seed0)"
  record n128 "$(moelab_seconds "$tmp/run_mnist" n128-seed0)"
done
/usr/bin/python3 - "$tmp/moelab.txt" "$rounds" <<'PY'
import collections, json, statistics, sys, time
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, seconds = line.split()
    runs[name].append(float(seconds))
med = {k: statistics.median(v) for k, v in runs.items()}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
report = {"rounds": int(sys.argv[2]), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpu": cpu,
          "seconds_by_round": runs, "median_seconds": med,
          "n8_pytorch_over_moelab": med["pytorch_n8"] / med["n8"],
          "n8_ratio_by_round": [p / m for p, m in zip(runs["pytorch_n8"], runs["n8"])],
          "n128_over_n16": med["n128"] / med["n16"],
          "n128_over_n16_by_round": [b / a for a, b in zip(runs["n16"], runs["n128"])]}
out = "bench-results/softmoe_rounds.json"
json.dump(report, open(out, "w"), indent=2)
print(f"Soft MoE n = 8, 1000 steps: moelab {med['n8']:.2f} s, PyTorch {med['pytorch_n8']:.2f} s: "
      f"{report['n8_pytorch_over_moelab']:.2f}x (target 1.5x); n = 128 / n = 16 per 600 steps: "
      f"{med['n128']:.2f} / {med['n16']:.2f} s = {report['n128_over_n16']:.2f}x (target <= 2x) -> {out}")
PY
