#!/bin/sh
# tests/external_router_check.sh — a router registered outside nn/ runs through the `moelab`
# command line: examples/moelab_with_hash.cpp registers the hash router (examples/hash_router.h)
# and calls moelab_main (tasks/cli/moelab_main.h). Checked, at toy size (seconds):
#   - a phonebook sweep with --set router=hash --set k=1 runs; config.json records the router and
#     the MoE points are named "-hash";
#   - mode=list writes command lines that start with moelab_with_hash (so the listed points run
#     with the router registered too);
#   - the hash router's own refusal (k = 2) is a usage error before any work (exit 2);
#   - plain moelab does not know "hash" (exit 2), so the registration is what makes it work.
# Run by ctest as external_router_through_moelab:
#   sh tests/external_router_check.sh build/moelab_with_hash build/moelab
set -u
with_hash=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
moelab=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

pb="phonebook --preset demo --set experts=4 --set book_sizes=20 --set steps=2 --set eval_every=1 --set test_names=5"
if "$with_hash" $pb --set router=hash --set k=1 --threads 1 --out H >out.txt 2>err.txt; then
  grep -q '"router": "hash"' H/config.json || fail "config.json does not record router hash"
  [ -e H/points/moe-d32-4e-top1-hash-N20-seed0.json ] || { fail "no point moe-d32-4e-top1-hash-N20-seed0"; ls H/points; }
  echo "ok: phonebook with router=hash"
else
  fail "phonebook with router=hash exited $?"; cat err.txt
fi

"$with_hash" $pb --set router=hash --set k=1 --set router_options=seed:7 --out L --set mode=list >list.txt 2>err.txt ||
  { fail "mode=list with router=hash"; cat err.txt; }
[ -s list.txt ] && ! grep -qv '^moelab_with_hash phonebook ' list.txt || { fail "mode=list lines:"; cat list.txt; }
grep -q -- "--set router=hash" list.txt || fail "the listed lines do not set router=hash"

"$with_hash" $pb --set router=hash --out K >out.txt 2>err.txt
status=$?
[ "$status" = 2 ] || fail "router=hash with k = 2 exited $status, expected 2"
grep -q "k must be 1" err.txt || { fail "no message about k"; cat err.txt; }
[ -e K/config.json ] && fail "router=hash with k = 2 wrote K/config.json"

"$moelab" $pb --set router=hash --set k=1 --out M >out.txt 2>err.txt
status=$?
[ "$status" = 2 ] || fail "plain moelab with router=hash exited $status, expected 2"
grep -q "'hash' is not one of" err.txt || { fail "plain moelab's message"; cat err.txt; }

[ "$failures" = 0 ] && echo "all checks passed"
exit "$failures"
