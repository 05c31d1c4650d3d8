#!/bin/sh
# tests/bench_profile_check.sh — the benchmarks' profiling modes run and write what they say:
#   - train_step_bench --gemm-profile on a toy model: a "gemm_profile" section in the JSON with
#     per-shape rows and the products' share of the step, and the table on stdout;
#   - --gemm-profile where it cannot measure (--precision bf16: the bf16 products do not run the
#     float32 GEMM) is refused with status 2, before any step;
#   - gemm_bench --micro-kernel: one row per inner length kc = 8 .. 256 in the JSON (and the AMX
#     block's k = 32 .. 512 where the CPU has AMX-BF16, "amx_block": null elsewhere); --layout nn|nt|tn
#     agrees with OpenBLAS in each transposition, --bf16 adds the bf16 rate, bad uses exit 2;
#   - train_step_bench --cpu-peak-from: fraction_of_peak against fma_peak's measured rate of the
#     set the kernels run, times the threads (checked to the digit); a file from another CPU, a
#     file that is not fma_peak's, --peak-tflops beside it, --precision tf32 (no CPU peak for it)
#     are refused with status 2 before any JSON is written; with --precision bf16 the peak is that
#     of the "bf16_kernel" the JSON names (fma_peak's bf16_amx, bf16_dot, or the float32 set's
#     where the products widen), and bf16_amx is measured only on CPUs with AMX-BF16.
#   - train_step_bench --perf-control CTL,ACK: "enable" before the timed steps and "disable" after,
#     each acknowledged, to a stand-in for perf on two FIFOs; a path that is not a FIFO, a symbolic
#     link to one, or none, refused with status 2 before any JSON is written.
#   - train_step_bench --ffn F: the FFN's (and each expert's) hidden width, recorded in the config;
#     the parameter count grows by exactly layers x experts x 2 d (F - d) over a run without it.
#   - train_step_bench --precision bf16 --paired-fp32: "paired_fp32" and "bf16_over_fp32" in the
#     JSON, the float32 twin's last loss bitwise that of a plain float32 run of as many steps (the
#     same model, trained alone), and --paired-fp32 without bf16 refused with status 2.
# Speed is not checked (benchmarks assert nothing about it); the output's form is.
# Run by ctest as bench_profiles:
#   sh tests/bench_profile_check.sh build/train_step_bench build/gemm_bench build/fma_peak
set -u
train_step_bench=$1 gemm_bench=$2 fma_peak=$3
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

# --ffn: toy d 16, one layer; F 24 adds 2 x 16 x 8 = 256 parameters per FFN (one dense, or 4 experts).
json_int() { tr -d '\n ' <"$1" | grep -o "\"$2\":[0-9]*" | head -1 | cut -d: -f2; }
for experts in 0 4; do
  # shellcheck disable=SC2086
  if "$train_step_bench" $toy --experts $experts --out "$work/f16.json" >/dev/null 2>&1 &&
    "$train_step_bench" $toy --experts $experts --ffn 24 --out "$work/f24.json" >/dev/null 2>&1; then
    grep -q '"ffn": *24' "$work/f24.json" || fail "--ffn 24 (experts $experts): the config does not say ffn 24"
    grep -q '"ffn": *16' "$work/f16.json" || fail "no --ffn (experts $experts): the config does not say ffn = d = 16"
    added=$(($(json_int "$work/f24.json" parameters) - $(json_int "$work/f16.json" parameters)))
    want=$((256 * (experts > 0 ? experts : 1)))
    [ "$added" = "$want" ] || fail "--ffn 24 (experts $experts) added $added parameters, not $want"
  else
    fail "train_step_bench --ffn 24 (experts $experts) failed"
  fi
done

# shellcheck disable=SC2086
if "$train_step_bench" $toy --precision bf16 --paired-fp32 --out "$work/paired.json" >"$work/paired.txt" 2>&1 &&
  "$train_step_bench" $toy --precision fp32 --out "$work/alone.json" >"$work/alone.txt" 2>&1; then
  grep -q '"median_of_step_ratios"' "$work/paired.json" || fail "--paired-fp32: no bf16_over_fp32 ratios in the JSON"
  twin_loss=$(tr -d '\n ' <"$work/paired.json" | grep -o '"paired_fp32":{[^}]*' | grep -o '"final_loss":[-0-9.e+]*')
  alone_loss=$(tr -d '\n ' <"$work/alone.json" | grep -o '"final_loss":[-0-9.e+]*')
  [ -n "$twin_loss" ] && [ "$twin_loss" = "$alone_loss" ] ||
    fail "--paired-fp32: the twin's loss ($twin_loss) is not a float32 run's ($alone_loss)"
  grep -q "bf16 / fp32 speed" "$work/paired.txt" || fail "--paired-fp32: no ratio on stdout"
else
  fail "train_step_bench --paired-fp32 failed: $(cat "$work/paired.txt" "$work/alone.txt" 2>/dev/null)"
