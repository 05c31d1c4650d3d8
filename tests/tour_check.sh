#!/usr/bin/env bash
# tests/tour_check.sh — keeps examples/trace_step.cpp and docs/TOUR.md honest. Run by ctest:
#   bash tests/tour_check.sh trace TRACE_STEP                (test example_trace_step)
#   bash tests/tour_check.sh docs TRACE_STEP SOURCE_DIR      (test docs_tour)
#   bash tests/tour_check.sh update TRACE_STEP SOURCE_DIR    (by hand, after changing the program)
#
# trace: the program exits 0 and prints the tensors of the tiny configuration with their shapes
#   (B 2, T 4, d 8, vocab 16, E 4, k 2, f 16: ids [2, 4], attn.probs [4, 4, 4], plan.experts [8, 2],
#   groups.offsets [5], experts.h [16, 16], logits [2, 4, 16], ...) and every "matches X: yes" line,
#   none with "no", and the five "agrees with autograd's X: yes" lines of the gradients computed by
#   hand (the router's along each path, one expert's); two runs print the same bytes; and with
#   --seed 1, --heads 1 and --heads 4 every piece still matches and every gradient agrees.
# docs: three checks of SOURCE_DIR/docs/TOUR.md against the program and the sources:
#   1. the trace: the fenced blocks that follow a line "<!-- trace_step output -->", joined in
#      order, must equal what TRACE_STEP prints now. A number may differ by one unit of its last
#      printed digit (a build for another instruction set, -DMOELAB_NATIVE=ON, can round a last bit
#      differently; the script says so); anything else, a word, a line, a routing choice, fails.
#   2. paths: every `path` in backticks that starts with a source folder (core/, autograd/, nn/,
#      tasks/, examples/, tests/, docs/, cuda/, bench/, scripts/) or is a top-level file must exist.
#   3. symbols: every identifier in backticks (Tensor, group_by_expert, MoELayer::forward_with_aux,
#      route()) must occur as a word in a file named in backticks in the same section (a section
#      runs from one heading to the next); for Foo::bar both Foo and bar must. In a section naming
#      no file, anywhere in the tracked sources. Fenced code blocks are skipped by 2 and 3.
# update: rewrites the pasted blocks of docs/TOUR.md with the program's current output, each block
#   keeping its number of lines (the last one takes the rest); says so when the total changed, so
#   that the commentary between the blocks can be moved to fit.
# Before checking the real page it checks itself on a scratch page: clean, it must pass; with a
# missing path, a missing symbol and a changed trace number planted, it must find all three.
set -u
export LC_ALL=C

failures=0
report() { echo "tour_check: $*" >&2; failures=$((failures + 1)); }

