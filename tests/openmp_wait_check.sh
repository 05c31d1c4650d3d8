#!/bin/sh
# tests/openmp_wait_check.sh — moelab's programs start libgomp with OMP_WAIT_POLICY=passive
# unless the user set a policy (core/openmp_wait.h). libgomp prints the settings it was started
# with when OMP_DISPLAY_ENV=verbose, so the check reads what libgomp itself uses, not our variable.
# Its OMP_WAIT_POLICY line says PASSIVE for "not set" as well; the spin count tells them apart
# (300000 by default, 0 when passive, 30000000000 when active):
#   - nothing set: the last start (after the restart) spins 0 turns, and config.json records it;
#   - OMP_WAIT_POLICY=active: libgomp starts once, spinning (the user's choice stands, no restart);
#   - GOMP_SPINCOUNT set: no restart either (libgomp starts once, with that count).
# Run by ctest as openmp_wait_policy:  sh tests/openmp_wait_check.sh build/moelab build/char_lm
set -u
moelab=$1 char_lm=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# starts PROGRAM ARGS...: how many times libgomp started, and the spin count of its last start.
starts() {
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose "$@" >"$work/out.txt" 2>"$work/err.txt"
  cat "$work/out.txt" "$work/err.txt" >"$work/all.txt"
  count=$(grep -c "OPENMP DISPLAY ENVIRONMENT BEGIN" "$work/all.txt")
  spins=$(grep "GOMP_SPINCOUNT = " "$work/all.txt" | tail -1 | sed "s/.*= '\(.*\)'.*/\1/")
}

for program in "$moelab" "$char_lm"; do
  starts "$program" --help
  [ "$spins" = 0 ] || fail "$program --help with no policy set: libgomp spins $spins turns, not 0 (passive)"
  starts env OMP_WAIT_POLICY=active "$program" --help
  [ "$spins" != 0 ] && [ "$count" = 1 ] ||
    fail "$program --help with OMP_WAIT_POLICY=active: $spins spins after $count starts (want spinning, once)"
  starts env GOMP_SPINCOUNT=1000 "$program" --help
  [ "$spins" = 1000 ] && [ "$count" = 1 ] ||
    fail "$program --help with GOMP_SPINCOUNT=1000: $spins spins after $count starts (want 1000, once)"
done

# A run records the policy its threads waited with.
starts "$moelab" softmoe-l2norm --preset toy --set steps=2 --set log_every=1 --set batch=8 --threads 2 \
  --out "$work/run"
grep -q '"openmp_wait": "passive"' "$work/run/config.json" ||
  fail "config.json does not record openmp_wait = passive: $(grep openmp_wait "$work/run/config.json")"
# The restart keeps the arguments: the run above must have done its work.
[ -f "$work/run/summary.md" ] || fail "the restarted run wrote no summary.md: $(tail -3 "$work/err.txt")"

[ "$failures" = 0 ] && echo "openmp wait policy: all checks passed"
[ "$failures" = 0 ]
