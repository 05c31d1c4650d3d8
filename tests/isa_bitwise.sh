#!/usr/bin/env bash
# tests/isa_bitwise.sh BUILD_DIR WORK_DIR [generic] — one binary, every GEMM instruction set this CPU has,
# the same training run bit for bit.
#
# The README promises that the default build gives the same bits on any x86-64-v3 CPU: the AVX2
# and AVX-512 GEMM kernels differ in speed only (and the generic kernels too, when the baseline
# has FMA). tests/test_cpu_isa.cpp checks single products; this checks whole training runs, where
# any difference would grow step by step. It trains the character-level decoder (attention,
# RMSNorm, RoPE, AdamW, gradient clipping: every GEMM path) with each set via MOELAB_CPU_ISA and
# compares the checkpoints byte for byte (weights, optimizer moments, step). The generic kernels
# take part when the third argument says `generic` (CMake passes it when the baseline has FMA).
set -euo pipefail
build=$1
work=$2
mkdir -p "$work"
flags=$(grep -m1 "^flags" /proc/cpuinfo || true)
isas=()
[ "${3:-}" = generic ] && isas+=(generic)
[[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]] && isas+=(avx2)
[[ " $flags " == *" avx512f "* ]] && isas+=(avx512)
for isa in "${isas[@]}"; do
  MOELAB_CPU_ISA=$isa "$build/char_lm" --steps 25 --d 32 --layers 2 --heads 4 --seq 32 --batch 16 --threads 2 \
    --samples 0 --print-every 25 --eval-every 25 --save "$work/char_lm_$isa.safetensors" > "$work/char_lm_$isa.log"
done
status=0
for isa in "${isas[@]:1}"; do
  if cmp -s "$work/char_lm_${isas[0]}.safetensors" "$work/char_lm_$isa.safetensors"; then
    echo "$isa: the same checkpoint as ${isas[0]}, bit for bit"
  else
    echo "$isa: the checkpoint differs from ${isas[0]}'s" >&2
    status=1
  fi
done
[ "${#isas[@]}" -gt 1 ] || echo "only one kernel set (${isas[*]:-none}) to run on this CPU: nothing to compare"
exit $status
