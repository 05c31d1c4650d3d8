#!/usr/bin/env bash
# scripts/gpu-check.sh — what the CUDA issue asks to see on a GPU, in stages sized for a borrowed
# GPU machine (nvcc, CMake, g++ and PyTorch, but no Debian packages: run scripts/device-kit.sh here
# first and carry .device/kit along; carry data/mnist too for the `paper` stage).
#
#   scripts/gpu-check.sh STAGE...     the stages in the order given, e.g. `build test sync sanitize demo`
#
#   build     configure with CUDA against the kit (no alt-isa copy: the GPU machine runs the GPU
#             checks), build everything into build-gpu/ (kept while the machine stays warm);
#             BUILD_TARGETS="a b ...": those targets only (e.g. "moelab_cli train_step_bench" and the
#             test_cuda_* programs, for a short loan)
#   test      the whole ctest suite (TEST_FILTER=REGEX: those tests only) with MOELAB_REQUIRE_CUDA=1:
#             a GPU test that would skip fails;
#             then the grouped-product parity cases again with each other tile shape
#             (MOELAB_GROUPED_TILE=64, =128d and =128,64: cuda/grouped_matmul.cu)
#   sync      the GPU tests again with MOELAB_CUDA_SYNC=1 (a check after every launch)
#   sanitize  compute-sanitizer memcheck on every GPU test, racecheck on the cases whose kernels use
#             shared memory, both again on the grouped products with each tile in SANITIZE_TILES
#             (default 128d) (refused on some machines: the stage then says so)
#   demo      moelab phonebook --preset demo on the GPU (DEMO_CPU=1: on the CPU too)
#   l2norm    moelab softmoe-l2norm --preset cpu on the GPU
#   mma       the 8-expert step in tf32, tf32x3 and bf16 (the expert products on the tensor cores:
#             cuda/mma_tile_gemm.cuh), one run each
#   bench     bench/compare_gpu.sh: the three GPU-scale models, moelab vs PyTorch (the columns of
#             COLUMNS_RUN, default all: fp32, tf32, bf16; eager and compiled; three MoE codes);
#             cut at the deadline, it summarises the runs that finished
#   tuned     bench/pytorch/check_tuned_model.py on this machine's PyTorch: the benchmark's PyTorch
#             model (SDPA, fused AdamW, grouped_mm where present) is the function moelab is tested
#             against
#   stepsan   compute-sanitizer memcheck on train_step_bench --steps 2 at the GPU preset's sizes
#             (8 and 64 experts; float32, then tf32 and bf16 on 8 experts: the tensor-core tiles)
#   mnist     moelab softmoe-mnist --preset paper --device cuda, the whole grid, MNIST from
#             .device/mnist (carry it: the four IDX files, gzipped; scripts/device-kit.sh)
#   tiles     the two MoE models' step with each grouped-product setting (MOELAB_GROUPED_TILE,
#             MOELAB_GROUPED_SPLIT) and once with MOELAB_CUDA_GENERIC=1; tilebench: bench with the
#             fastest of them
#   profile   ncu: GPU time per kernel name over a 2-layer moe-8e step (ncu-kernels.csv)
#   paper     one grid point of each paper preset on the GPU, a few dozen steps: time per step
#
# Everything is written under runs/gpu-check/ (git-ignored). When $OUT is set (the device tool's
# folder that comes back: at most 8 files) two files are written there as each stage ends:
# summary.txt (one line per stage) and gpu-check.tgz (each stage's log and result files). The
# last lines printed are the summary table. DEADLINE=N (seconds) makes the sanitizer and paper
# stages stop starting runs that would pass it, so a call's limit cuts nothing mid-file;
# SANITIZE_BUDGET=N caps the sanitizer stage alone, BENCH_BUDGET=N the bench stage.
set -uo pipefail
cd "$(dirname "$0")/.."
out=runs/gpu-check
kit=$PWD/.device/kit
build=${GPU_BUILD:-build-gpu}  # GPU_BUILD: another build folder (a dry run of the script elsewhere)
jobs=$(nproc)
export PATH=$PATH:/usr/local/cuda/bin  # nvcc, compute-sanitizer
mkdir -p "$out"
keep() {  # keep FILE [NAME]: one of the files that come back (runs/gpu-check/keep/, packed into $OUT)
  mkdir -p "$out/keep"
  [[ -f $1 ]] && cp "$1" "$out/keep/${2:-$(basename "$1")}"
  return 0
}
pack() {  # $OUT/summary.txt and $OUT/gpu-check.tgz (the kept files): the tool returns at most 8 files
  [[ -n ${OUT:-} ]] || return 0
  cp "$out/summary.txt" "$OUT/summary.txt" 2>/dev/null
  tar czf "$OUT/gpu-check.tgz" -C "$out" keep 2>/dev/null
  return 0
}
note() {  # note STAGE RESULT SECONDS: one summary line
  printf '%-9s %-60s %5ss\n' "$1" "$2" "$3" >> "$out/summary.txt"
  keep "$out/summary.txt"
  pack
}
# The seconds left before DEADLINE (the environment's, in seconds of this script's run; default a day).
left() { echo $(( ${DEADLINE:-86400} - SECONDS )); }

