#!/usr/bin/env bash
# scripts/reproduce.sh — run a recorded experiment again and compare the new results with the record.
#
#   scripts/reproduce.sh FOLDER [--moelab PATH] [--out DIR] [--atol X] [--threads N]
#
# FOLDER is a run folder with a config.json, e.g. docs/results/phonebook-demo. The script reruns the
# command that config.json names (with `moelab` replaced by PATH, default build/moelab; its --out
# replaced by DIR, default a fresh temporary folder; a `--set mode=...` or `--set point=...` left out,
# so that every job of the grid runs in this one process), then compares the two folders with
# scripts/compare_results.py: every .csv file, cell by cell, leaving out the columns that measure
# time.
#
# What to expect (README, "CPUs, instruction sets and determinism"):
#   - the same commit (config.json's "commit", without "+dirty"), the same GEMM kernels ("kernels",
#     e.g. "avx512") and the same build ("build": compiler, Eigen version, build type and flags):
#     every cell bitwise equal, whatever the CPU's maker or model (no approximation instruction is
#     reached, so an AMD and an Intel CPU compute the same bits). The script then requires that,
#     and exits 1 on any difference. A record from before "kernels" and "build" were written is
#     held to it only on a CPU of the same name (its "cpu" field).
#   - another commit, kernels or build: the last bits of the floats differ, training runs drift
#     apart, and a cell at the edge of a model's capacity can move by several points. The script
#     then prints the differences and both verdicts, and checks only that the same files, rows and
#     columns come out, unless --atol X asks for every numeric cell within X.
# It prints which of the two promises it checked, and why.
# Exit status: 0 as described, 1 on a difference that counts, 2 for bad arguments or a failed run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
folder="" moelab="$root/build/moelab" out="" atol="" threads=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --moelab) moelab=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --atol) atol=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -*) echo "reproduce.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$folder" ] || { echo "reproduce.sh: one FOLDER only" >&2; exit 2; }; folder=$1; shift ;;
  esac
done
[ -n "$folder" ] || { usage >&2; exit 2; }
[ -f "$folder/config.json" ] || { echo "reproduce.sh: $folder/config.json not found" >&2; exit 2; }
[ -x "$moelab" ] || { echo "reproduce.sh: $moelab is not an executable (build first, or pass --moelab)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "reproduce.sh: needs python3" >&2; exit 2; }
if [ -z "$out" ]; then
  out=$(mktemp -d)  # a fresh folder under $TMPDIR (or /tmp)
fi
out=$(realpath -m "$out") moelab=$(realpath "$moelab")

# The command to run, as one argument per line (python's shlex does the quoting right).
mapfile -t args < <(python3 - "$folder/config.json" "$moelab" "$out" "$threads" <<'EOF'
import json, shlex, sys
config, moelab, out, threads = sys.argv[1:5]
words = shlex.split(json.load(open(config))["command"])
if not words or words[0] != "moelab":
    sys.exit("reproduce.sh: config.json's command does not start with moelab: %r" % words)
kept, i = [moelab], 1
while i < len(words):
    w = words[i]
    if w == "--out":
        i += 2; continue
    if w == "--threads" and threads:
        i += 2; continue
    if w == "--set" and i + 1 < len(words) and words[i + 1].split("=")[0] in ("mode", "point"):
        i += 2; continue
    kept.append(w); i += 1
kept += ["--out", out] + (["--threads", threads] if threads else [])
print("\n".join(kept))
EOF
)
[ ${#args[@]} -gt 0 ] || exit 2

field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]) or "")' "$1" "$2"; }
echo "reproduce: ${args[*]}" >&2
# Data files named relative to the repository (data/mnist) resolve from its root.
(cd "$root" && "${args[@]}") || { echo "reproduce.sh: the run failed" >&2; exit 2; }

recorded_commit=$(field "$folder/config.json" commit) rerun_commit=$(field "$out/config.json" commit)
recorded_cpu=$(field "$folder/config.json" cpu) rerun_cpu=$(field "$out/config.json" cpu)
echo "recorded: commit ${recorded_commit:-not recorded}, cpu ${recorded_cpu:-not recorded}"
echo "rerun:    commit ${rerun_commit:-unknown}, cpu ${rerun_cpu:-unknown}, folder $out"
# A folder's class, two lines: its kernels, and its build as one JSON line ("" when not recorded).
class_of() {
  python3 - "$1" <<'EOF'
import json, re, sys
c = json.load(open(sys.argv[1]))
kernels = c.get("kernels") or ""
if not kernels:
    m = re.search(r"\(([a-z0-9]+)\)\s*$", c.get("cpu") or "")
    kernels = m.group(1) if m else ""
build = c.get("build")
print(kernels)
print(json.dumps(build, sort_keys=True) if isinstance(build, dict) else "")
EOF
}
mapfile -t recorded_class < <(class_of "$folder/config.json")
mapfile -t rerun_class < <(class_of "$out/config.json")
same_commit=0
if [ -n "$recorded_commit" ] && [ "$recorded_commit" = "${recorded_commit%+dirty}" ] &&
   [ "$recorded_commit" = "$rerun_commit" ]; then
  same_commit=1
fi
if [ "$same_commit" = 1 ] && [ -n "${recorded_class[0]}" ] && [ -n "${recorded_class[1]}" ] &&
   [ "${recorded_class[0]}" = "${rerun_class[0]}" ] && [ "${recorded_class[1]}" = "${rerun_class[1]}" ]; then
  echo "promise checked: same commit, same kernels (${recorded_class[0]}) and same build" \
       "(${recorded_class[1]}): every cell must be bitwise equal, on any CPU"
  exec python3 "$root/scripts/compare_results.py" "$folder" "$out" --require-bitwise
fi
if [ "$same_commit" = 1 ] && [ -z "${recorded_class[1]}" ] && [ -n "$recorded_cpu" ] && [ "$recorded_cpu" = "$rerun_cpu" ]; then
  echo "promise checked: same commit and the same CPU and kernels (a record without its build): every cell" \
       "must be bitwise equal"
  exec python3 "$root/scripts/compare_results.py" "$folder" "$out" --require-bitwise
fi
why="another commit (or a +dirty tree)"
if [ "$same_commit" = 1 ]; then
  if [ -z "${recorded_class[1]}" ]; then why="a record without its build, from another CPU"
  elif [ "${recorded_class[0]}" != "${rerun_class[0]}" ]; then why="other kernels (${recorded_class[0]} there, ${rerun_class[0]} here)"
  else why="another build (${recorded_class[1]} there, ${rerun_class[1]} here)"; fi
fi
echo "promise checked: none bitwise ($why): not expected to be bitwise equal;" \
     "${atol:+every numeric cell must be within $atol}${atol:-only the files, rows and columns are checked}"
exec python3 "$root/scripts/compare_results.py" "$folder" "$out" --atol "${atol:-inf}"
