// tests/doctest_main.cpp — the main() every test executable shares: doctest's own runner, after
// moelab's OpenMP wait policy (core/openmp_wait.h), so that test programs run side by side by
// `ctest -j` sleep between parallel regions as moelab's own programs do instead of spinning
// against each other.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "core/openmp_wait.h"

int main(int argc, char** argv) {
  moelab::wait_passively_unless_set(argv);  // may restart the program, once
  doctest::Context context(argc, argv);
  return context.run();
}
