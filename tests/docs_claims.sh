#!/usr/bin/env bash
# tests/docs_claims.sh MOELAB REPO — every recorded result's "## Claims" section is what its CSV
# files give (`moelab claims --check`), so no verdict in docs/results was written by hand.
# A record of an experiment that states no paper claims (routers) is listed and passes. Run
# folders inside a record (docs/results/RECORD/RUN/config.json: a GPU session's runs) are checked
# when their summary.md has a Claims section (a run recorded without its CSVs has none).
set -u
moelab=$1
repo=$2
status=0
checked=0
for config in "$repo"/docs/results/*/config.json "$repo"/docs/results/*/*/config.json; do
  [ -f "$config" ] || continue
  dir=$(dirname "$config")
  case $config in
    "$repo"/docs/results/*/*/config.json) grep -q '^## Claims' "$dir/summary.md" 2>/dev/null || continue ;;
  esac
  out=$("$moelab" claims --check "$dir" 2>&1)
  rc=$?
  case $rc in
    0) checked=$((checked + 1)); echo "ok: ${dir#$repo/}" ;;
    2) if printf '%s' "$out" | grep -q "states no paper claims"; then
         echo "no claims: ${dir#$repo/}"
       else
         printf '%s\n' "$out"; status=1
       fi ;;
    *) printf 'FAIL: %s\n%s\n' "${dir#$repo/}" "$out"; status=1 ;;
  esac
done
if [ "$checked" -eq 0 ]; then
  echo "no record with claims found under $repo/docs/results"
  status=1
fi
exit $status