stage_build() {
  [[ -d $kit ]] || { echo "$kit is missing: run scripts/device-kit.sh and carry .device/kit"; return 1; }
  { nvidia-smi; nvcc --version; g++ --version | head -1; cmake --version | head -1; lscpu | grep -E "Model name|^CPU\(s\)"; } \
    > "$out/machine.txt" 2>&1
  keep "$out/machine.txt"
  cmake -S . -B "$build" -DMOELAB_CUDA=ON -DMOELAB_ALT_ISA=OFF -DCMAKE_PREFIX_PATH="$kit" -DZLIB_ROOT="$kit" \
    > "$out/build.log" 2>&1 || { keep "$out/build.log"; tail -30 "$out/build.log"; echo "configure FAILED"; return 1; }
  local targets=()
  [[ -n ${BUILD_TARGETS:-} ]] && read -r -a targets <<< "$BUILD_TARGETS"
  cmake --build "$build" -j "$jobs" ${targets[@]+--target "${targets[@]}"} >> "$out/build.log" 2>&1 ||
    { keep "$out/build.log"; grep -E "error" -A5 "$out/build.log" | head -60; echo "build FAILED"; return 1; }
  grep -E "warning" "$out/build.log" | head -20
  echo "ok, $(grep -c 'warning' "$out/build.log") warning lines"
}

# The result line of a ctest log: "ok, N tests" or what failed / was skipped.
ctest_verdict() {
  local log=$1 rc=$2 skipped
  skipped=$(grep -E "\*\*\*Skipped|Not Run" "$log" | grep -oE "test_cuda_[a-z_0-9]+|[a-z_0-9@-]+ \.+" | tr -d ' .' | tr '\n' ' ')
  if [[ $rc != 0 ]]; then
    echo "FAILED: $(grep -E '^[[:space:]]+[0-9]+ - ' "$log" | sed -E 's/^[[:space:]]+[0-9]+ - //' | tr '\n' ' ')"
  else
    echo "ok, $(grep -oE '[0-9]+% tests passed.*' "$log" | head -1)${skipped:+; skipped: $skipped}"
  fi
}

stage_test() {
  MOELAB_REQUIRE_CUDA=1 MOELAB_FASHION_MNIST="$kit/fashion-mnist" \
    ctest --test-dir "$build" -j "$jobs" --timeout 300 --output-on-failure ${TEST_FILTER:+-R "$TEST_FILTER"} \
    > "$out/ctest.log" 2>&1
  local rc=$?
  keep "$out/ctest.log"
  grep -h "test_cuda_[a-z_0-9]*: on " "$build"/Testing/Temporary/LastTest.log | head -1
  local tile
  for tile in 64 128d 128,64; do
    MOELAB_REQUIRE_CUDA=1 MOELAB_GROUPED_TILE=$tile "$build/test_cuda_parity" -tc='*grouped*' \
      > "$out/parity-tile-$tile.log" 2>&1 || { rc=1; echo "grouped parity with MOELAB_GROUPED_TILE=$tile FAILED"; }
    keep "$out/parity-tile-$tile.log"
    grep -E "^\[doctest\] test cases" "$out/parity-tile-$tile.log" | sed "s/^/tile $tile: /"
  done
  ctest_verdict "$out/ctest.log" $rc
  return $rc
}

