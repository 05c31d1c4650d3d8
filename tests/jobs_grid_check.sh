#!/bin/sh
# tests/jobs_grid_check.sh — a sweep run as jobs gives the report that one process gives
# (runner/job_grid.h). For each experiment below, at toy size and --threads 1:
#   A: moelab <experiment> ... --set mode=all                         (one process, grid order)
#   B: moelab <experiment> ... --set mode=list  -> every listed line run as its own process, in a
#      shuffled order  -> moelab <experiment> ... --set mode=report
# and then every file A's report wrote must be in B, equal byte for byte, except: the timings are cut
# first (CSV columns named `seconds` or `tokens_per_second`, rows of the metric tokens_per_second,
# the summary line "Training time of the jobs" and summary lines that say tokens/s), and
# config.json (it records the command and the start time), the plots' PNGs, the points/ folder
# and the lock files (.lock, .config.lock, .locks/: runner/run_lock.h)
# are not compared. A second mode=list
# in B must list nothing. Run by ctest as jobs_grid_matches_all:
#   sh tests/jobs_grid_check.sh build/moelab
set -u
here=$(cd "$(dirname "$0")" && pwd)
moelab=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

. "$here/grid_compare.sh"  # strip_seconds, compare_reports

# check NAME ARGS...: the experiment and its settings (without --out and mode).
check() {
  name=$1
  shift
  "$moelab" "$@" --threads 1 --out "A-$name" --set mode=all >"A-$name.log" 2>&1 || { fail "$name mode=all"; cat "A-$name.log"; return; }
  "$moelab" "$@" --threads 1 --out "B-$name" --set mode=list >"B-$name.list" 2>"B-$name.err" || { fail "$name mode=list"; cat "B-$name.err"; return; }
  points=$(wc -l <"B-$name.list")
  [ "$points" -ge 2 ] || { fail "$name: mode=list listed $points points"; return; }
  grep -qv '^moelab ' "B-$name.list" && { fail "$name: a listed line does not start with 'moelab '"; return; }
  # Shuffled (the same shuffle every time: a seeded awk), each line run by the shell with this moelab.
  awk 'BEGIN { srand(7) } { print rand() "\t" $0 }' "B-$name.list" | sort -n | cut -f2- |
    sed "s|^moelab |\"$moelab\" |" >"B-$name.shuffled"
  while IFS= read -r line; do
    sh -c "$line" >>"B-$name.log" 2>&1 || { fail "$name: $line"; tail -5 "B-$name.log"; return; }
  done <"B-$name.shuffled"
  "$moelab" "$@" --threads 1 --out "B-$name" --set mode=list >"B-$name.again" 2>/dev/null
  [ -s "B-$name.again" ] && fail "$name: mode=list still lists points after they ran"
  "$moelab" "$@" --threads 1 --out "B-$name" --set mode=report >>"B-$name.log" 2>&1 || { fail "$name mode=report"; return; }
  compare_reports "A-$name" "B-$name" "$name"
  echo "ok: $name: $points points in a shuffled order, $compared files equal to mode=all's"
}

# Phone-book: 2 models x 2 seeds x 3 books; a 12-entry book is memorized in 150 steps, 400 entries
# are not, so mode=all skips the 800-entry book and the jobs run it; the report must not count it.
check phonebook phonebook --set dense_widths=16 --set moe_widths=16 --set experts=4 --set heads=2 --set layers=1 \
  --set book_sizes=12,400,800 --set seeds=0,1 --set steps=150 --set batch=32 --set eval_every=50 --set test_names=12 \
  --set lrs=1e-2
[ -f B-phonebook/beyond_stop.csv ] || fail "phonebook: no beyond_stop.csv for the points past the stop rule"
[ -f A-phonebook/beyond_stop.csv ] && fail "phonebook: mode=all ran a point past the stop rule"
grep -q '^moe-d16-4e,.*,2,12,12 12$' A-phonebook/capacity.csv || { fail "phonebook: capacity is not 12 for both seeds"; cat A-phonebook/capacity.csv; }

# Teacher-student: one teacher, two students, two seeds.
check teacher-student teacher-student --preset toy --set d=8 --set teacher_k=2 --set teacher_active=8 \
  --set student_k=2,4 --set student_active=8 --set samples_per_epoch=256 --set test_samples=64 --set epochs=2 \
  --set batch=128 --set seeds=0,1

# Shortest path: two models x two seeds on 5-vertex graphs, a few steps.
check shortest-path shortest-path --set n=5 --set dense_widths=8 --set moe_widths=8 --set experts=2 --set heads=2 \
  --set layers=1 --set steps=30 --set batch=8 --set eval_every=15 --set test_examples=30 --set seeds=0,1

# Soft MoE learning ||x||: n = 1 and 10 x two seeds, a few steps.
check softmoe-l2norm softmoe-l2norm --preset toy --set steps=20 --set batch=64 --set log_every=5 --set seeds=0,1

# Routers: two schemes x (two books and 5-vertex graphs) x two seeds, a few steps (the load curves,
# the heat-map data and the graphs' calibration must not depend on which process ran a point).
check routers routers --set schemes=topk,balanced --set d=16 --set heads=2 --set layers=1 --set experts=4 \
  --set book_sizes=32,64 --set steps=30 --set batch=16 --set log_every=10 --set test_names=8 --set path_n=5 \
  --set path_d=16 --set path_steps=30 --set path_batch=8 --set path_test_examples=30 --set seeds=0,1

# Every experiment documents the modes in its --help.
for e in phonebook shortest-path teacher-student softmoe-mnist softmoe-vit softmoe-l2norm routers; do
  "$moelab" $e --help | grep -q 'mode = all .*list: print a command per' || fail "$e --help does not document the modes"
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all checks passed"
