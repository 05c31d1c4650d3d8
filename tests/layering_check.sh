#!/bin/bash
# tests/layering_check.sh SOURCE — ctest layering: the include rule of docs/ARCHITECTURE.md.
# Every '#include "..."' of a folder's .h/.cpp/.cu/.cuh files must name a header of an allowed layer:
#   core/      core/
#   cuda/      cuda/, core/
#   autograd/  autograd/, core/
#   nn/        nn/, autograd/, core/
#   runner/    runner/, core/ (and moelab_build_info.h, generated at build time)
#   tasks/     tasks/, runner/, nn/, autograd/, core/
# Prints every offending line; exit 1 if there is one.
set -uo pipefail
cd "$1" || exit 2
status=0
check() {  # check FOLDER ALLOWED-REGEX
  local folder=$1 allowed=$2 line
  while IFS= read -r line; do
    echo "layering: $line (a $folder file may include only ${allowed//|/, })"
    status=1
  done < <(grep -rnE '^\s*#\s*include\s+"' "$folder" --include='*.h' --include='*.cpp' --include='*.cu' \
             --include='*.cuh' | grep -vE "#\s*include\s+\"($allowed)")
}
check core 'core/'
check cuda 'cuda/|core/'
check autograd 'autograd/|core/'
check nn 'nn/|autograd/|core/'
check runner 'runner/|core/|moelab_build_info\.h'
check tasks 'tasks/|runner/|nn/|autograd/|core/'
[ $status -eq 0 ] && echo "layering: every include follows the rule"
exit $status
