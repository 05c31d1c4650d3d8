#!/usr/bin/env bash
# tests/docs_links.sh — the repository must stand on its own: no tracked file may point at notes
# outside it, and every relative link in its Markdown files must lead somewhere that exists.
# Run by ctest as docs_links:
#   bash tests/docs_links.sh SOURCE_DIR
#
# Two checks over SOURCE_DIR (the tracked files when it is a git checkout, every file otherwise):
#   1. outside pointers: a line that names the developers' machine or their private notes fails:
#        /work/  /home/        absolute paths of a developer's machine
#        shared[/]             the notes folder, as a relative or absolute path (written here
#                              with [/] so that a plain grep for it finds nothing in the tree)
#        DESIGN.md             the notes' design page (docs/ARCHITECTURE.md replaces it)
#        papers/               the notes' paper texts (docs/REFERENCES.md cites them instead)
#        EXPERIMENTS.md        outside docs/ only when not written docs/EXPERIMENTS.md
#   2. links: in every tracked *.md file, each Markdown link [text](target) whose target is not a
#      URL (http:, https:, mailto:) must resolve, relative to the file's folder, to a file or
#      folder inside SOURCE_DIR; a #anchor on a .md target (or a bare #anchor) must match one of
#      its headings (GitHub's rule: lower case, punctuation dropped, spaces to hyphens; repeated
#      headings get -1, -2, ...) or an <a id="..."> in it. Fenced code blocks and `inline code`
#      are skipped, so shapes like [B, T] in code are not links.
# Before checking the repository it checks itself on a scratch folder with one planted problem of
# each kind, so a checker that finds nothing fails instead of passing.
set -u
export LC_ALL=C

failures=0
report() { echo "docs_links: $*" >&2; failures=$((failures + 1)); }

# files ROOT: the files to check, relative to ROOT, one per line.
files() {
  # safe.directory: a checkout owned by another user (a CI container) is still read as one.
  if git -c safe.directory='*' -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -c safe.directory='*' -C "$1" ls-files
  else                                   # not a checkout: every file but build and run outputs
    (cd "$1" && find . -type f -not -path './.git/*' -not -path './build*' -not -path './runs/*' \
       -not -path './data/*' -not -path './.device/*' -not -path './bench-results/*') |
      sed 's|^\./||'
  fi
}

# check_outside ROOT SELF: check 1 (SELF, this script's path relative to ROOT, is skipped: it
# names the patterns).
check_outside() {
  local root=$1 self=$2 hits
  hits=$(cd "$root" && files . | grep -vxF "$self" | tr '\n' '\0' |
         xargs -0 -r grep -nHIE '/work/|/home/|shared[/]|DESIGN\.md|papers/' 2>/dev/null)
  [ -n "$hits" ] && report "outside the repository:" $'\n'"$hits"
  hits=$(cd "$root" && files . | grep -vxF "$self" | grep -v '^docs/' | tr '\n' '\0' |
         xargs -0 -r grep -nHI 'EXPERIMENTS\.md' 2>/dev/null | sed 's|docs/EXPERIMENTS\.md||g' |
         grep 'EXPERIMENTS\.md')
  [ -n "$hits" ] && report "EXPERIMENTS.md without docs/:" $'\n'"$hits"
}

# anchors FILE: the anchors a Markdown file defines, one per line.
anchors() {
  awk '
    /^```/ { fence = !fence; next }
    fence { next }
    /^#+[ \t]/ {
      h = $0; sub(/^#+[ \t]+/, "", h); sub(/[ \t#]+$/, "", h)
      h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
      if (h in seen) { seen[h]++; print h "-" seen[h] } else { seen[h] = 0; print h }
    }
    { line = $0
      while (match(line, /<a (id|name)="[^"]*"/)) {
        a = substr(line, RSTART, RLENGTH); sub(/^<a (id|name)="/, "", a); sub(/"$/, "", a)
        print a; line = substr(line, RSTART + RLENGTH)
      }
    }' "$1"
}

# links FILE: "line<TAB>target" for every Markdown link outside code.
links() {
  awk '
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    { line = $0; gsub(/`[^`]*`/, "", line)
      while (match(line, /\]\([^)]*\)/)) {
        t = substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, RSTART + RLENGTH)
        sub(/^[ \t]*</, "", t); sub(/>.*$/, "", t); sub(/[ \t].*$/, "", t)
        if (t != "") print NR "\t" t
      }
    }' "$1"
}

