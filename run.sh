#!/usr/bin/env bash
# run.sh — install what is missing, build, and run the default experiment: the Mixture of Parrots
# phone-book demo (`moelab phonebook --preset demo`, a few minutes on 2 cores). It trains a dense
# decoder and MoE decoders with the same active parameters on phone-books of three sizes and
# prints which books each one memorized. Arguments are passed on, e.g.
#   ./run.sh --threads 4          ./run.sh --set book_sizes=300,600,1200,2400
# and the results land in runs/phonebook/demo/ (summary.md, results.csv, PNG plots).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
moelab_install_missing
moelab_build moelab_cli   # only the command line: ./test.sh builds the rest
echo "==> running build/moelab phonebook --preset demo $*"
exec ./build/moelab phonebook --preset demo "$@"
