#!/bin/sh
# tests/run_folder_safety_check.sh — the `moelab` command line against a run folder, a name or a
# data folder prepared to turn it against its user (docs/jobs.md, "What may run at once"; the
# unit side is tests/test_run_folder_safety.cpp). Each case fails without the fix it checks:
#   - a link in a run folder (the audit's: loss_5x2.gnuplot.log -> a victim file, then a report;
#     .lock -> a victim; .locks -> a folder elsewhere) is refused with exit 2, naming the entry,
#     and the victim keeps its bytes;
#   - a folder of the user's own files (no config.json) is refused, its files untouched;
#   - mode=list lines: every --out name with quotes, $(...), backticks, spaces or a leading dash
#     gives lines that `sh -c` runs as exactly one job each, in exactly that folder, running no
#     injected command; a newline or a byte that is not UTF-8 in --out or a setting is refused
#     (exit 2) before any folder is made;
#   - mode=point with a point the grid does not have: exit 2 and no folder;
#   - a FIFO or a link to /dev/zero in data_dir is named as what it is, not called missing.
# Run by ctest as run_folder_safety:  sh tests/run_folder_safety_check.sh build/moelab
set -u
moelab=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

l2="softmoe-l2norm --preset toy --set steps=4 --set log_every=2 --set batch=8 --threads 1"

# expect STATUS WORDS command...: exit STATUS and WORDS in stderr.
expect() {
  status=$1 words=$2
  shift 2
  "$@" >out.txt 2>err.txt
  got=$?
  if [ "$got" != "$status" ]; then fail "$* -> exit $got, expected $status"; cat err.txt; return 1; fi
  if [ -n "$words" ] && ! grep -qF -- "$words" err.txt; then fail "$* -> message without '$words'"; cat err.txt; return 1; fi
  echo "ok: $*"
}

victim="$work/thesis.tex"
reset_victim() { printf 'my thesis\n' >"$victim"; }
victim_intact() { [ "$(cat "$victim")" = "my thesis" ] || fail "$1: the victim file was changed"; }

# 1. The audit's case: a finished folder with the gnuplot log linked to a victim, then a report.
reset_victim
$moelab $l2 --out r >/dev/null 2>&1 || fail "the toy run failed"
png=$(cd r && ls *.png 2>/dev/null | head -n 1)
[ -n "$png" ] || { echo "note: no PNG drawn (no gnuplot?): using loss.png"; png=loss.png; }
stem=${png%.png}
rm -f "r/$png"
ln -s "$victim" "r/$stem.gnuplot.log"
expect 2 "r/$stem.gnuplot.log' is a symbolic link to '$victim'" $moelab $l2 --out r --set mode=report
victim_intact "gnuplot.log link"
[ -L "r/$stem.gnuplot.log" ] || fail "the link was removed instead of reported"
rm "r/$stem.gnuplot.log"

# .lock and .locks links.
ln -s "$victim" r/.lock 2>/dev/null || { rm -f r/.lock; ln -s "$victim" r/.lock; }
expect 2 "r/.lock' is a symbolic link" $moelab $l2 --out r --set mode=report
victim_intact ".lock link"
rm r/.lock
mkdir elsewhere
rm -rf r/.locks
ln -s "$work/elsewhere" r/.locks
expect 2 "r/.locks' is a symbolic link" $moelab $l2 --out r --set mode=point --set point=5x2-n1-seed0
[ -z "$(ls -A elsewhere)" ] || fail ".locks link: files were created outside the run folder"
rm r/.locks
# With the links gone the same folder reports again.
expect 0 "" $moelab $l2 --out r --set mode=report

# 2. A folder of the user's own files is not a run folder.
mkdir h
echo mine >h/loss_5x2.png
expect 2 "not a moelab run folder" $moelab $l2 --out h
[ "$(cat h/loss_5x2.png)" = mine ] || fail "the user's file was replaced"
[ -e h/config.json ] && fail "config.json was written into the user's folder"
[ -e h/.lock ] && fail "a lock file was written into the user's folder"

# 3. mode=list lines through sh -c: one job each, in exactly the named folder, nothing injected.
for name in "bob's run" 'a"b' 'x$(touch INJ1)' 'y`touch INJ2`' '-rf' '--threads' 'sp ace;touch INJ3 #' 'ünï'; do
  out="lists/$name"
  case "$name" in -*) out="$name" ;; esac  # a leading dash only as the whole name
  if ! $moelab $l2 --out="$out" --set mode=list >list.txt 2>list.err; then
    fail "mode=list with --out '$out'"; cat list.err; continue
  fi
  lines=$(wc -l <list.txt)
  [ "$lines" -ge 2 ] || { fail "--out '$out': $lines lines listed"; continue; }
  sed "s|^moelab |\"$moelab\" |" list.txt >run.txt
  while IFS= read -r line; do
    sh -c "$line" >/dev/null 2>>list.err || fail "--out '$out': the line failed: $line"
  done <run.txt
  done_points=$(ls -- "$out/points/" 2>/dev/null | grep -c '\.json$')
  [ "$done_points" = "$lines" ] || fail "--out '$out': $done_points of $lines points done in the folder"
  echo "ok: mode=list with --out '$out': $lines lines, each one job in that folder"
done
for f in INJ1 INJ2 INJ3 lists/INJ1 lists/INJ2 lists/INJ3; do [ -e "$f" ] && fail "a listed line ran an injected command ($f)"; done

nl='
'
expect 2 "--out 'n${nl}touch INJ4 #' holds a newline" $moelab $l2 --out "n${nl}touch INJ4 #" --set mode=list
[ -e "n${nl}touch INJ4 #" ] && fail "a folder with a newline in its name was made"
expect 2 "not valid UTF-8" $moelab $l2 --out "$(printf 'u\377')"
[ -e "$(printf 'u\377')" ] && fail "a folder with a name that is not UTF-8 was made"
expect 2 "setting 'data_dir' holds a newline" $moelab softmoe-mnist --preset toy --set "data_dir=d${nl}x" --out m
[ -e m ] && fail "a run folder was made for a data_dir with a newline"

# 4. A point the grid does not have: refused before the folder exists.
expect 2 "nosuch" $moelab $l2 --out p --set mode=point --set point=nosuch
[ -e p ] && fail "mode=point point=nosuch made the folder"
expect 2 "nosuch" $moelab phonebook --preset demo --out pb --set mode=point --set point=nosuch
[ -e pb ] && fail "phonebook mode=point point=nosuch made the folder"

# 5. data_dir entries that are not files say what they are.
mkdir data
mkfifo data/train-images-idx3-ubyte
expect 1 "is a FIFO" $moelab softmoe-mnist --preset toy --set data_dir=data --out m1
rm data/train-images-idx3-ubyte
ln -s /dev/zero data/train-images-idx3-ubyte
expect 1 "a symbolic link to '/dev/zero', a character device" $moelab softmoe-mnist --preset toy --set data_dir=data --out m2

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all checks passed"
