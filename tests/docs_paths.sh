#!/usr/bin/env bash
# tests/docs_paths.sh — every repository path the documentation names must exist. Markdown links
# are checked by tests/docs_links.sh; this checks the paths written as text or code, such as
# `nn/moe/router_toolkit.h` or examples/trace_gradients.h, which go stale silently when a file
# moves. Run by ctest as docs_paths:
#   bash tests/docs_paths.sh SOURCE_DIR
#
# Scanned: README.md, docs/*.md and every folder's README.md. A path is a word that starts with
# one of the top-level folders (core/ autograd/ nn/ cuda/ tasks/ examples/ tests/ scripts/ bench/
# docs/ .ci/) and ends in a source or text suffix (.h .cpp .cu .cuh .sh .py .md .cmake .txt .json
# .csv); it must name a file of the tree. Paths under a run folder (runs/, build/) are not
# repository files and are not matched. The check first runs on a scratch folder with one stale
# path planted, so a checker that finds nothing fails instead of passing.
set -u
export LC_ALL=C

pattern='(^|[^A-Za-z0-9_./-])((core|autograd|nn|cuda|tasks|examples|tests|scripts|bench|docs|\.ci)/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(h|cpp|cu|cuh|sh|py|md|cmake|txt|json|csv))'

# check ROOT: prints "FILE: PATH" for each named path missing under ROOT; returns their count.
check() {
  local root=$1 missing=0 doc path
  while IFS= read -r doc; do
    while IFS= read -r path; do
      [ -e "$root/$path" ] && continue
      echo "docs_paths: $doc names $path, which does not exist" >&2
      missing=$((missing + 1))
    done < <(grep -oE "$pattern" "$root/$doc" | sed -E 's/^[^A-Za-z.]//' | sort -u)
  done < <(cd "$root" && { ls README.md docs/*.md 2>/dev/null; find . -mindepth 2 -name README.md -not -path './build*' \
             -not -path './runs/*' -not -path './.git/*' | sed 's|^\./||'; } | sort -u)
  return "$missing"
}

# The checker on a planted problem first.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/docs" "$scratch/nn"
touch "$scratch/nn/real.h"
printf 'see nn/real.h and `nn/gone.h`\n' >"$scratch/README.md"
if check "$scratch" 2>/dev/null; then
  echo "docs_paths: the checker found nothing in a folder with a planted stale path" >&2
  exit 1
fi

check "${1:-.}"
missing=$?
[ "$missing" -eq 0 ] || { echo "docs_paths: $missing stale path(s)" >&2; exit 1; }
echo "docs_paths: every repository path named in the docs exists"
