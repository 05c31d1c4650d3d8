// tests/cuda_test_main.cpp — the main() of every GPU test executable (tests/test_cuda_*.cpp).
//
// Without a usable GPU (no device, or a build without the CUDA backend) there is nothing to test:
// the program says so and exits with 77, which CMakeLists.txt declares as every test's
// SKIP_RETURN_CODE, so ctest reports the test as "Skipped" rather than "Passed". With a GPU it is
// doctest's own runner, command-line options included.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "core/backend.h"

int main(int argc, char** argv) {
  if (!moelab::cuda_available()) {
    std::string name = argc > 0 && argv[0] ? argv[0] : "test_cuda";
    name = name.substr(name.find_last_of('/') + 1);  // npos + 1 == 0: the whole name
    std::printf("%s: skipped, no CUDA GPU (or this build has no CUDA backend)\n", name.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
