#!/bin/sh
# tests/moelab_cli_checks.sh — `moelab` checks everything it can before it writes anything: the
# seed, the settings, the inputs and the run folder, and refuses to resume a folder that holds a
# run with other settings (runner/run_start.h). Each case checks the exit status (2: a bad
# option or value, 1: missing data), a word of the message, and that no config.json was written
# (or that the earlier one is unchanged). Run by ctest as moelab_cli_checks_before_writing:
#   sh tests/moelab_cli_checks.sh build/moelab
set -u
moelab=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0

# expect STATUS WORDS FOLDER command...: the command exits with STATUS, its stderr holds WORDS,
# and FOLDER has no config.json afterwards (FOLDER "-": nothing to check).
expect() {
  status=$1 words=$2 folder=$3
  shift 3
  "$@" >out.txt 2>err.txt
  got=$?
  if [ "$got" != "$status" ]; then
    echo "FAIL: $* -> exit $got, expected $status"; cat err.txt; failures=$((failures + 1)); return
  fi
  if [ -n "$words" ] && ! grep -qF -- "$words" err.txt; then
    echo "FAIL: $* -> message without '$words':"; cat err.txt; failures=$((failures + 1)); return
  fi
  if [ "$folder" != "-" ] && [ -e "$folder/config.json" ]; then
    echo "FAIL: $* -> wrote $folder/config.json"; failures=$((failures + 1)); return
  fi
  echo "ok: $*"
}

l2="softmoe-l2norm --preset toy --set steps=4 --set log_every=2 --set batch=8"
expect 2 "'-1' is not a whole number" S $moelab $l2 --seed -1 --out S
expect 2 "is not a whole number" S $moelab $l2 --seed 18446744073709551616 --out S
expect 2 "is not a whole number" S $moelab $l2 --seed 12x --out S
expect 2 "out of range" S $moelab $l2 --set steps=99999999999999999999 --out S
expect 2 "--out: the folder name is empty" runs/softmoe-l2norm/toy $moelab $l2 --out ""
[ -e runs ] && { echo "FAIL: --out \"\" wrote under runs/"; failures=$((failures + 1)); }
echo x >a-file
expect 2 "exists and is not a folder" - $moelab $l2 --out a-file
expect 2 "cannot create the folder" - $moelab $l2 --out a-file/run
expect 2 "data_dir: the folder '/nonexistent' does not exist" M $moelab softmoe-mnist --preset toy \
  --set data_dir=/nonexistent --out M
expect 2 "is not a folder" M $moelab softmoe-mnist --preset toy --set data_dir=a-file --out M
expect 1 "no mnist data found" M $moelab softmoe-mnist --preset toy --out M  # no data/mnist here
[ -e M ] && { echo "FAIL: a run folder was made for missing data"; failures=$((failures + 1)); }
expect 2 "teacher_active = 1 is below teacher_k = 8" T $moelab teacher-student --preset toy \
  --set teacher_active=1 --out T
expect 2 "sampling" B $moelab phonebook --preset demo --set sampling=shuffle --out B
expect 2 "slot_inputs" B $moelab softmoe-mnist --preset toy --set slot_inputs=normalised --out B
# Routers (tasks/common/router_settings.h): a name the registry lacks (the list of the registered
# ones), a malformed options list, and an option the router's factory refuses, before any work.
expect 2 "'no-such' is not one of aux-free, balanced, expert-choice, relu, token-hash, top-p, topk" B $moelab phonebook --preset demo \
  --set router=no-such --out B
expect 2 "'threshold' is not key:value" B $moelab shortest-path --set router=top-p --set router_options=threshold \
  --out B
expect 2 "router 'top-p' with options 'p:0.5' for d = 32, 4 experts, k = 2" B $moelab phonebook --preset demo \
  --set router=top-p --set router_options=p:0.5 --out B
expect 2 "unknown option 'jitter_sd'" B $moelab shortest-path --set router_options=jitter_sd:1 --out B
expect 2 "student_router_bias" T $moelab teacher-student --preset toy --set router_options=bias:true --out T
expect 2 "unknown option" T $moelab teacher-student --preset toy --set router=top-p --set router_options=p:0.5 --out T

