#!/bin/bash
# scripts/sanitize-suite.sh [BUILD_DIR] — the whole ctest suite under AddressSanitizer and
# UndefinedBehaviorSanitizer (MOELAB_SANITIZE=ON): every test program, the experiments' command
# line checks and the examples, built with -fsanitize=address,undefined and run with errors fatal.
#
#   scripts/sanitize-suite.sh              # build-asan/, about 20 minutes on 2 cores, then the tests
#
# The CUDA backend and the alternative-ISA copies are left out (ASan does not instrument device
# code; the ISA runs test the same code paths at another instruction level). A report from either
# sanitizer stops that test with a failure; the script exits with ctest's status. Leak checking is
# on. Results: build-asan/Testing/Temporary/LastTest.log.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
cmake -S . -B "$build" -DMOELAB_SANITIZE=ON -DMOELAB_CUDA=OFF -DMOELAB_ALT_ISA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$build" -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The emulated-AVX2 runs need qemu and the default build's binaries: not this build's.
ctest --test-dir "$build" -j "$(nproc)" -LE 'alt-isa|emulated-avx2' --output-on-failure
