// core/openmp_wait.cpp — see openmp_wait.h.
#include "core/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace moelab {

namespace {

bool is_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

// valgrind runs a program with its preload library in LD_PRELOAD; an execv from inside would
// run the fresh start outside valgrind (unless --trace-children=yes), so valgrind's users keep
// libgomp's default instead.
bool under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

}  // namespace

void wait_passively_unless_set(char** argv) {
  if (argv == nullptr || argv[0] == nullptr) return;
  if (is_set("OMP_WAIT_POLICY") || is_set("GOMP_SPINCOUNT") || under_valgrind()) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only when it failed: go on with the spinning default
  unsetenv("OMP_WAIT_POLICY");    // so that openmp_wait_policy() says what libgomp really uses
}

std::string openmp_wait_policy() {
  if (is_set("GOMP_SPINCOUNT")) return std::string("GOMP_SPINCOUNT=") + std::getenv("GOMP_SPINCOUNT");
  if (is_set("OMP_WAIT_POLICY")) return std::getenv("OMP_WAIT_POLICY");
  return "default (spins, then sleeps)";
}

}  // namespace moelab