# "phonebook: 6 points (3 not done yet), ..." in out.txt: some points were found finished and not
# run again.
resumed() {
  counts=$(sed -n 's/^phonebook: \([0-9]*\) points (\([0-9]*\) not done yet).*/\1 \2/p' out.txt)
  set -- $counts
  { [ $# = 2 ] && [ "$2" -lt "$1" ]; } || { echo "FAIL: did not resume"; cat out.txt; failures=$((failures + 1)); }
}

# Resuming: the same settings resume; other settings are refused, naming them, and the folder's
# config.json stays the earlier run's. The audit's case: phonebook with other steps.
pb="phonebook --preset demo --set book_sizes=50,100 --set eval_every=1 --set test_names=5"
if $moelab $pb --set steps=2 --out P --threads 1 >/dev/null 2>err.txt; then
  cp P/config.json before.json
  expect 2 "steps = 2 there, 3 now" - $moelab $pb --set steps=3 --out P
  grep -q "resuming" out.txt && { echo "FAIL: resumed with other settings"; failures=$((failures + 1)); }
  cmp -s P/config.json before.json || { echo "FAIL: config.json was overwritten"; failures=$((failures + 1)); }
  expect 0 "" - $moelab $pb --set steps=2 --out P --threads 2
  resumed
  # A folder from before the router settings existed (its config.json without router and
  # router_options) resumes with the defaults, and refuses another router, naming the default.
  grep -v '"router' P/config.json >old.json && mv old.json P/config.json
  grep -q '"router' P/config.json && { echo "FAIL: router still in the old config"; failures=$((failures + 1)); }
  cp P/config.json before.json
  expect 2 'router = "topk" there (not recorded: the folder predates the setting, so its default), "top-p" now' - \
    $moelab $pb --set steps=2 --set router=top-p --out P
  cmp -s P/config.json before.json || { echo "FAIL: config.json was overwritten"; failures=$((failures + 1)); }
  expect 0 "" - $moelab $pb --set steps=2 --out P --threads 1
  resumed
  # Precision changes results: a folder run in fp32 refuses bf16, naming both; --precision and
  # --set precision must agree; fp16 is no choice.
  grep -q '"precision": "fp32"' P/config.json || { echo "FAIL: fp32 not recorded"; failures=$((failures + 1)); }
  cp P/config.json before.json
  expect 2 'precision = "fp32" there, "bf16" now' - $moelab $pb --set steps=2 --precision bf16 --out P
  cmp -s P/config.json before.json || { echo "FAIL: config.json was overwritten"; failures=$((failures + 1)); }
  expect 2 "--precision bf16 contradicts --set precision=fp32" Pb $moelab $pb --set steps=2 --precision bf16 \
    --set precision=fp32 --out Pb
  expect 2 "--precision" Pb $moelab $pb --set steps=2 --precision fp16 --out Pb
  # A bf16 run records its precision, lists its points with it, and resumes in it.
  expect 0 "" - $moelab $pb --set steps=2 --precision bf16 --out Pb --threads 1
  grep -q '"precision": "bf16"' Pb/config.json || { echo "FAIL: bf16 not recorded"; cat Pb/config.json; failures=$((failures + 1)); }
  $moelab $pb --set steps=2 --precision bf16 --out Pl --set mode=list >list.txt 2>/dev/null
  grep -q "precision=bf16" list.txt || { echo "FAIL: mode=list lost the precision"; cat list.txt; failures=$((failures + 1)); }
else
  echo "FAIL: the first phonebook run failed"; cat err.txt; failures=$((failures + 1))
fi

# Another router runs, with its options; config.json records both and the MoE models say which.
if $moelab $pb --set steps=2 --set router=top-p --set router_options=threshold:0.5 --out R --threads 1 \
  >/dev/null 2>err.txt; then
  grep -q '"router": "top-p"' R/config.json && grep -q '"router_options": "threshold:0.5"' R/config.json ||
    { echo "FAIL: config.json does not record the router"; failures=$((failures + 1)); }
  [ -e R/points/moe-d32-8e-top-p-N50-seed0.json ] ||
    { echo "FAIL: no point for moe-d32-8e-top-p"; ls R/points; failures=$((failures + 1)); }
  echo "ok: phonebook with router=top-p, threshold 0.5"
else
  echo "FAIL: phonebook with router=top-p failed"; cat err.txt; failures=$((failures + 1))
fi

# --- No shell anywhere: run folders named like shell injections train and report, nothing runs.
for name in "bob's run" "x'; touch INJECTED1; echo '" 'y $(touch INJECTED2) `touch INJECTED3`'; do
  if $moelab $l2 --out "$name" >out.txt 2>err.txt && [ -s "$name/summary.md" ]; then
    echo "ok: a run folder named $(printf '%s' "$name" | head -n 1)..."
  else
    echo "FAIL: the run in the folder '$name' failed"; cat err.txt; failures=$((failures + 1))
  fi
done
# A newline is refused (exit 2, no folder): a mode=list line would split there
# (tests/run_folder_safety_check.sh feeds the lines of the other names to sh -c).
expect 2 "holds a newline" - $moelab $l2 --out "new
line; touch INJECTED4"
[ -e "new
line; touch INJECTED4" ] && { echo "FAIL: a folder with a newline in its name was made"; failures=$((failures + 1)); }
if find . -name 'INJECTED*' | grep -q .; then
  echo "FAIL: a folder name ran a command: $(find . -name 'INJECTED*')"; failures=$((failures + 1))
fi

# --- One writer per folder (runner/run_lock.h): a held folder refuses a second run at once,
# naming the holder, and writes nothing.
if command -v flock >/dev/null; then
  mkdir -p L
  printf 'pid 4242 (mode=all): moelab the-first-run\n' >L/.lock
  flock -x -o L/.lock sleep 20 >/dev/null 2>&1 &
  holder=$!
  sleep 1
  expect 2 "is in use by pid 4242 (mode=all): moelab the-first-run" L $moelab $l2 --out L
  expect 2 "is in use by" L $moelab $l2 --out L --set mode=point --set point=5x2-n1-seed0
  kill $holder 2>/dev/null; wait $holder 2>/dev/null
  expect 0 "" - $moelab $l2 --out L  # released when the holder ended
fi
# Two jobs of one grid started together with different settings: the config lock lets exactly one
# of them write config.json; the other is refused (before: both ran, config.json said one thing and
# the points held another).
$moelab $l2 --out J --set mode=point --set point=5x2-n1-seed0 --set steps=4 >j1.txt 2>&1 &
first=$!
$moelab $l2 --out J --set mode=point --set point=5x2-n10-seed0 --set steps=6 >j2.txt 2>&1
second_status=$?
wait $first
first_status=$?
if [ "$((first_status + second_status))" = 2 ] && grep -q "other settings" j1.txt j2.txt; then
  echo "ok: two jobs with different settings on one folder: one ran, one was refused"
else
  echo "FAIL: two jobs with different settings exited $first_status and $second_status"; cat j1.txt j2.txt
  failures=$((failures + 1))
fi
# mode=point without a point, or a point name that is a path, writes nothing.
expect 2 "mode=point needs --set point=NAME" Q $moelab $l2 --out Q --set mode=point
expect 2 "holds only letters, digits" Q $moelab $l2 --out Q --set mode=point --set point=../../escape
# A value twice in a list would run its jobs twice.
expect 2 "listed twice" Q $moelab $l2 --out Q --set seeds=0,0
# A damaged point result (a number where the others hold text) fails the report with a message that
# names the point's file and the field, not the JSON library's "type_error.304".
if $moelab $l2 --set seeds=0,1,2 --out D >/dev/null 2>&1; then
  first_point=$(ls D/points/*.json | head -n 1)
  sed -E 's/"final_loss": ?"[^"]*"/"final_loss": 12/' "$first_point" >damaged.json && mv damaged.json "$first_point"
  expect 1 "$(basename "$first_point"): 'row.final_loss' is a number where 5 others have a string" - \
    $moelab $l2 --set seeds=0,1,2 --out D --set mode=report
else
  echo "FAIL: the run to damage failed"; failures=$((failures + 1))
fi
# An unknown experiment is named.
expect 2 "no experiment 'nosuch-experiment'" - $moelab nosuch-experiment
# A model too large for this machine's memory is refused before anything is written.
expect 2 "more than this machine's" Q $moelab phonebook --preset demo --set dense_widths=65536 --out Q
# Activations too (issue: a lower bound from the settings alone, tasks/common/memory_check.h):
# shortest paths of a million graphs at d = 4096 (at least 1.7 TB), a student of 2^24 active
# neurons in d = 65536 (70 TB), softmoe-l2norm on 2^24 samples of 2^20 inputs (140 TB).
expect 2 "more than this machine's" Q $moelab shortest-path --set batch=1048576 --set dense_widths=4096 --out Q
expect 2 "more than this machine's" Q $moelab teacher-student --preset toy --set d=65536 \
  --set student_active=16777216 --out Q
expect 2 "more than this machine's" Q $moelab softmoe-l2norm --preset toy --set input_dim=1048576 \
  --set token_dims=2 --set batch=16777216 --out Q

[ "$failures" = 0 ] && echo "all checks passed"
exit "$failures"
