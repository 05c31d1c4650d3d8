#!/usr/bin/env bash
# run.sh — install what is missing, build, and run the default program.
#
# For now the default is the teaching example: a ReLU MLP trained with moelab's own autograd on a
# toy problem, printing the loss as it falls. Arguments are passed to it (try ./run.sh --help).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
moelab_install_missing
moelab_build
echo "==> running build/train_mlp $*"
exec ./build/train_mlp "$@"
