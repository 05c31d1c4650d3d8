#!/usr/bin/env bash
# bench/step_profile.sh — where one thread's training step spends its time, and how close to the
# CPU's FMA peak a faster matrix product alone could bring it.
#
# For each benchmark model (dense; MoE 8 experts top-2; MoE 64 experts top-2 at d 64) it runs
# train_step_bench (100 steps) on one thread under `perf record` (a sampling profiler: cpu-clock,
# so it works on virtual machines without hardware counters), with perf's events enabled for the
# timed steps only (perf's --control FIFOs, train_step_bench --perf-control: bench/perf_control.h;
# until 2026-12-02 building the model and the warm-up were sampled too, which read the GEMM share
# 0.5-1.5 points low), ROUNDS times in turn, and splits the
# samples into the GEMM (moelab's blocked GEMM: its micro-kernels, driver and packing,
# core/cpu/gemm_*.cpp) and everything else. With F the step's model FLOPs, P the FMA peak of the
# instruction set the GEMM kernels ran (bench/fma_peak.cpp), t the step time and s_other the
# non-GEMM share of it:
#   fraction of peak    = (F / P) / t
#   GEMM rate in the step <= F / (s_gemm t)           (F also counts attention's own products)
#   ceiling             = (F / P) / (F / P + s_other t)
# The ceiling is what the step would reach if every product ran at the peak and nothing else
# changed: a target above it needs the rest of the step (norms, softmax, routing, the optimizer,
# copies) to shrink too, not the GEMM alone.
#
#   bench/step_profile.sh [ROUNDS]          (default 3)
# MOELAB_BUILD=<folder> picks the build (build/); MOELAB_CPU_ISA=avx2 profiles the AVX2 kernels on
# an AVX-512 CPU (and takes the AVX2 peak). Writes bench-results/step_profile.json (one entry per
# model: the medians over the rounds, and every round) and prints a table. Needs perf 5.9 or later
# (Debian: linux-perf; as a user other than root, kernel.perf_event_paranoid <= 2) and python3; nothing
# else should run on the machine meanwhile (the figures drift with other load: see
# docs/results/bench.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "step_profile.sh: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
build=${MOELAB_BUILD:-build}
command -v perf > /dev/null || { echo "step_profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
for program in train_step_bench fma_peak; do
  [[ -x "$build/$program" ]] || { echo "step_profile.sh: no $build/$program (build first: ./test.sh or cmake --build $build)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench-results

"$build"/fma_peak --out "$tmp/fma_peak.json" > /dev/null
models=("dense:" "moe8:--experts 8 --k 2" "moe64:--experts 64 --k 2 --d 64")
for ((r = 0; r < rounds; ++r)); do
  for entry in "${models[@]}"; do
    name=${entry%%:*}
    read -r -a options <<< "${entry#*:}"
    rm -f "$tmp/ctl" "$tmp/ack" && mkfifo "$tmp/ctl" "$tmp/ack"
    perf record -q -e cpu-clock -F 2000 -D -1 --control "fifo:$tmp/ctl,$tmp/ack" -o "$tmp/$name.$r.data" \
      "$build"/train_step_bench --threads 1 --steps 100 "${options[@]}" --perf-control "$tmp/ctl,$tmp/ack" \
      --out "$tmp/$name.$r.json" > /dev/null
    # One line per symbol: "share% symbol" (self time, as perf counts it).
    perf report -q -i "$tmp/$name.$r.data" --no-children --sort symbol 2> /dev/null > "$tmp/$name.$r.txt"
  done
  echo "round $((r + 1)) of $rounds done" >&2
done

/usr/bin/python3 - "$tmp" "$rounds" "$(git rev-parse --short HEAD 2> /dev/null || echo unknown)" <<'PY'
import json, re, statistics, sys
tmp, rounds, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
peak = json.load(open(f"{tmp}/fma_peak.json"))
GEMM = re.compile(r"micro_kernel|Blocked::run|pack_[ab]_panel|gemm_f32|small_gemm|gemm_bf16")
report = {"commit": commit, "cpu": peak["cpu"], "fma_peak": peak, "rounds": rounds,
          "method": "perf record -e cpu-clock on train_step_bench --threads 1 --steps 100, sampling the timed steps only "
                    "(--perf-control); medians over rounds",
          "models": {}}
print(f"{'model':8} {'tokens/s':>9} {'of peak':>8} {'GEMM share':>11} {'GEMM GFLOP/s':>13} {'ceiling':>8}  largest others")
for name in ("dense", "moe8", "moe64"):
    runs = []
    for r in range(rounds):
        bench = json.load(open(f"{tmp}/{name}.{r}.json"))
        isa = re.search(r"\((\w+)\)$", bench["cpu"]).group(1)  # the GEMM kernels' instruction set
        p = peak["sets"][isa]["best_gflops"] * 1e9
        gemm = total = 0.0
        others = {}
        for line in open(f"{tmp}/{name}.{r}.txt"):
            m = re.match(r"\s*([0-9.]+)%\s+\[[.k]\]\s+(.*\S)", line)
            if not m:
                continue
            share, symbol = float(m.group(1)) / 100, re.sub(r"(\s+-)+$", "", m.group(2))  # perf's empty columns
            total += share
            if GEMM.search(symbol):
                gemm += share
            else:
                # The op a symbol belongs to: "cpu::for_chunks<CpuBackend::binary(...)::{lambda}..."
                # and "for_each_pair<CpuBackend::attention_backward(...)" count as their op.
                key = re.sub(r"\(.*", "", symbol.replace("(anonymous namespace)::", "").replace("moelab::", ""))
                inner = re.search(r"<(\w+::\w+)", key)
                key = inner.group(1) if inner else re.sub(r"<.*", "", key)
                others[key] = others.get(key, 0.0) + share
        gemm /= total
        t, f = bench["median_step_seconds"], bench["model_flops_per_step"]
        other_time = (1 - gemm) * t
        runs.append({"isa": isa, "peak_gflops": p / 1e9, "tokens_per_second": bench["tokens_per_second"],
                     "median_step_seconds": t, "model_flops_per_step": f, "fraction_of_peak": f / p / t,
                     "gemm_share": gemm, "gemm_gflops_at_most": f / (gemm * t) / 1e9,
                     "ceiling_with_gemm_at_peak": (f / p) / (f / p + other_time),
                     "largest_others": {k: v / total for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:6]}})
    med = {k: statistics.median(run[k] for run in runs) for k in
           ("tokens_per_second", "fraction_of_peak", "gemm_share", "gemm_gflops_at_most", "ceiling_with_gemm_at_peak")}
    report["models"][name] = {"median": med, "runs": runs, "config": bench["config"]}
    tops = ", ".join(f"{k} {100 * v:.1f}%" for k, v in list(runs[-1]["largest_others"].items())[:3])
    print(f"{name:8} {med['tokens_per_second']:9.0f} {100 * med['fraction_of_peak']:7.1f}% {100 * med['gemm_share']:10.1f}% "
          f"{med['gemm_gflops_at_most']:13.1f} {100 * med['ceiling_with_gemm_at_peak']:7.1f}%  {tops}")
print(f"peak: {runs[-1]['peak_gflops']:.1f} GFLOP/s ({runs[-1]['isa']}, fma_peak); cpu: {peak['cpu']}; commit {commit}")
with open("bench-results/step_profile.json", "w") as out:
    json.dump(report, out, indent=2)
print("wrote bench-results/step_profile.json")
PY
