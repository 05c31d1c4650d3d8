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
# One ulp is a difference too: every float cell reads back to the bits it was printed from (the
# engine prints the shortest round-trip form), so a last-bit change cannot hide behind rounding.
cp -r "$work/rerun" "$work/ulp"
python3 - "$work/ulp/results.csv" <<'PY' || fail "final_loss is not printed with enough digits to read back"
import csv, math, sys
rows = list(csv.reader(open(sys.argv[1])))
col = rows[0].index("final_loss")
x = float(rows[1][col])
if len(rows[1][col].replace("-", "").replace(".", "").lstrip("0")) <= 6:
    sys.exit("final_loss printed with 6 digits or fewer: %s" % rows[1][col])
rows[1][col] = repr(math.nextafter(x, math.inf))
csv.writer(open(sys.argv[1], "w", newline="")).writerows(rows)
PY
python3 "$root/scripts/compare_results.py" "$work/recorded" "$work/ulp" --require-bitwise --quiet >/dev/null \
  && fail "a final_loss one ulp away passed --require-bitwise"

# Which promise reproduce.sh holds a record to: config.json names the kernels and the build.
python3 - "$work/recorded/config.json" <<'PY' || fail "config.json lacks the kernels or the build"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["kernels"] in ("generic", "avx2", "avx512"), c.get("kernels")
for key in ("compiler", "eigen", "type", "flags"):
    assert c["build"][key] and c["build"][key] != "unknown", key
assert "EIGEN_FAST_MATH=0" in c["build"]["flags"], c["build"]["flags"]
PY
commit=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["commit"])' "$work/recorded/config.json")
case "$commit" in
  *+dirty|unknown)
    grep -q "promise checked: none bitwise (another commit" "$work/log" ||
      { cat "$work/log"; fail "a dirty tree's rerun did not say that no bitwise promise applies"; } ;;
  *)
    # A clean commit: a record made on a CPU of another maker, with the same kernels and build,
    # must still come out bitwise (only the CPU's name differs) ...
    grep -q "promise checked: same commit, same kernels" "$work/log" ||
      { cat "$work/log"; fail "the same commit, kernels and build were not held to bitwise equality"; }
    cp -r "$work/recorded" "$work/other_cpu"
    python3 - "$work/other_cpu/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cpu"] = "Some Other Vendor CPU (%s)" % c["kernels"]
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
    bash "$root/scripts/reproduce.sh" "$work/other_cpu" --moelab "$moelab" --out "$work/rerun2" >"$work/log3" 2>&1 ||
      { cat "$work/log3"; fail "reproduce.sh on a record from another CPU exited $?"; }
    grep -q "promise checked: same commit, same kernels" "$work/log3" ||
      { cat "$work/log3"; fail "a record from another CPU with the same kernels and build was not held to bitwise"; }
    # ... and one made by another build is not held to it, and says why.
    cp -r "$work/recorded" "$work/other_build"
    python3 - "$work/other_build/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["build"]["flags"] += " -ffast-math"
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
    bash "$root/scripts/reproduce.sh" "$work/other_build" --moelab "$moelab" --out "$work/rerun3" >"$work/log4" 2>&1 ||
      { cat "$work/log4"; fail "reproduce.sh on a record of another build exited $?"; }
    grep -q "promise checked: none bitwise (another build" "$work/log4" ||
      { cat "$work/log4"; fail "a record of another build was held to bitwise equality"; } ;;
esac
echo "reproduce checks passed"
