#!/usr/bin/env bash
# scripts/rebuild_cost.sh — how many object files recompile when a set of source files changes,
# read from the compiler's dependency files in a build folder (BUILD/**/*.o.d: a Makefile build
# writes one per object, listing every header the object's source included).
#
#   scripts/rebuild_cost.sh [BUILD [MAX]]          the files that adding a unary op edits
#   FILES="core/tensor.h" scripts/rebuild_cost.sh   any other set (paths from the repository root)
#
# Adding a unary elementwise op edits six files (core/kernels/elementwise_ops.h says which); this
# prints, for each, the objects that depend on it, then the union: the objects `cmake --build`
# recompiles. Exit 1 when the union passes MAX (default 25, what ctest uses), 77 when BUILD has no dependency files
# (a Ninja build keeps them elsewhere; ctest reports that as skipped).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
max=${2:-25}
files=(${FILES:-core/kernels/elementwise_ops.h autograd/ops_unary.h core/cpu/elementwise.cpp cuda/elementwise.cu
  autograd/ops_elementwise.cpp tests/unary_reference.h})
# One per object: BUILD/CMakeFiles/TARGET.dir/SOURCE.o.d. Objects whose source is gone (a file
# moved since this folder was configured) are left out.
deps=()
while IFS= read -r d; do
  source=${d#*/CMakeFiles/*.dir/}
  [[ -e $root/${source%.o.d} ]] && deps+=("$d")
done < <(find "$build" -name '*.o.d' 2>/dev/null | sort)
if [[ ${#deps[@]} == 0 ]]; then
  echo "rebuild_cost: no dependency files (*.o.d) under $build: build it with the Makefile generator first"
  exit 77
fi
declare -A hit=()
for f in "${files[@]}"; do
  n=0
  # A dependency file names each input by absolute path, once per line (after "object.o: ").
  while IFS= read -r d; do
    hit[$d]=1
    n=$((n + 1))
  done < <(grep -lF "$root/$f" "${deps[@]}" || true)
  printf '%-40s %4d objects\n' "$f" "$n"
done
printf '%-40s %4d of %d objects\n' "union (what recompiles)" "${#hit[@]}" "${#deps[@]}"
for d in "${!hit[@]}"; do echo "  ${d#"$build"/}"; done | sed 's|CMakeFiles/||; s|\.o\.d$||' | sort
if (( ${#hit[@]} > max )); then
  echo "rebuild_cost: ${#hit[@]} objects recompile, more than $max: a widely included header names one of these files"
  exit 1
fi
