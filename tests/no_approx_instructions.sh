#!/usr/bin/env bash
# tests/no_approx_instructions.sh — no approximation instruction anywhere in the built engine.
#
#   bash tests/no_approx_instructions.sh FILE...        (ctest: no_approximation_instructions)
#
# x86 has instructions that return an estimate whose bits the ISA leaves to the vendor: the
# reciprocal and reciprocal-square-root estimates (RCPPS, RSQRTPS and their scalar, AVX-512 "14"
# and "28" and half-precision forms) and AVX-512ER's VEXP2PS. One binary then computes different
# bits on an AMD and an Intel CPU. Eigen's default float sqrt was one (VRSQRTPS + a Newton step):
# the Soft MoE records differed between an AMD Zen 3 and an Intel Xeon until the build set
# EIGEN_FAST_MATH=0 (CMakeLists.txt). This disassembles every FILE (executables, static libraries)
# with objdump and fails naming each function that holds such an instruction.
#
# The check must be able to fail: it first assembles a tiny object holding VRSQRTPS and VRCP14PS
# and requires that both are found (skipped, exit 77, when objdump or as is missing).
set -u
command -v objdump >/dev/null && command -v as >/dev/null || { echo "objdump or as not found: skipped"; exit 77; }
[ $# -ge 1 ] || { echo "usage: $0 FILE..." >&2; exit 2; }

# Mnemonics, as objdump prints them (AT&T syntax, optional v prefix and size suffix).
pattern='^v?(rcp|rsqrt)(14|28)?(ps|ss|pd|sd|ph|sh)[xy]?$|^vexp2p[sd]$'

# find_approx FILE: "function: instruction" lines, one per hit.
find_approx() {
  objdump -d --no-show-raw-insn "$1" 2>/dev/null | awk -v pat="$pattern" '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; sub(/:$/, "", fn); next }
    /^ *[0-9a-f]+:/ {
      sub(/^ *[0-9a-f]+:[ \t]*/, "")
      split($0, w, /[ \t]+/)
      if (w[1] ~ pat) print fn ": " $0
    }'
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '.text\nprobe:\n  vrsqrtps %%ymm0, %%ymm1\n  vrcp14ps %%zmm0, %%zmm1\n  vsqrtps %%ymm0, %%ymm1\n  ret\n' >"$work/probe.s"
as -o "$work/probe.o" "$work/probe.s" || { echo "as could not assemble the probe: skipped"; exit 77; }
probe=$(find_approx "$work/probe.o")
if ! grep -q vrsqrtps <<<"$probe" || ! grep -q vrcp14ps <<<"$probe" || grep -q vsqrtps <<<"$probe"; then
  echo "FAIL: the check itself does not find VRSQRTPS and VRCP14PS (or flags VSQRTPS) in a probe object:"
  echo "$probe"
  exit 1
fi

failed=0
for file in "$@"; do
  [ -f "$file" ] || { echo "FAIL: $file does not exist"; failed=1; continue; }
  hits=$(find_approx "$file")
  if [ -n "$hits" ]; then
    echo "FAIL: $file holds approximation instructions (vendor-specific bits):"
    sort -u <<<"$hits" | head -n 40
    failed=1
  else
    echo "ok: $file ($(objdump -d "$file" 2>/dev/null | grep -c '^ *[0-9a-f]*:') instructions, no rcp/rsqrt/exp2 estimate)"
  fi
done
exit "$failed"
