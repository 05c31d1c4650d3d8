#!/bin/sh
# tests/bench_profile_check.sh — the benchmarks' profiling modes run and write what they say:
#   - train_step_bench --gemm-profile on a toy model: a "gemm_profile" section in the JSON with
#     per-shape rows and the products' share of the step, and the table on stdout;
#   - --gemm-profile where it cannot measure (--precision bf16: the bf16 products do not run the
#     float32 GEMM) is refused with status 2, before any step;
#   - gemm_bench --micro-kernel: one row per inner length kc = 8 .. 256 in the JSON.
# Speed is not checked (benchmarks assert nothing about it); the output's form is.
# Run by ctest as bench_profiles:  sh tests/bench_profile_check.sh build/train_step_bench build/gemm_bench
set -u
train_step_bench=$1 gemm_bench=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

toy="--threads 1 --steps 2 --batch 2 --seq 8 --d 16 --heads 2 --layers 1 --vocab 16"
# shellcheck disable=SC2086  # $toy is a list of options
if "$train_step_bench" $toy --experts 4 --k 2 --gemm-profile --out "$work/step.json" >"$work/step.txt" 2>&1; then
  grep -q '"gemm_profile"' "$work/step.json" || fail "no gemm_profile in the JSON"
  grep -q '"share_of_step"' "$work/step.json" || fail "no share_of_step in gemm_profile"
  [ "$(grep -c '"calls_per_step"' "$work/step.json")" -ge 3 ] || fail "fewer than 3 product shapes recorded"
  grep -q "ms a step = " "$work/step.txt" || fail "no profile table on stdout"
else
  fail "train_step_bench --gemm-profile failed: $(cat "$work/step.txt")"
fi
# shellcheck disable=SC2086
"$train_step_bench" $toy --precision bf16 --gemm-profile --out "$work/bf16.json" >"$work/bf16.txt" 2>&1
status=$?
[ "$status" = 2 ] || fail "--gemm-profile with --precision bf16 exited $status, not 2"
grep -q "fp32" "$work/bf16.txt" || fail "the refusal does not say to use fp32: $(cat "$work/bf16.txt")"
[ ! -e "$work/bf16.json" ] || fail "the refused run wrote its JSON"

if "$gemm_bench" --micro-kernel --phases 1 --out "$work/tile.json" >"$work/tile.txt" 2>&1; then
  [ "$(grep -c '"kc"' "$work/tile.json")" = 6 ] || fail "gemm_bench --micro-kernel: not 6 kc rows"
  grep -q '"row_major_a_gflops_best"' "$work/tile.json" || fail "gemm_bench --micro-kernel: no best rate"
else
  fail "gemm_bench --micro-kernel failed: $(cat "$work/tile.txt")"
fi
"$gemm_bench" --micro-kernel --shape 2x2x2 >/dev/null 2>&1
status=$?
[ "$status" = 2 ] || fail "gemm_bench --micro-kernel --shape exited $status, not 2 (they exclude each other)"

[ "$failures" = 0 ] && echo "bench profiles: all checks passed"
exit "$failures"
