// tests/cuda_test_main.cpp — the main() of every GPU test executable (tests/test_cuda_*.cpp).
//
// Without a GPU there is nothing to test: when the reason is only that (a build without the CUDA
// backend, no NVIDIA driver, a driver that sees no device) the program says so and exits with 77,
// which CMakeLists.txt declares as every test's SKIP_RETURN_CODE, so ctest reports "Skipped".
// Any other reason is a fault that must not hide behind "Skipped": a driver older than the CUDA
// runtime, say, makes cudaGetDeviceCount fail on a machine that has a GPU. Then the test fails and
// prints what cuda_probe() found (the error string, the driver and runtime versions). On a
// machine that is meant to have a GPU, MOELAB_REQUIRE_CUDA=1 turns every skip into a failure too
// (scripts/gpu-check.sh sets it). With a GPU it prints the card once and runs doctest's own
// runner, command-line options included.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/backend.h"

int main(int argc, char** argv) {
  std::string name = argc > 0 && argv[0] ? argv[0] : "test_cuda";
  name = name.substr(name.find_last_of('/') + 1);  // npos + 1 == 0: the whole name
  const moelab::CudaProbe& probe = moelab::cuda_probe();
  if (!probe.available) {
    const char* require = std::getenv("MOELAB_REQUIRE_CUDA");
    const bool required = require != nullptr && std::strcmp(require, "1") == 0;
    if (probe.no_gpu && !required) {
      std::printf("%s: skipped: %s\n", name.c_str(), probe.description.c_str());
      return 77;
    }
    std::fprintf(stderr, "%s: FAILED: %s%s\n", name.c_str(), probe.description.c_str(),
                 probe.no_gpu ? " (and MOELAB_REQUIRE_CUDA=1 says this machine has a GPU)" : "");
    return 1;
  }
  std::printf("%s: on %s\n", name.c_str(), probe.description.c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
