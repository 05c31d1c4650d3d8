#!/usr/bin/env bash
# bench/compare_train_step.sh — the dense-decoder training step in moelab and in PyTorch eager,
# same model, same threads; prints both tokens/s and their ratio.
#   bench/compare_train_step.sh [threads]      (run after ./test.sh or a build into build/)
# Needs Debian's python3-torch and libopenblas0-pthread (PyTorch's BLAS; without it the
# comparison is meaningless).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
mkdir -p bench-results
build/train_step_bench --threads "$threads" --out bench-results/train_step_moelab.json
/usr/bin/python3 bench/pytorch/train_step.py --threads "$threads" --out bench-results/train_step_pytorch.json
/usr/bin/python3 - <<'PY'
import json
m = json.load(open("bench-results/train_step_moelab.json"))
p = json.load(open("bench-results/train_step_pytorch.json"))
ratio = m["tokens_per_second"] / p["tokens_per_second"]
json.dump({"moelab_tokens_per_second": m["tokens_per_second"], "pytorch_tokens_per_second": p["tokens_per_second"],
           "ratio_moelab_over_pytorch": ratio, "threads": m["threads"]},
          open("bench-results/train_step_comparison.json", "w"), indent=2)
print(f"moelab {m['tokens_per_second']:.0f} tokens/s, pytorch {p['tokens_per_second']:.0f} tokens/s, "
      f"ratio {ratio:.2f} -> bench-results/train_step_comparison.json")
PY
