#!/usr/bin/env bash
# test.sh — install what is missing, build, and run every test (ctest), on every instruction set
# this CPU can run.
#
# The default build compiles the engine for x86-64-v3 (AVX2, FMA) and picks the GEMM kernels at
# run time (core/cpu/cpu_features.h). The tests labelled `isa` (kernels, gradchecks, PyTorch
# reference fixtures, determinism) then run up to three times:
#   1. every test, with the kernels this CPU picks (AVX-512 where it exists);
#   2. the `isa` tests with MOELAB_CPU_ISA=avx2: the AVX2 kernels, what an AVX2-only machine runs
#      (only on an AVX-512 CPU; elsewhere run 1 already is that);
#   3. the `isa` tests linked with the CPU kernels compiled for the other x86-64 level (x86-64-v4,
#      i.e. Eigen's AVX-512 code; label alt-isa), where this CPU can run it (elsewhere that copy
#      is not even compiled);
#   4. the `isa` tests on an emulated AVX2-only CPU (qemu-x86_64 -cpu max: AVX2 and FMA, no
#      AVX-512; label emulated-avx2): the default build's own binaries, as an AVX2 machine runs
#      them. qemu-user is installed for this when missing (optional: without it, run 4 is left out).
# GNU parallel, Slurm (slurmctld, slurmd, slurm-client) and munge are installed when missing for the
# scheduler test (tests/scheduler_check.sh); without them it says it was skipped.
# CUDA tests report themselves skipped where no GPU is present. Extra arguments go to every
# ctest call, e.g. ./test.sh -R gradcheck.
set -uo pipefail
cd "$(dirname "$0")"
set -e
source scripts/setup.sh
moelab_install_missing
[ "$(uname -m)" = x86_64 ] && moelab_install_optional qemu-user
# GNU parallel and a single-node Slurm for tests/scheduler_check.sh (docs/jobs.md's recipes).
moelab_install_optional parallel munge slurmctld slurmd slurm-client
flags=$(grep -m1 "^flags" /proc/cpuinfo 2>/dev/null)
has() { [[ " $flags " == *" $1 "* ]]; }
# Run 3's copy of the CPU kernels (x86-64-v4, AVX-512) cannot run on a CPU without AVX-512, so it
# is not compiled there (about a minute and a half of a 2-core build) unless MOELAB_CMAKE_ARGS
# chooses the levels itself.
if [ "$(uname -m)" = x86_64 ] && ! { has avx512f && has avx512bw && has avx512dq && has avx512vl; } &&
   [[ "${MOELAB_CMAKE_ARGS:-}" != *MOELAB_ALT_ISA* && "${MOELAB_CMAKE_ARGS:-}" != *MOELAB_NATIVE* &&
      "${MOELAB_CMAKE_ARGS:-}" != *MOELAB_BASE_ARCH* ]]; then
  export MOELAB_CMAKE_ARGS="${MOELAB_CMAKE_ARGS:-} -DMOELAB_ALT_ISA=OFF"
  alt_off_reason="run 3 (x86-64-v4) not built: this CPU has no AVX-512, so it could not run that code"
fi
moelab_build
set +e

jobs=$(nproc 2>/dev/null || echo 2)
cpu=$(grep -m1 "model name" /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
# The x86-64 level of the alt-isa tests, from their names (test_softmax@x86-64-v4); empty if none.
alt_arch=$(ctest --test-dir build -N -L alt-isa 2>/dev/null | sed -n 's/.*Test *#[0-9]*: [^@]*@//p' | head -n 1)
summary=()
failed=0

# run_pass TITLE [env assignments...] -- ctest arguments...
run_pass() {
  local title=$1 log
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  log=$(mktemp)
  echo "==> $title"
  env "${envs[@]}" ctest --test-dir build --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || failed=1
  summary+=("$title: $(grep -E 'tests passed|No tests were found' "$log" | tail -n 1)")
  rm -f "$log"
}

echo "==> CPU: ${cpu:-unknown}"
run_pass "run 1, every test, kernels chosen for this CPU" -- -LE 'alt-isa|emulated-avx2' "$@"
if has avx512f; then
  run_pass "run 2, instruction-set tests with the AVX2 GEMM kernels (MOELAB_CPU_ISA=avx2)" MOELAB_CPU_ISA=avx2 -- -L '^isa$' "$@"
else
  summary+=("run 2 (AVX2 kernels) not needed: this CPU has no AVX-512, run 1 used AVX2")
fi
if [ -n "${alt_off_reason:-}" ]; then
  summary+=("$alt_off_reason")
elif [ -z "$alt_arch" ]; then
  summary+=("run 3 (other instruction set) not built: not x86-64, or a sanitizer build")
elif [ "$alt_arch" = x86-64-v4 ] && ! { has avx512f && has avx512bw && has avx512dq && has avx512vl; }; then
  summary+=("run 3 ($alt_arch) skipped: this CPU has no AVX-512, so it cannot run that code")
else
  run_pass "run 3, instruction-set tests with the CPU kernels compiled for $alt_arch" -- -L alt-isa "$@"
fi

if ctest --test-dir build -N -L emulated-avx2 2>/dev/null | grep -q "Total Tests: [1-9]"; then
  run_pass "run 4, instruction-set tests on an emulated AVX2 CPU without AVX-512 (qemu-x86_64 -cpu max)" -- -L emulated-avx2 "$@"
else
  summary+=("run 4 (emulated AVX2 CPU) left out: no qemu-x86_64, or a build it does not apply to")
fi

echo
echo "==> summary (CPU: ${cpu:-unknown})"
printf '    %s\n' "${summary[@]}"
exit "$failed"