fi
# shellcheck disable=SC2086
"$train_step_bench" $toy --paired-fp32 --out "$work/refused.json" >/dev/null 2>&1
status=$?
[ "$status" = 2 ] || fail "--paired-fp32 with fp32 exited $status, not 2"

# --perf-control: a shell loop plays perf, logging each command and answering "ack".
mkfifo "$work/ctl" "$work/ack"
(
  exec 3<"$work/ctl" 4>"$work/ack"
  while read -r command <&3; do
    echo "$command" >>"$work/commands"
    echo ack >&4
  done
) &
stand_in=$!
# shellcheck disable=SC2086
if "$train_step_bench" $toy --perf-control "$work/ctl,$work/ack" --out "$work/perf.json" >"$work/perf.txt" 2>&1; then
  wait "$stand_in"
  [ "$(tr '\n' ' ' <"$work/commands")" = "enable disable " ] ||
    fail "--perf-control sent '$(tr '\n' ' ' <"$work/commands" 2>/dev/null)', not 'enable disable'"
  ! grep -q "did not take" "$work/perf.txt" || fail "--perf-control: $(cat "$work/perf.txt")"
else
  kill "$stand_in" 2>/dev/null
  fail "train_step_bench --perf-control failed: $(cat "$work/perf.txt")"
fi
touch "$work/plain"
ln -s "$work/ctl" "$work/link"
for spec in "$work/plain" "$work/missing,$work/ack" "$work/link"; do
  # (timeout: a link followed to the FIFO would block in open, with no reader left)
  # shellcheck disable=SC2086
  timeout 60 "$train_step_bench" $toy --perf-control "$spec" --out "$work/refused_perf.json" >"$work/refused_perf.txt" 2>&1
  status=$?
  [ "$status" = 2 ] || fail "--perf-control $spec exited $status, not 2"
  grep -q -e "not a FIFO" -e "cannot open" -e "symbolic link" "$work/refused_perf.txt" ||
    fail "--perf-control $spec: the refusal does not say why: $(cat "$work/refused_perf.txt")"
  [ ! -e "$work/refused_perf.json" ] || fail "--perf-control $spec: the refused run wrote its JSON"
done

if "$gemm_bench" --micro-kernel --phases 1 --out "$work/tile.json" >"$work/tile.txt" 2>&1; then
  [ "$(grep -c '"kc"' "$work/tile.json")" = 6 ] || fail "gemm_bench --micro-kernel: not 6 kc rows"
  grep -q '"row_major_a_gflops_best"' "$work/tile.json" || fail "gemm_bench --micro-kernel: no best rate"
  # The AMX block: five inner lengths where the CPU has AMX-BF16 (and Linux grants it), else null.
  python3 - "$work/tile.json" <<'PY' || fail "gemm_bench --micro-kernel's amx_block: $(cat "$work/tile.json")"
import json, sys
amx = json.load(open(sys.argv[1]))["amx_block"]
assert amx is None or ("amx_bf16" in open("/proc/cpuinfo").read().split()
                       and [r["k"] for r in amx["by_k"]] == [32, 64, 128, 256, 512]
                       and all(r["gflops_best"] > 0 for r in amx["by_k"])), amx
PY
else
  fail "gemm_bench --micro-kernel failed: $(cat "$work/tile.txt")"
fi
"$gemm_bench" --micro-kernel --shape 2x2x2 >/dev/null 2>&1
status=$?
[ "$status" = 2 ] || fail "gemm_bench --micro-kernel --shape exited $status, not 2 (they exclude each other)"
# --layout and --bf16: every transposition gives OpenBLAS's product (where it is built in: its
# elementwise difference is in the JSON), and the bf16 rate is reported beside the float32 one.
for layout in nn nt tn; do
  if "$gemm_bench" --threads 1 --phases 1 --layout "$layout" --bf16 --shape 64x48x40 --out "$work/g_$layout.json" \
    >"$work/g_$layout.txt" 2>&1; then
    grep -q "\"layout\": \"$layout\"" "$work/g_$layout.json" || fail "gemm_bench --layout $layout: not in the JSON"
    grep -q '"moelab_bf16_gflops"' "$work/g_$layout.json" || fail "gemm_bench --bf16: no bf16 rate ($layout)"
    diff=$(grep -o '"max_abs_difference": [-0-9.e+]*' "$work/g_$layout.json" | awk '{print $2}')
    if [ -n "$diff" ]; then
      awk -v d="$diff" 'BEGIN { exit !(d < 1e-4) }' || fail "gemm_bench --layout $layout: OpenBLAS differs by $diff"
    fi
  else
    fail "gemm_bench --layout $layout --bf16 failed: $(cat "$work/g_$layout.txt")"
  fi