stage_sync() {
  MOELAB_CUDA_SYNC=1 MOELAB_REQUIRE_CUDA=1 ctest --test-dir "$build" -j 4 --timeout 300 --output-on-failure \
    -R "cuda|test_tensor|test_module_to" > "$out/sync.log" 2>&1
  local rc=$?
  keep "$out/sync.log"
  ctest_verdict "$out/sync.log" $rc
  return $rc
}

stage_sanitize() {
  local log=$out/sanitizer.log rc=0 t limit stop=$((SECONDS + ${SANITIZE_BUDGET:-100000}))
  : > "$log"
  # run_sanitized LABEL COMMAND...: within what is left of the deadline and of SANITIZE_BUDGET
  # (seconds for the whole stage), at most 150 s each
  run_sanitized() {
    local label=$1
    shift
    limit=$(left); (( limit > stop - SECONDS )) && limit=$((stop - SECONDS)); (( limit > 150 )) && limit=150
    if (( limit < 20 )); then echo "== $label: not run (deadline)" >> "$log"; rc=1; return; fi
    echo "== $label" >> "$log"
    timeout "$limit" compute-sanitizer "$@" >> "$log" 2>&1 || { echo "   exit $? (limit ${limit} s)" >> "$log"; rc=1; }
  }
  for t in "$build"/test_cuda_*; do
    run_sanitized "memcheck $(basename "$t")" --tool memcheck --error-exitcode 9 --print-limit 20 "$t"
  done
  # Racecheck: the cases whose kernels share memory (grouped products, reductions, softmax,
  # cross-entropy, sorts and top-k, routing).
  local cases='*grouped_matmul*,*sum*,*softmax*,*cross_entropy*,*topk*,*argsort*,*group_by_expert*'
  for t in "$build"/test_cuda_parity "$build"/test_cuda_parity_2; do
    run_sanitized "racecheck $(basename "$t")" --tool racecheck --racecheck-report all --error-exitcode 9 "$t" -tc="$cases"
  done
  # The grouped products' other float32 tiles (the runs above use the default one).
  local tile
  for tile in ${SANITIZE_TILES:-128d}; do
    MOELAB_GROUPED_TILE=$tile run_sanitized "memcheck grouped, MOELAB_GROUPED_TILE=$tile" --tool memcheck \
      --error-exitcode 9 --print-limit 20 "$build/test_cuda_parity" -tc='*grouped*'
    MOELAB_GROUPED_TILE=$tile run_sanitized "racecheck grouped, MOELAB_GROUPED_TILE=$tile" --tool racecheck \
      --racecheck-report all --error-exitcode 9 "$build/test_cuda_parity" -tc='*grouped*'
  done
  sanitizer_verdict "$log" $rc 24
}

# sanitizer_verdict LOG RC LINES: keeps LOG, prints its run headers and summaries (at most LINES)
# and the stage's result line; returns RC.
sanitizer_verdict() {
  keep "$1"
  grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|not supported|exit [0-9]+" "$1" | head -"$3"
  [[ $2 == 0 ]] && echo "ok: $(grep -c 'ERROR SUMMARY: 0 errors' "$1") memcheck runs clean" ||
    echo "FAILED, refused or cut short (see $(basename "$1"))"
  return "$2"
}

# timed SECONDS_VAR COMMAND...: runs COMMAND, puts its wall time in seconds into SECONDS_VAR
timed() {
  local -n elapsed=$1
  shift
  local start=$SECONDS
  "$@"
  local rc=$?
  elapsed=$((SECONDS - start))
  return $rc
}

# The GPU run of the demo; the CPU record it is compared with is docs/results/phonebook-demo
# (DEMO_CPU=1 runs the CPU here too, on every core).
stage_demo() {
  local rc=0 device devices=(cuda) took
  [[ ${DEMO_CPU:-0} == 1 ]] && devices+=(cpu)
  for device in "${devices[@]}"; do
    rm -rf "$out/demo-$device"
    timed took timeout 240 "$build/moelab" phonebook --preset demo --device "$device" --threads "$jobs" \
      --out "$out/demo-$device" > "$out/demo-$device.log" 2>&1 || { echo "--device $device FAILED"; rc=1; }
    echo "demo --device $device: $took s"
    keep "$out/demo-$device/summary.md" "demo-$device.md"
    keep "$out/demo-$device/results.csv" "demo-$device.csv"
    keep "$out/demo-$device/config.json" "demo-$device.json"
    sed -n '/^| model/,/^$/p' "$out/demo-$device/summary.md" 2>/dev/null | head -12
  done
  [[ $rc == 0 ]] && echo "ok ($took s)"
  return $rc
}

