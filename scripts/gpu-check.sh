#!/usr/bin/env bash
# scripts/gpu-check.sh — what the CUDA issue asks to see on a GPU, in stages that each fit in one
# 10-minute command on a borrowed GPU machine (nvcc, CMake, g++ and PyTorch, but no Debian
# packages: run scripts/device-kit.sh here first and carry .device/kit along).
#
#   scripts/gpu-check.sh build     configure with CUDA against the kit, build everything (build-gpu/)
#   scripts/gpu-check.sh test      the whole ctest suite, CUDA tests included (none may be Skipped)
#   scripts/gpu-check.sh demo      moelab phonebook --preset demo on the GPU, then on the CPU, tables side by side
#   scripts/gpu-check.sh bench     bench/compare_gpu.sh: the three GPU-scale models, moelab vs PyTorch eager
#   scripts/gpu-check.sh all       the four in order (about 15-25 minutes: split it across calls)
#
# Everything is written under runs/gpu-check/ (git-ignored); when $OUT is set (the device tool's
# folder that comes back, at most 8 files) each stage also copies its few essential files there:
# build.log, ctest.log, demo-cuda.md + demo-cpu.md, bench.log + gpu_comparison.json. Every stage
# prints its verdict line last. The build folder stays on the machine between calls while it is
# warm, so `build` runs once per machine.
set -uo pipefail
cd "$(dirname "$0")/.."
out=runs/gpu-check
kit=$PWD/.device/kit
build=build-gpu
mkdir -p "$out"
keep() {  # keep FILE [NAME]: copy into $OUT when the device tool set it
  [[ -n ${OUT:-} && -f $1 ]] && cp "$1" "$OUT/${2:-$(basename "$1")}"
  return 0
}

stage_build() {
  [[ -d $kit ]] || { echo "gpu-check: $kit is missing: run scripts/device-kit.sh and carry .device/kit" >&2; return 1; }
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "gpu-check: nvidia-smi failed (see $out/nvidia-smi.txt)"
  cmake -S . -B "$build" -DMOELAB_CUDA=ON -DCMAKE_PREFIX_PATH="$kit" -DZLIB_ROOT="$kit" > "$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; echo "gpu-check build: configure FAILED"; return 1; }
  cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 ||
    { keep "$out/build.log"; grep -E "error" -A5 "$out/build.log" | head -60; echo "gpu-check build: FAILED"; return 1; }
  keep "$out/build.log"
  echo "gpu-check build: ok ($build)"
}

stage_test() {
  MOELAB_FASHION_MNIST="$kit/fashion-mnist" ctest --test-dir "$build" -j 8 --output-on-failure > "$out/ctest.log" 2>&1
  local rc=$?
  keep "$out/ctest.log"
  tail -25 "$out/ctest.log"
  if grep -q "Skipped" "$out/ctest.log"; then
    echo "gpu-check test: some tests were SKIPPED on a GPU machine (see $out/ctest.log)"; return 1
  fi
  [[ $rc == 0 ]] && echo "gpu-check test: ok, every test passed, CUDA included" || echo "gpu-check test: FAILED (rc $rc)"
  return $rc
}

stage_demo() {
  local rc=0
  for device in cuda cpu; do
    "$build/moelab" phonebook --preset demo --device "$device" --threads "$(nproc)" --out "$out/demo-$device" \
      > "$out/demo-$device.log" 2>&1 || { echo "gpu-check demo: --device $device FAILED (see $out/demo-$device.log)"; rc=1; }
  done
  for device in cuda cpu; do
    echo "== $device"; sed -n '/^| model/,/^$/p' "$out/demo-$device/summary.md" 2>/dev/null
    keep "$out/demo-$device/summary.md" "demo-$device.md"
  done
  [[ $rc == 0 ]] && echo "gpu-check demo: ok (compare the two tables above)"
  return $rc
}

stage_bench() {
  MOELAB_BUILD=$build PYTHON=${PYTHON:-python3} bench/compare_gpu.sh > "$out/bench.log" 2>&1
  local rc=$?
  cp bench-results/gpu_*.json "$out/" 2>/dev/null
  keep "$out/bench.log"
  keep bench-results/gpu_comparison.json
  tail -20 "$out/bench.log"
  [[ $rc == 0 ]] && echo "gpu-check bench: ok" || echo "gpu-check bench: FAILED (rc $rc)"
  return $rc
}

case "${1:-}" in
  build) stage_build ;;
  test) stage_test ;;
  demo) stage_demo ;;
  bench) stage_bench ;;
  all) stage_build && stage_test; stage_demo; stage_bench ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