# ---------------------------------------------------------------- mode trace
check_trace() {
  local bin=$1 out out2 out3 pattern
  out=$("$bin") || { report "trace_step exited with status $?"; return; }
  # One pattern per line: a tensor's name and shape (and for offsets, that nothing was dropped).
  while IFS= read -r pattern; do
    grep -qE "$pattern" <<<"$out" || report "no line matching '$pattern'"
  done <<'PATTERNS'
^ids +\[2, 4\]
^targets +\[2, 4\]
^embed +\[2, 4, 8\]
^attn\.q +\[2, 4, 8\]
^attn\.scores +\[4, 4, 4\]
^attn\.probs +\[4, 4, 4\]
^attn\.out +\[2, 4, 8\]
^moe\.x +\[8, 8\]
^router\.logits +\[8, 4\]
^router\.probs +\[8, 4\]
^plan\.experts +\[8, 2\]
^plan\.gates +\[8, 2\]
^plan\.aux\.load_balance +\[\]
^tokens_per_expert +\[4\]
^groups\.offsets +\[5\] .* 16$
^groups\.order +\[16\]
^groups\.rows +\[16\]
^moe\.xs +\[16, 8\]
^experts\.h +\[16, 16\]
^experts\.y +\[16, 8\]
^moe\.g +\[16\]
^moe\.y +\[8, 8\]
^logits +\[2, 4, 16\]
^loss +\[\]
^layers\.0\.ffn\.experts\.w_in +\[4, 8, 16\] .*\|grad\|
^head\.weight +\[16, 8\] .*\|grad\|
^embed\.grad +\[2, 4, 8\]
^plan\.gates\.grad +\[8, 2\]
^experts\.y\.grad +\[16, 8\]
^logits\.grad +\[2, 4, 16\]
^gates: dW_r +\[4, 8\]
^aux: f +\[4\]
^router: dW_r +\[4, 8\]
^expert [0-3]: sorted rows [0-9]+\.\.[0-9]+
^dW_out\[e\] +\[16, 8\]
^dW_in\[e\] +\[8, 16\]
^router\.weight after +\[4, 8\]
^loss after the step +\[\]
^graph_text\(loss\): [0-9]+ entries
^%[0-9]+ = add\(%[0-9]+, %[0-9]+\) \[\] float32
^every stepped piece matches
PATTERNS
  while IFS= read -r pattern; do
    grep -qxF "matches $pattern: yes" <<<"$out" || report "no line 'matches $pattern: yes'"
  done <<'MATCHES'
Attention::forward
TopKRouter::route's chosen experts
TopKRouter::route's gates
ExpertBank::forward
MoELayer::forward_with_aux
Decoder::forward
the training loss
the stepped loss's parameter gradients
logits.retain_grad() against its probe
MATCHES
  grep -q '^matches .*: no$' <<<"$out" && report "a stepped piece does not match its layer"
  # The gradients computed by hand (router along each path, one expert) against autograd's.
  while IFS= read -r pattern; do
    grep -qxF "agrees with autograd's $pattern: yes" <<<"$out" || report "no line 'agrees with autograd's $pattern: yes'"
  done <<'AGREES'
router gradient of the cross-entropy alone
router gradient of the aux loss alone
router gradient of the whole loss
ffn.experts.w_out gradient [e]
ffn.experts.w_in gradient [e]
AGREES
  out2=$("$bin") || report "the second run exited with status $?"
  [ "$out" == "$out2" ] || report "two runs printed different traces"
  out3=$("$bin" --seed 1) || report "trace_step --seed 1 exited with status $?"
  [ "$(grep -c '^matches .*: yes$' <<<"$out3")" -eq 9 ] && [ "$(grep -c '^agrees with .*: yes$' <<<"$out3")" -eq 5 ] ||
    report "with --seed 1 not every piece matches"
  # A learner's first edit is a size: with 1 head (hd = 8, 1/sqrt(hd) not a power of two) and 4
  # heads (hd = 2) every piece must still match bitwise.
  local heads
  for heads in 1 4; do
    out3=$("$bin" --heads "$heads") || report "trace_step --heads $heads exited with status $?"
    [ "$(grep -c '^matches .*: yes$' <<<"$out3")" -eq 9 ] && [ "$(grep -c '^agrees with .*: yes$' <<<"$out3")" -eq 5 ] ||
      report "with --heads $heads not every piece matches: $(grep '^matches .*: no$' <<<"$out3" | head -n 3)"
  done
}

# ---------------------------------------------------------------- mode docs
# pasted PAGE: the fenced blocks that follow a "<!-- trace_step output -->" line, joined.
pasted() {
  awk '
    /^<!-- trace_step output -->[ \t]*$/ { armed = 1; next }
    armed && /^```/ { armed = 0; inside = 1; next }
    inside && /^```/ { inside = 0; next }
    inside { print }
    { armed = 0 }' "$1"
}