stage_l2norm() {
  local took
  rm -rf "$out/l2norm-cuda"
  timed took timeout 200 "$build/moelab" softmoe-l2norm --preset cpu --device cuda --out "$out/l2norm-cuda" \
    > "$out/l2norm-cuda.log" 2>&1
  local rc=$?
  keep "$out/l2norm-cuda/summary.md" "l2norm-cuda.md"
  keep "$out/l2norm-cuda/results.csv" "l2norm-cuda.csv"
  keep "$out/l2norm-cuda/config.json" "l2norm-cuda.json"
  grep -A3 "^## Verdict" "$out/l2norm-cuda/summary.md" 2>/dev/null
  [[ $rc == 0 ]] && echo "ok ($took s)" || echo "FAILED (see l2norm-cuda.log)"
  return $rc
}

stage_bench() {
  local limit
  limit=$(left); (( limit > ${BENCH_BUDGET:-100000} )) && limit=$BENCH_BUDGET
  (( limit < 60 )) && { echo "not run (deadline)"; return 1; }
  timeout "$limit" env MOELAB_BUILD=$build PYTHON=${PYTHON:-python3} COMPILE_TIMEOUT=${COMPILE_TIMEOUT:-90} bench/compare_gpu.sh --steps 20 \
    > "$out/bench.log" 2>&1
  local rc=$?
  if [[ $rc == 124 ]]; then  # cut at the deadline: the summary of the runs that finished
    echo "cut at the deadline; the summary of what finished:" >> "$out/bench.log"
    SUMMARY_ONLY=1 MOELAB_BUILD=$build PYTHON=${PYTHON:-python3} bench/compare_gpu.sh >> "$out/bench.log" 2>&1
  fi
  keep "$out/bench.log"
  local f
  for f in bench-results/gpu_*.json; do keep "$f"; done
  tail -8 "$out/bench.log"
  [[ $rc == 0 ]] && echo "ok" || echo "FAILED (rc $rc)"
  return $rc
}

# The 8-expert step with the expert products on the tensor cores, in each of their precisions.
stage_mma() {
  local log=$out/mma.log rc=0 precision name tps
  : > "$log"
  printf '%-8s %12s\n' precision tokens/s
  for precision in tf32 bf16 tf32x3; do
    (( $(left) < 30 )) && { echo "$precision: not run (deadline)"; rc=1; continue; }
    name=$out/mma-$precision.json
    timeout 60 "$build/train_step_bench" --device cuda --preset gpu --experts 8 --k 2 --steps 20 \
      --precision $precision --out "$name" >> "$log" 2>&1 || { rc=1; echo "$precision FAILED"; }
    tps=$(grep -oE '"tokens_per_second": *[0-9.]+' "$name" 2>/dev/null | grep -oE '[0-9.]+$')
    printf '%-8s %12.0f\n' "$precision" "${tps:-0}"
    keep "$name"
  done
  keep "$log"
  [[ $rc == 0 ]] && echo "ok" || echo "FAILED or cut (see mma.log)"
  return $rc
}

stage_tuned() {
  timeout 120 "${PYTHON:-python3}" bench/pytorch/check_tuned_model.py > "$out/tuned.log" 2>&1
  local rc=$?
  keep "$out/tuned.log"
  grep -E "^(ok|skipped|FAIL|MISMATCH)" "$out/tuned.log" | cut -c1-150
  [[ $rc == 0 ]] && echo "ok" || echo "FAILED (rc $rc; see tuned.log)"
  return $rc
}

# compute-sanitizer memcheck on two training steps (after the program's 5 warm-up steps) at the
# benchmark's sizes: the split weight gradient's scratch buffer, groups of thousands of rows.
stage_stepsan() {
  local log=$out/stepsan.log rc=0 limit args
  : > "$log"
  for args in "--experts 8 --k 2" "--experts 64 --k 2" "--experts 8 --k 2 --precision tf32" \
      "--experts 8 --k 2 --precision bf16"; do
    limit=$(left); (( limit > 150 )) && limit=150
    (( limit < 30 )) && { echo "== $args: not run (deadline)" >> "$log"; rc=1; continue; }
    echo "== memcheck train_step_bench $args" >> "$log"
    # shellcheck disable=SC2086  # $args: several options
    timeout "$limit" compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 "$build/train_step_bench" \
      --device cuda --preset gpu $args --steps 2 --out "$out/stepsan.json" >> "$log" 2>&1 ||
      { echo "   exit $? (limit ${limit} s)" >> "$log"; rc=1; }
  done
  sanitizer_verdict "$log" $rc 16
}

