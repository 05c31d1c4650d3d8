#!/usr/bin/env bash
# scripts/rebuild_cost.sh — how many object files recompile when a set of source files changes,
# read from the compiler's dependency files in a build folder (every header each object's source
# included; Makefile and Ninja builds alike).
#
#   scripts/rebuild_cost.sh [BUILD [MAX]]          the files that adding a unary op edits
#   FILES="core/tensor.h" scripts/rebuild_cost.sh   any other set (paths from the repository root)
#
# Adding a unary elementwise op edits six files (core/kernels/elementwise_ops.h says which); this
# prints, for each, the objects that depend on it, then the union: the objects `cmake --build`
# recompiles. Exit 1 when the union passes MAX (default 25, what ctest uses), 77 when BUILD has no
# dependency information yet (ctest reports that as skipped).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
max=${2:-25}
files=(${FILES:-core/kernels/elementwise_ops.h autograd/ops_unary.h core/cpu/elementwise.cpp cuda/elementwise.cu
  autograd/ops_elementwise.cpp tests/unary_reference.h})
# "<object> <input>" for every input of every object, from the compiler's dependency files: a
# Makefile build keeps one per object (BUILD/CMakeFiles/TARGET.dir/SOURCE.o.d, "object.o: input
# input \" lines), a Ninja build keeps them all in BUILD/.ninja_deps (read with `ninja -t deps`).
# Objects are named CMakeFiles/TARGET.dir/SOURCE.o, inputs by absolute path.
dependency_pairs() {
  if [[ -f $build/.ninja_deps ]]; then
    ninja -C "$build" -t deps | awk '/^[^ \t]/ {object = $1; sub(/:$/, "", object); next} NF {print object, $1}'
  elif [[ -d $build/CMakeFiles ]]; then
    (cd "$build" && find CMakeFiles -name '*.o.d' -exec awk '
      FNR == 1 {object = FILENAME; sub(/\.d$/, "", object)}
      {for (i = 1; i <= NF; i++) if ($i != "\\" && $i !~ /:$/) print object, $i}' {} +)
  fi
}
all_pairs=$(dependency_pairs)
# Objects whose source is gone (a file moved since this folder was configured) and the precompiled
# headers (cmake_pch.hxx.gch, whose "source" is in the build folder) are left out.
kept=$(cut -d' ' -f1 <<<"$all_pairs" | sort -u | while IFS= read -r object; do
  [[ -n $object ]] || continue
  source=${object#CMakeFiles/*.dir/}
  if [[ -e $root/${source%.o} ]]; then echo "$object"; fi
done)
if [[ -z $kept ]]; then
  echo "rebuild_cost: no dependency information under $build: build it first"
  exit 77
fi
pairs=$(awk 'NR == FNR {keep[$1] = 1; next} keep[$1]' <(echo "$kept") <(echo "$all_pairs"))
total=$(wc -l <<<"$kept")
declare -A hit=()
for f in "${files[@]}"; do
  n=0
  while IFS= read -r object; do
    [[ -n $object ]] || continue
    hit[$object]=1
    n=$((n + 1))
  done < <(awk -v input="$root/$f" '$2 == input {print $1}' <<<"$pairs" | sort -u)
  printf '%-40s %4d objects\n' "$f" "$n"
done
printf '%-40s %4d of %d objects\n' "union (what recompiles)" "${#hit[@]}" "$total"
for d in "${!hit[@]}"; do echo "  $d"; done | sed 's|CMakeFiles/||; s|\.o\(\.d\)\{0,1\}$||' | sort
if (( ${#hit[@]} > max )); then
  echo "rebuild_cost: ${#hit[@]} objects recompile, more than $max: a widely included header names one of these files"
  exit 1
fi