# compare_trace EXPECTED ACTUAL LABEL: the pasted trace against the program's output.
compare_trace() {
  local verdict
  verdict=$(awk '
    function numeric(s) { return s ~ /^-?[0-9]+\.[0-9]+$/ }
    function differ() { print "line " FNR ": page \"" want[FNR] "\", program \"" $0 "\""; bad = 1 }
    NR == FNR { want[FNR] = $0; n = FNR; next }
    { m = FNR
      if (FNR > n) { print "line " FNR ": the program prints more than the page"; bad = 1; exit }
      if ($0 == want[FNR]) next
      a = split(want[FNR], x, /[ \t]+/); b = split($0, y, /[ \t]+/)
      if (a != b) { differ(); exit }
      for (i = 1; i <= a; i++) {
        if (x[i] == y[i]) continue
        d = x[i] - y[i]; if (d < 0) d = -d
        if (numeric(x[i]) && numeric(y[i]) && d < 0.0015) { near++; continue }
        differ(); exit
      }
    }
    END {
      if (bad) exit
      if (m < n) { print "the page holds " n " lines, the program prints " m; exit }
      if (near) print "near " near
      else print "same"
    }' "$1" "$2")
  case "$verdict" in
    same) ;;
    near*) echo "tour_check: $3: ${verdict#near } numbers differ by one unit of the last" \
                "digit (a build for another instruction set rounds differently);" \
                "all else is equal" ;;
    *) report "$3: the pasted trace differs from the program's output: $verdict" \
              "(after a deliberate change: tests/tour_check.sh update TRACE_STEP SOURCE_DIR)" ;;
  esac
}

# tokens PAGE: "section<TAB>line<TAB>token" for every `token` outside fenced blocks.
tokens() {
  awk '
    /^```/ { fence = !fence; next }
    fence { next }
    /^#+[ \t]/ { section++ }
    { line = $0
      while (match(line, /`[^`]+`/)) {
        print section + 0 "\t" NR "\t" substr(line, RSTART + 1, RLENGTH - 2)
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$1"
}

is_path() {
  [[ "$1" =~ ^(core|autograd|nn|tasks|examples|tests|docs|cuda|bench|scripts)/[A-Za-z0-9_./-]*$ ||
     "$1" =~ ^[A-Za-z0-9_-]+\.(md|txt|sh)$ ]]
}
is_symbol() { [[ "$1" =~ ^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_~][A-Za-z0-9_]*)*(\(\))?$ ]]; }

# check_names ROOT PAGE LABEL: checks 2 and 3.
check_names() {
  local root=$1 page=$2 label=$3 sec n tok sym part files
  local -A section_files=()
  while IFS=$'\t' read -r sec n tok; do
    if is_path "$tok"; then
      if [ -e "$root/$tok" ]; then
        [ -f "$root/$tok" ] && section_files[$sec]+="$root/$tok"$'\n'
      else
        report "$label:$n: no file or folder '$tok'"
      fi
    fi
  done < <(tokens "$page")
  while IFS=$'\t' read -r sec n tok; do
    is_path "$tok" && continue
    is_symbol "$tok" || continue
    sym=${tok%"()"}
    files=${section_files[$sec]:-}
    for part in ${sym//::/ }; do
      if [ -n "$files" ]; then
        tr '\n' '\0' <<<"${files%$'\n'}" | xargs -0 grep -qw -- "$part" ||
          report "$label:$n: '$tok': no '$part' in the files this section names"
      else
        (cd "$root" && source_files | tr '\n' '\0' | xargs -0 grep -qw -- "$part") ||
          report "$label:$n: '$tok': no '$part' in the sources"
      fi
    done
  done < <(tokens "$page")
}

# source_files: the C++ and CMake sources under the current folder.
source_files() {
  find core autograd nn tasks examples tests cuda bench -type f \
    \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null
  [ -f CMakeLists.txt ] && echo CMakeLists.txt
}

check_page() {  # ROOT PAGE LABEL OUTPUT_FILE
  local pasted_file
  pasted_file=$(mktemp)
  pasted "$2" >"$pasted_file"
  if [ ! -s "$pasted_file" ]; then
    report "$3: no block after a '<!-- trace_step output -->' line"
  else
    compare_trace "$pasted_file" "$4" "$3"
  fi
  rm -f "$pasted_file"
  check_names "$1" "$2" "$3"
}

self_test() {  # OUTPUT_FILE
  local scratch before
  scratch=$(mktemp -d)
  mkdir -p "$scratch/nn" "$scratch/docs"
  printf '// a.h\nclass MoELayer {\n  void forward_with_aux();\n};\n' >"$scratch/nn/a.h"
  { printf '# Tour\n\n## Stop\n\nRead `nn/a.h`: `MoELayer::forward_with_aux()`, `[T, d]`.\n\n'
    printf '## Trace\n\n<!-- trace_step output -->\n```text\n'
    cat "$1"
    printf '```\n'
  } >"$scratch/docs/TOUR.md"
  before=$failures
  check_page "$scratch" "$scratch/docs/TOUR.md" self-test "$1" 2>/dev/null >/dev/null
  if [ "$failures" -ne "$before" ]; then
    echo "tour_check: self-test: a clean page was reported" >&2; rm -rf "$scratch"; exit 1
  fi
  # Planted: a symbol that is nowhere, a path that does not exist, the loss changed by 0.1.
  sed 's/`MoELayer::forward_with_aux()`/`MoELayer::backward_with_aux()`, `nn\/b.h`/' \
    "$scratch/docs/TOUR.md" |
    awk '/^loss +\[\]/ && !done { n = $NF; done = 1
           $0 = substr($0, 1, length($0) - length(n)) sprintf("%.3f", n + 0.1) }
         { print }' >"$scratch/t" && mv "$scratch/t" "$scratch/docs/TOUR.md"
  check_page "$scratch" "$scratch/docs/TOUR.md" self-test "$1" 2>/dev/null >/dev/null
  rm -rf "$scratch"
  if [ $((failures - before)) -ne 3 ]; then
    echo "tour_check: self-test: 3 planted problems, $((failures - before)) found" >&2
    exit 1
  fi
  failures=$before
}