# The implicit-bias paper's whole MNIST grid on the GPU (docs/EXPERIMENTS.md: under 2 minutes of
# steps estimated); what finished is kept whatever happens.
stage_mnist() {
  local limit took dir=$out/softmoe-mnist-paper
  limit=$(left); (( limit > ${MNIST_TIMEOUT:-400} )) && limit=${MNIST_TIMEOUT:-400}
  (( limit < 60 )) && { echo "not run (deadline)"; return 1; }
  [[ -d .device/mnist ]] || { echo ".device/mnist is missing: run scripts/device-kit.sh and carry it"; return 1; }
  rm -rf "$dir"
  timed took timeout "$limit" "$build/moelab" softmoe-mnist --preset paper --device cuda --set data_dir=.device/mnist \
    --out "$dir" > "$out/mnist.log" 2>&1
  local rc=$?
  keep "$out/mnist.log"
  # (not the checkpoints: with them the archive passed the 16 MB a file the device tool returns)
  tar czf "$out/keep/softmoe-mnist-paper.tgz" --exclude=checkpoints -C "$out" softmoe-mnist-paper 2>/dev/null
  grep -E "trained|Verdict|holds|differs|contradicts|rror" "$out/mnist.log" | tail -8 | cut -c1-160
  [[ $rc == 0 ]] && echo "ok ($took s)" || echo "FAILED or cut at $limit s (rc $rc; see mnist.log)"
  return $rc
}

# The MoE models' step (train_step_bench --preset gpu) with each grouped-product setting:
# TILE[/SPLIT][+g] = MOELAB_GROUPED_TILE (64, 128, 128v, 128d, or FORWARD,WEIGHT_GRAD), optionally
# MOELAB_GROUPED_SPLIT (1: the weight gradient's rows are not split) and +g: MOELAB_CUDA_GENERIC=1
# (the general softmax and permute kernels, cuda/context.h); TILES overrides the list.
# The fastest setting on the 8-expert model is written to tiles-best.txt (used by tilebench).
stage_tiles() {
  local log=$out/tiles.log rc=0 model setting tile split tps best=none best_tps=0
  : > "$log"
  local settings=(${TILES:-128v 128d 128v,128d 128d,128v 128v+g}) generic name
  printf '%-8s %-14s %12s\n' model setting tokens/s
  for model in 8 64; do
    for setting in "${settings[@]}"; do
      generic=0
      [[ $setting == *+g ]] && generic=1
      tile=${setting%+g}
      tile=${tile%%/*}
      split=8
      [[ ${setting%+g} == */* ]] && split=${setting#*/} && split=${split%+g}
      name=$out/tiles-$model-$(echo "$setting" | tr '/+' 'sp').json
      MOELAB_CUDA_GENERIC=$generic MOELAB_GROUPED_TILE=$tile MOELAB_GROUPED_SPLIT=$split timeout 120 \
        "$build/train_step_bench" --device cuda --preset gpu --experts $model --k 2 --steps 20 --out "$name" >> "$log" 2>&1 ||
        { rc=1; echo "$model $setting FAILED"; }
      tps=$(grep -oE '"tokens_per_second": *[0-9.]+' "$name" 2>/dev/null | grep -oE '[0-9.]+$')
      printf '%-8s %-14s %12.0f\n' "${model}e" "$setting" "${tps:-0}"
      keep "$name"
      if [[ $model == 8 && -n $tps && $generic == 0 ]] && awk -v a="$tps" -v b="$best_tps" 'BEGIN { exit !(a > b) }'; then
        best=$setting
        best_tps=$tps
      fi
    done
  done
  echo "$best" > "$out/tiles-best.txt"
  keep "$log"
  [[ $rc == 0 ]] && echo "ok, fastest on 8 experts: $best" || echo "FAILED (see tiles.log)"
  return $rc
}

