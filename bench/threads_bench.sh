#!/usr/bin/env bash
# bench/threads_bench.sh — the default thread count against --threads 1 on an idle and on a busy
# machine: is the default ever much slower than one thread? (core/cpu/thread_count.h says why it
# once was: 2.4x with one busy process on 2 cores, 85x at a load of 4-5.)
#
#   bench/threads_bench.sh [repeats]     (after ./test.sh or a build into build/; MOELAB_BUILD=<folder>
#                                         uses another build folder)
#
# Three workloads, each with --threads $(nproc) ("default") and --threads 1:
#   demo   moelab phonebook, a small sweep (d 16, 4 experts, 300 steps, books of 50 and 100)
#   loop   examples' char_lm: a learner's own training loop, 300 steps of a small decoder
#   step   train_step_bench's cpu preset, 10 timed steps (tokens/s turned into seconds per step)
# in three situations:
#   idle   nothing else running
#   busy   one other process spinning on a core the whole time (a build, a browser, another run)
#   two    two copies of the same command at once (two jobs of a sweep, two users)
# The wall-clock seconds (median of `repeats`, default 3) go to bench-results/threads.csv, with the
# ratio default / one thread per workload and situation; the script prints the table. It changes no
# setting: read the ratios, and README's advice on --threads follows them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MOELAB_BUILD:-build}
repeats=${1:-3}
cores=$(nproc)
mkdir -p bench-results
work=$(mktemp -d)
spinner=""
cleanup() { [ -n "$spinner" ] && kill "$spinner" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# The command of WORKLOAD with THREADS, as one line for bash -c (a fresh --out each time: $1 is a suffix).
command_for() {
  local workload=$1 threads=$2 tag=$3
  case "$workload" in
    demo) echo "$build/moelab phonebook --preset demo --set dense_widths=16 --set moe_widths=16 --set experts=4 \
--set heads=2 --set layers=1 --set book_sizes=50,100 --set steps=300 --set eval_every=300 --set test_names=20 \
--set seeds=0 --threads $threads --out $work/demo-$tag" ;;
    loop) echo "$build/char_lm --steps 300 --d 32 --layers 2 --heads 4 --seq 32 --batch 16 --threads $threads" ;;
    step) echo "$build/train_step_bench --steps 10 --threads $threads --out $work/step-$tag.json" ;;
  esac
}

# Seconds one run of the command takes (wall clock).
seconds_of() {
  local start end
  start=$(date +%s.%N)
  bash -c "$1" >/dev/null 2>&1 || { echo "failed: $1" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One measurement: SITUATION WORKLOAD THREADS -> median seconds.
measure() {
  local situation=$1 workload=$2 threads=$3 times=() r
  for ((r = 0; r < repeats; r++)); do
    if [ "$situation" = two ]; then
      local a b start end
      start=$(date +%s.%N)
      bash -c "$(command_for "$workload" "$threads" "a$r$threads")" >/dev/null 2>&1 &
      a=$!
      bash -c "$(command_for "$workload" "$threads" "b$r$threads")" >/dev/null 2>&1 &
      b=$!
      wait "$a" "$b"
      end=$(date +%s.%N)
      times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')")  # both done: the pair's wall clock
    else
      times+=("$(seconds_of "$(command_for "$workload" "$threads" "$situation$r$threads")")")
    fi
  done
  printf '%s\n' "${times[@]}" | median
}

csv=bench-results/threads.csv
echo "situation,workload,cores,seconds_default,seconds_one_thread,ratio_default_over_one" >"$csv"
for situation in idle busy two; do
  if [ "$situation" = busy ]; then
    bash -c 'while :; do :; done' &
    spinner=$!
  fi
  for workload in demo loop step; do
    d=$(measure "$situation" "$workload" "$cores")
    o=$(measure "$situation" "$workload" 1)
    ratio=$(awk -v a="$d" -v b="$o" 'BEGIN { print a / b }')
    printf '%s,%s,%s,%.3f,%.3f,%.2f\n' "$situation" "$workload" "$cores" "$d" "$o" "$ratio" | tee -a "$csv"
  done
  if [ -n "$spinner" ]; then kill "$spinner"; wait "$spinner" 2>/dev/null || true; spinner=""; fi
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //')
echo "-> $csv (commit $commit, $cores cores, $cpu, median of $repeats)"
