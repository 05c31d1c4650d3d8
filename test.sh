#!/usr/bin/env bash
# test.sh — install what is missing, build, and run every test (ctest).
#
# CUDA tests report themselves skipped where no GPU is present. Extra arguments go to ctest,
# e.g. ./test.sh -R gradcheck.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
moelab_install_missing
moelab_build
echo "==> running the test suite"
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
