#!/bin/bash
# tests/install_check.sh BUILD SOURCE — ctest install_check: moelab used from outside the tree.
#   1. cmake --install BUILD into a temporary prefix
#   2. configure and build tests/external_project with find_package(moelab), run it
#   3. compile the same main.cpp with g++ and `pkg-config --cflags --libs moelab`, run it
# Each step must succeed; the program exits 1 if its router got no gradient.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/moelab-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/lib/libmoelab.a" || { echo "install_check: no libmoelab.a installed"; exit 1; }
test -f "$work/prefix/include/moelab/nn/moe/moe_layer.h" || { echo "install_check: headers missing"; exit 1; }

cmake -S "$source/tests/external_project" -B "$work/cmake-build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" -j2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
echo "find_package: $("$work/cmake-build/my_moe_program")"

if command -v pkg-config > /dev/null; then
  flags=$(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs moelab)
  # shellcheck disable=SC2086  # the flags are words
  g++ "$source/tests/external_project/main.cpp" -o "$work/by_pkg_config" $flags
  echo "pkg-config: $("$work/by_pkg_config")"
else
  echo "pkg-config: not installed, skipped"
fi
