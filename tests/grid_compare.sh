# tests/grid_compare.sh — sourced by the job-grid tests (jobs_grid_check.sh, scheduler_check.sh):
# is the report a sweep's jobs wrote the one mode=all writes?
#
#   strip_seconds FILE       the file without its timings: CSV columns named `seconds` or
#                            `tokens_per_second`, rows of the metric tokens_per_second, and the
#                            summary lines "Training time of the jobs" and those that say tokens/s
#   compare_reports A B NAME every file of run folder A but config.json (command, start time), the
#                            plots' PNGs, points/, routing/ and the lock files must be in B and equal
#                            once stripped; calls `fail MESSAGE` (the caller's) for each that is not,
#                            and leaves the number of equal files in $compared
# POSIX sh; writes a.txt and b.txt in the current folder.

# The CSV file $1 without its timings (any other file as it is).
strip_seconds() {
  case "$1" in
    *.csv) grep -v ',tokens_per_second,' "$1" |
             awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) drop[i] = ($i == "seconds" || $i == "tokens_per_second") }
                      { out = ""; sep = ""; for (i = 1; i <= NF; i++) if (!drop[i]) { out = out sep $i; sep = "," } print out }' ;;
    *.md) grep -v -e '^Training time of the jobs' -e 'tokens/s' "$1" ;;
    *) cat "$1" ;;
  esac
}

compare_reports() {
  compared=0
  for f in $(cd "$1" && find . -type f ! -path './points/*' ! -path './routing/*' ! -path './.locks/*' ! -name config.json ! -name '*.png' ! -name '.lock' ! -name '.config.lock' | sort); do
    if [ ! -f "$2/$f" ]; then fail "$3: $f is missing in the jobs run"; continue; fi
    strip_seconds "$1/$f" >a.txt
    strip_seconds "$2/$f" >b.txt
    if cmp -s a.txt b.txt; then compared=$((compared + 1)); else fail "$3: $f differs"; diff a.txt b.txt | head -10; fi
  done
}