# bench with the grouped-product setting that tiles found fastest (tiles-best.txt).
stage_tilebench() {
  local setting
  setting=$(cat "$out/tiles-best.txt" 2>/dev/null)
  [[ -n $setting && $setting != none ]] || { echo "no tiles-best.txt: run the tiles stage first"; return 1; }
  local split=8
  [[ $setting == */* ]] && split=${setting#*/}
  echo "MOELAB_GROUPED_TILE=${setting%%/*} MOELAB_GROUPED_SPLIT=$split"
  MOELAB_GROUPED_TILE=${setting%%/*} MOELAB_GROUPED_SPLIT=$split stage_bench
}

# GPU time per kernel name: ncu over every launch of a 2-layer moe-8e step at the GPU preset's
# sizes (5 warm-up steps and 1 timed: each kernel is replayed once to time it, so this is slow).
stage_profile() {
  local limit
  limit=$(left); (( limit > 200 )) && limit=200
  (( limit < 30 )) && { echo "not run (deadline)"; return 1; }
  timeout "$limit" ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-summary per-kernel \
    "$build/train_step_bench" --device cuda --preset gpu --experts 8 --k 2 --layers 2 --steps 1 \
    --out "$out/profile.json" > "$out/ncu-kernels.csv" 2> "$out/ncu.err"
  local rc=$?
  keep "$out/ncu-kernels.csv"
  keep "$out/ncu.err"
  tail -3 "$out/ncu.err"
  [[ $rc == 0 ]] && echo "ok ($(wc -l < "$out/ncu-kernels.csv") lines)" || echo "FAILED or cut (rc $rc)"
  return $rc
}

# One point of each paper preset, the largest model, a few dozen steps; the time per step is read
# from the progress line "trained N steps in M:SS".
stage_paper() {
  local log=$out/paper.log rc=0
  : > "$log"
  run_point() {  # run_point NAME ARGS...
    local name=$1
    shift
    echo "== $name: moelab $*" >> "$log"
    local limit
    limit=$(left); (( limit > ${PAPER_TIMEOUT:-60} )) && limit=${PAPER_TIMEOUT:-60}
    (( limit < 15 )) && { echo "   not run (deadline)" >> "$log"; rc=1; return; }
    timeout "$limit" "$build/moelab" "$@" --device cuda --out "$out/paper-$name" --set mode=point >> "$log" 2>&1 ||
      { echo "   exit $?" >> "$log"; rc=1; }
  }
  run_point phonebook phonebook --preset paper --set point=moe-d512-64e-N3000000-seed0 --set epochs=0 \
    --set steps=40 --set eval_every=1000000 --set test_names=200 --set lrs=0.001
  run_point phonebook-dense phonebook --preset paper --set point=dense-d1024-N3000000-seed0 --set epochs=0 \
    --set steps=40 --set eval_every=1000000 --set test_names=200 --set lrs=0.001
  run_point shortest-path shortest-path --preset paper --set point=moe-d512-64e-seed0 --set steps=40 \
    --set eval_every=1000000
  run_point teacher-student teacher-student --preset fig2 --set point=t32e16a-s32e16a-seed0 --set epochs=1 \
    --set samples_per_epoch=81920 --set lrs=0.001
  run_point softmoe-mnist softmoe-mnist --preset paper --set point=n512-seed0 --set steps=100 --set eval_every=1000000
  keep "$log"
  grep -E "^== |trained [0-9]+ steps|exit [0-9]+|rror" "$log" | cut -c1-200
  [[ $rc == 0 ]] && echo "ok" || echo "some points FAILED (see paper.log)"
  return $rc
}

[[ $# -gt 0 ]] || { sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2; }
for stage in "$@"; do
  declare -F "stage_$stage" > /dev/null || { echo "gpu-check: unknown stage '$stage'"; sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2; }
done
status=0
for stage in "$@"; do
  echo "======== $stage"
  start=$SECONDS
  "stage_$stage" > "$out/stage-$stage.txt" 2>&1
  rc=$?
  cat "$out/stage-$stage.txt"
  note "$stage" "$(tail -1 "$out/stage-$stage.txt" | cut -c1-60)" $((SECONDS - start))
  if [[ $rc != 0 ]]; then
    status=1
    [[ $stage == build ]] && break  # nothing else can run
  fi
done
echo "======== summary"
cat "$out/summary.txt"
exit $status