# check_links ROOT: check 2.
check_links() {
  local root f dir n target path anchor resolved
  root=$(cd "$1" && pwd -P)
  while IFS= read -r f; do
    case "$f" in *.md) ;; *) continue ;; esac
    [ -f "$root/$f" ] || continue
    dir=$(dirname "$root/$f")
    while IFS=$'\t' read -r n target; do
      case "$target" in http:*|https:*|mailto:*) continue ;; esac
      path=${target%%#*}
      anchor=
      [ "$path" != "$target" ] && anchor=${target#*#}
      if [ -z "$path" ]; then
        resolved="$root/$f"
      else
        resolved=$(realpath -m "$dir/$path")
        case "$resolved/" in
          "$root"/*) ;;
          *) report "$f:$n: link '$target' leaves the repository"; continue ;;
        esac
        if [ ! -e "$resolved" ]; then
          report "$f:$n: link '$target' leads nowhere"; continue
        fi
      fi
      if [ -n "$anchor" ] && [ -f "$resolved" ] && [[ "$resolved" == *.md ]]; then
        anchors "$resolved" | grep -qxF "$anchor" ||
          report "$f:$n: link '$target': no heading or <a id> '$anchor' in ${resolved#"$root"/}"
      fi
    done < <(links "$root/$f")
  done < <(files "$root")
}

# The self-test: a scratch folder with a clean page must pass, and each planted problem must be
# found (a missing file, a missing anchor, a link out of the folder, two outside pointers).
self_test() {
  local scratch before
  scratch=$(mktemp -d)
  mkdir -p "$scratch/docs"
  cat >"$scratch/README.md" <<'PAGE'
# Title

## A heading, with (punctuation)

See [b](docs/B.md#b-page) and `[x](nowhere)`.
PAGE
  cat >"$scratch/docs/B.md" <<'PAGE'
# B page

<a id="p1"></a>Back to [the top](../README.md#a-heading-with-punctuation), [p1](#p1).

```
[B, T](not-a-link)
```
PAGE
  before=$failures
  check_outside "$scratch" none 2>/dev/null
  check_links "$scratch" 2>/dev/null
  if [ "$failures" -ne "$before" ]; then
    echo "docs_links: self-test: a clean folder was reported" >&2; rm -rf "$scratch"; exit 1
  fi
  echo 'Broken: [gone](docs/missing.md), [anchor](docs/B.md#nope), [out](../../etc/x.md).' \
    >>"$scratch/README.md"
  # The planted outside path is assembled here, so this script itself names none.
  outside=".." folder="sha"
  printf '// see %s/%sred/papers/x.md and EXPERIMENTS.md\n' "$outside" "$folder" >"$scratch/code.cpp"
  check_outside "$scratch" none 2>/dev/null
  check_links "$scratch" 2>/dev/null
  rm -rf "$scratch"
  if [ $((failures - before)) -ne 5 ]; then
    echo "docs_links: self-test: 5 planted problems, $((failures - before)) found" >&2
    exit 1
  fi
  failures=$before
}

root=${1:?usage: docs_links.sh SOURCE_DIR}
self_test
check_outside "$root" tests/docs_links.sh
check_links "$root"
if [ "$failures" -ne 0 ]; then
  echo "docs_links: $failures problem(s)" >&2
  exit 1
fi
echo "docs_links: no outside pointers, every relative Markdown link resolves"
