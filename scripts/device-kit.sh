#!/usr/bin/env bash
# scripts/device-kit.sh — pack what a bare GPU machine lacks to build and test moelab, into
# .device/kit/ (git-ignored), laid out like /usr so CMake finds it through CMAKE_PREFIX_PATH.
#
# The GPU machines this project borrows have nvcc, CMake, g++ and PyTorch but none of Debian's
# -dev packages. This copies, from this (Debian) machine:
#   include/  eigen3/ doctest/ nlohmann/ CLI/ zlib.h zconf.h     the header-only libraries and zlib's
#   lib/      libz.a, lib/cmake/doctest/                          zlib statically; doctest's CMake files
#   share/    eigen3/cmake/ cmake/nlohmann_json/ cmake/CLI11/     the other CMake package files
#   fashion-mnist/                                                the dataset test_softmoe_mnist_effect reads
# and, when data/mnist holds the standard MNIST files (scripts/get-mnist.sh --full), .device/mnist/
# with them gzipped (gpu-check's mnist stage; carry .device/mnist too).
# The package files locate their headers relative to themselves, so the kit works from any folder.
#
# Use (here, then on the GPU machine with .device/kit carried along):
#   scripts/device-kit.sh
#   cmake -S . -B build-gpu -DMOELAB_CUDA=ON -DCMAKE_PREFIX_PATH=$PWD/.device/kit \
#         -DZLIB_ROOT=$PWD/.device/kit -DMOELAB_NATIVE=OFF
#   cmake --build build-gpu -j16
#   MOELAB_FASHION_MNIST=$PWD/.device/kit/fashion-mnist ctest --test-dir build-gpu --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."

kit=.device/kit
rm -rf "$kit"
mkdir -p "$kit/include" "$kit/lib/cmake" "$kit/share/eigen3" "$kit/share/cmake"

need() {  # need PATH PACKAGE: fail with the apt-get line when a path is missing
  [[ -e $1 ]] || { echo "device-kit: $1 is missing: apt-get install $2" >&2; exit 1; }
}
need /usr/include/eigen3 libeigen3-dev
need /usr/include/doctest doctest-dev
need /usr/include/nlohmann nlohmann-json3-dev
need /usr/include/CLI libcli11-dev
need /usr/include/zlib.h zlib1g-dev
need /usr/share/datasets/fashion-mnist dataset-fashion-mnist

cp -r /usr/include/eigen3 /usr/include/doctest /usr/include/nlohmann /usr/include/CLI "$kit/include/"
cp /usr/include/zlib.h /usr/include/zconf.h "$kit/include/"
cp /usr/lib/x86_64-linux-gnu/libz.a "$kit/lib/"
cp -r /usr/lib/cmake/doctest "$kit/lib/cmake/"
cp -r /usr/share/eigen3/cmake "$kit/share/eigen3/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$kit/share/cmake/"
mkdir -p "$kit/fashion-mnist"
cp /usr/share/datasets/fashion-mnist/*.gz "$kit/fashion-mnist/"
# Debian's doctest package names its prefix as the absolute "/usr": make it relative to the file
# (lib/cmake/doctest/ is three folders below the prefix), as the other packages already are.
sed -i 's|^set(_IMPORT_PREFIX "/usr")$|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  "$kit/lib/cmake/doctest/doctestTargets.cmake"
grep -q '"/usr"' "$kit/lib/cmake/doctest/doctestTargets.cmake" && { echo "device-kit: could not relocate doctest" >&2; exit 1; }
# Eigen's unsupported modules and docs are not used: leave them out to keep the kit small.
rm -rf "$kit/include/eigen3/unsupported"

# MNIST for gpu-check's mnist stage, gzipped (the loader reads .gz): .device/mnist, when
# scripts/get-mnist.sh --full has put the four IDX files in data/mnist.
if [[ -f data/mnist/train-images-idx3-ubyte ]]; then
  rm -rf .device/mnist
  mkdir -p .device/mnist
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gzip -c data/mnist/$f > .device/mnist/$f.gz
  done
  echo "device-kit: MNIST gzipped into .device/mnist ($(du -sh .device/mnist | cut -f1))"
fi
echo "device-kit: $(du -sh "$kit" | cut -f1) in $kit"
