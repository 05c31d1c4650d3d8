#!/bin/sh
# tests/moelab_cli_checks.sh — `moelab` checks everything it can before it writes anything: the
# seed, the settings, the inputs and the run folder, and refuses to resume a folder that holds a
# run with other settings (tasks/common/run_start.h). Each case checks the exit status (2: a bad
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

# Resuming: the same settings resume; other settings are refused, naming them, and the folder's
# config.json stays the earlier run's. The audit's case: phonebook with other steps.
pb="phonebook --preset demo --set book_sizes=50,100 --set eval_every=1 --set test_names=5"
if $moelab $pb --set steps=2 --out P --threads 1 >/dev/null 2>err.txt; then
  cp P/config.json before.json
  expect 2 "steps = 2 there, 3 now" - $moelab $pb --set steps=3 --out P
  grep -q "resuming" out.txt && { echo "FAIL: resumed with other settings"; failures=$((failures + 1)); }
  cmp -s P/config.json before.json || { echo "FAIL: config.json was overwritten"; failures=$((failures + 1)); }
  expect 0 "" - $moelab $pb --set steps=2 --out P --threads 2
  # "phonebook: 6 points (3 not done yet), ...": some points were found finished and not run again.
  counts=$(sed -n 's/^phonebook: \([0-9]*\) points (\([0-9]*\) not done yet).*/\1 \2/p' out.txt)
  set -- $counts
  { [ $# = 2 ] && [ "$2" -lt "$1" ]; } || { echo "FAIL: did not resume"; cat out.txt; failures=$((failures + 1)); }
else
  echo "FAIL: the first phonebook run failed"; cat err.txt; failures=$((failures + 1))
fi

[ "$failures" = 0 ] && echo "all checks passed"
exit "$failures"
