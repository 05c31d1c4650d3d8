# scripts/setup.sh — sourced by run.sh and test.sh: install what is missing, configure, build.
#
# Packages come from Debian (ninja-build runs the build, see moelab_build; gnuplot-nox draws the
# experiments' PNG plots; pkgconf is for the install test, tests/install_check.sh). As root, missing ones
# are installed with apt-get; otherwise the exact apt-get line is printed and the script stops
# with status 1. The build goes to ./build
# (Release; CUDA code too when nvcc is found, see CMakeLists.txt). Set MOELAB_CMAKE_ARGS to pass
# more options to CMake, e.g. MOELAB_CMAKE_ARGS="-DMOELAB_CUDA=OFF".

MOELAB_PACKAGES=(cmake ninja-build make g++ libeigen3-dev doctest-dev zlib1g-dev nlohmann-json3-dev libcli11-dev
                 libopenblas-dev gnuplot-nox dataset-fashion-mnist pkgconf)

moelab_install_missing() {
  local missing=()
  for pkg in "${MOELAB_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "moelab needs these Debian packages: ${missing[*]}" >&2
    echo "Install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "==> installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" || {
    apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"
  } || { echo "apt-get could not install: ${missing[*]}" >&2; exit 1; }
}

# moelab_install_optional PKG...: what only some tests use (./test.sh: qemu-user, to run the
# instruction-set tests on an emulated AVX2 CPU). Installed as root when possible; otherwise a note,
# and those tests are left out.
moelab_install_optional() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "note: without ${missing[*]} some tests are left out (sudo apt-get install -y ${missing[*]})" >&2
    return 0
  fi
  echo "==> installing ${missing[*]} (optional)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" ||
    echo "note: apt-get could not install ${missing[*]}; some tests are left out" >&2
}

# moelab_build [target...]: configure, then build the named targets (default: everything).
moelab_build() {
  local jobs targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  jobs=$(nproc 2>/dev/null || echo 2)
  # A new build folder uses Ninja, which keeps the cores busier than Make across target
  # boundaries: a 2-core build of everything took 742 s against Make's 802 s (Make measured
  # without CMAKE_OPTIMIZE_DEPENDENCIES, which CMakeLists.txt now sets for both). A folder
  # configured before keeps its generator (CMake refuses to change it).
  local generator=()
  [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null && generator=(-G Ninja)
  echo "==> configuring (build/)"
  # shellcheck disable=SC2086
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${MOELAB_CMAKE_ARGS:-} >build-configure.log 2>&1 || {
    cat build-configure.log >&2
    echo "cmake configure failed (log above, also in build-configure.log)" >&2
    exit 1
  }
  grep -E "moelab: " build-configure.log || true
  echo "==> building ${*:-everything} with $jobs jobs"
  cmake --build build -j "$jobs" "${targets[@]}"
}