# update_page PAGE OUTPUT_FILE: the blocks refilled, block by block, with the same line counts.
update_page() {
  local tmp
  tmp=$(mktemp)
  awk '
    NR == FNR { out[++n] = $0; next }
    { page[++m] = $0 }
    END {
      b = 0
      for (i = 1; i <= m; i++) {
        if (page[i] ~ /^<!-- trace_step output -->[ \t]*$/ && page[i + 1] ~ /^```/) {
          j = i + 2; len = 0
          while (j <= m && page[j] !~ /^```/) { j++; len++ }
          blocks++; start[blocks] = i + 2; size[blocks] = len; i = j
        }
      }
      used = 0
      for (i = 1; i <= m; i++) {
        for (k = 1; k <= blocks; k++) if (i == start[k]) break
        if (k <= blocks) {
          take = (k == blocks) ? n - used : size[k]
          for (t = 1; t <= take && used < n; t++) print out[++used]
          i += size[k] - 1
          continue
        }
        print page[i]
      }
      total = 0; for (k = 1; k <= blocks; k++) total += size[k]
      if (total != n)
        printf "tour_check: the page held %d trace lines, the program prints %d: check the split\n",
               total, n > "/dev/stderr"
    }' "$2" "$1" >"$tmp" && cat "$tmp" >"$1"
  rm -f "$tmp"
}

mode=${1:?usage: tour_check.sh trace TRACE_STEP | docs TRACE_STEP SOURCE_DIR}
bin=${2:?usage: tour_check.sh trace TRACE_STEP | docs TRACE_STEP SOURCE_DIR}
case "$mode" in
  trace)
    check_trace "$bin"
    [ "$failures" -eq 0 ] &&
      echo "tour_check: trace_step prints every tensor and every piece matches" ;;
  docs)
    root=${3:?usage: tour_check.sh docs TRACE_STEP SOURCE_DIR}
    output=$(mktemp)
    "$bin" >"$output" || report "trace_step exited with status $?"
    self_test "$output"
    check_page "$root" "$root/docs/TOUR.md" docs/TOUR.md "$output"
    rm -f "$output"
    [ "$failures" -eq 0 ] &&
      echo "tour_check: docs/TOUR.md's trace is the program's output; its names exist" ;;
  update)
    root=${3:?usage: tour_check.sh update TRACE_STEP SOURCE_DIR}
    output=$(mktemp)
    "$bin" >"$output" || report "trace_step exited with status $?"
    update_page "$root/docs/TOUR.md" "$output"
    rm -f "$output"
    echo "tour_check: docs/TOUR.md's trace blocks rewritten; reread the commentary around them" ;;
  *) echo "usage: tour_check.sh trace|docs|update TRACE_STEP [SOURCE_DIR]" >&2; exit 2 ;;
esac
if [ "$failures" -ne 0 ]; then
  echo "tour_check: $failures problem(s)" >&2
  exit 1
fi
