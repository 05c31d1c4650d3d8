#!/usr/bin/env bash
# tests/reproduce_check.sh — scripts/reproduce.sh and scripts/compare_results.py do what the README
# promises: a recorded run, run again from its config.json by the same binary, comes out bitwise
# equal (every non-timing cell of every .csv), and a changed cell is caught. Uses the softmoe-l2norm
# toy preset (seconds). Run by ctest as reproduce_recorded_run:
#   bash tests/reproduce_check.sh build/moelab
# Exit 77 (ctest: skipped) without python3, which the scripts need.
set -u
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
root=$(cd "$(dirname "$0")/.." && pwd)
moelab=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$moelab" softmoe-l2norm --preset toy --threads 1 --out "$work/recorded" >/dev/null || fail "the recorded run failed"
# The rerun goes through the script (the command from config.json, another folder, 2 threads: the
# README promises the same bits whatever the thread count).
bash "$root/scripts/reproduce.sh" "$work/recorded" --moelab "$moelab" --out "$work/rerun" --threads 2 \
  >"$work/log" 2>&1 || { cat "$work/log"; fail "reproduce.sh exited $?"; }
grep -q "results.csv: bitwise" "$work/log" || { cat "$work/log"; fail "results.csv is not bitwise equal"; }
# Bitwise whatever the commit says (a dirty working tree makes reproduce.sh only check structure).
python3 "$root/scripts/compare_results.py" "$work/recorded" "$work/rerun" --require-bitwise --quiet \
  || fail "compare_results.py --require-bitwise on two runs of the same command"

# A cell changed in the last digit is a difference; a timing column is not.
cp -r "$work/rerun" "$work/changed"
python3 - "$work/changed/results.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
col = rows[0].index("final_loss")
rows[1][col] = repr(float(rows[1][col]) * (1 + 1e-6))
rows[1][rows[0].index("seconds")] = "12345"
csv.writer(open(sys.argv[1], "w", newline="")).writerows(rows)
PY
python3 "$root/scripts/compare_results.py" "$work/recorded" "$work/changed" --require-bitwise --quiet >"$work/log2" \
  && fail "a changed final_loss passed --require-bitwise"
grep -q "final_loss" "$work/log2" || fail "the difference report does not name final_loss"
grep -q "seconds" "$work/log2" && fail "the timing column seconds was compared"
python3 "$root/scripts/compare_results.py" "$work/recorded" "$work/changed" --atol 1 --quiet >/dev/null \
  || fail "a difference of 1e-6 relative failed --atol 1"
echo "reproduce checks passed"