done
"$gemm_bench" --micro-kernel --bf16 >/dev/null 2>&1
status=$?
[ "$status" = 2 ] || fail "gemm_bench --micro-kernel --bf16 exited $status, not 2"
"$gemm_bench" --layout tt >/dev/null 2>&1
status=$?
[ "$status" = 2 ] || fail "gemm_bench --layout tt exited $status, not 2"

# The CPU peak from fma_peak's JSON (a short measurement: its value does not matter, its use does).
if "$fma_peak" --reps 1 --iters 100000 --out "$work/fma.json" >"$work/fma.txt" 2>&1; then
  # The bf16 dot-product peak: measured where the CPU has AVX512_BF16, null elsewhere; never absent.
  python3 - "$work/fma.json" <<'PY' || fail "fma_peak's bf16_dot: $(cat "$work/fma.json")"
import json, sys
d = json.load(open(sys.argv[1]))["bf16_dot"]
has = "avx512_bf16" in open("/proc/cpuinfo").read().split()
assert (d is not None) == has, (d, has)
assert d is None or (d["best_gflops"] > 0 and d["flops_per_instruction"] == 64), d
amx = json.load(open(sys.argv[1]))["bf16_amx"]  # null also where Linux did not grant the tiles
assert amx is None or ("amx_bf16" in open("/proc/cpuinfo").read().split() and amx["best_gflops"] > 0
                       and amx["flops_per_instruction"] == 16384), amx
PY
  # shellcheck disable=SC2086
  if "$train_step_bench" $(echo "$toy" | sed 's/--threads 1/--threads 2/') --cpu-peak-from "$work/fma.json" --out "$work/peak.json" >"$work/peak.txt" 2>&1; then
    python3 - "$work/fma.json" "$work/peak.json" <<'PY' || fail "--cpu-peak-from: $(cat "$work/peak.json")"
import json, sys
fma, step = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
isa = step["cpu"].rsplit("(", 1)[1].rstrip(")")          # the set the step's kernels ran
want = fma["sets"][isa]["best_gflops"] * 2 / 1e3          # x 2 threads, in TFLOPS
assert abs(step["peak_tflops"] - want) <= 1e-12 * want, (step["peak_tflops"], want)
assert abs(step["fraction_of_peak"] - step["achieved_tflops"] / want) <= 1e-9, step["fraction_of_peak"]
assert step["peak_source"].startswith("fma_peak ") and isa in step["peak_source"], step["peak_source"]
PY
  else
    fail "train_step_bench --cpu-peak-from failed: $(cat "$work/peak.txt")"
  fi
  # shellcheck disable=SC2086
  if "$train_step_bench" $toy --precision bf16 --cpu-peak-from "$work/fma.json" --out "$work/peak_bf16.json" >"$work/peak.txt" 2>&1; then
    python3 - "$work/fma.json" "$work/peak_bf16.json" <<'PY' || fail "--cpu-peak-from, bf16: $(cat "$work/peak_bf16.json")"
import json, sys
fma, step = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
kernel = step["bf16_kernel"]
if kernel == "widened":
    want = fma["sets"][step["cpu"].rsplit("(", 1)[1].rstrip(")")]["best_gflops"] / 1e3
else:
    want = fma[{"amx": "bf16_amx", "vdpbf16ps": "bf16_dot"}[kernel]]["best_gflops"] / 1e3
assert abs(step["peak_tflops"] - want) <= 1e-12 * want, (kernel, step["peak_tflops"], want)
assert abs(step["fraction_of_peak"] - step["achieved_tflops"] / want) <= 1e-9, step["fraction_of_peak"]
PY
  else
    fail "train_step_bench --precision bf16 --cpu-peak-from failed: $(cat "$work/peak.txt")"
  fi
  sed 's/"cpu": "[^"(]*/"cpu": "Some Other CPU /' "$work/fma.json" >"$work/other.json"
  printf '{"benchmark": "gemm_bench"}\n' >"$work/not_fma.json"
  for refused in "--cpu-peak-from $work/other.json" "--cpu-peak-from $work/not_fma.json" \
                 "--cpu-peak-from $work/fma.json --peak-tflops 1" "--cpu-peak-from $work/fma.json --precision tf32" \
                 "--cpu-peak-from $work/missing.json"; do
    rm -f "$work/refused.json"
    # shellcheck disable=SC2086
    "$train_step_bench" $toy $refused --out "$work/refused.json" >"$work/refused.txt" 2>&1
    status=$?
    [ "$status" = 2 ] || fail "train_step_bench $refused exited $status, not 2: $(cat "$work/refused.txt")"
    [ ! -e "$work/refused.json" ] || fail "train_step_bench $refused wrote its JSON"
    case $refused in
      *other.json) grep -q "measured on another CPU" "$work/refused.txt" ||
                     fail "the other CPU's file is not named as such: $(cat "$work/refused.txt")" ;;
    esac
  done
else
  fail "fma_peak failed: $(cat "$work/fma.txt")"
fi

[ "$failures" = 0 ] && echo "bench profiles: all checks passed"
exit "$failures"
