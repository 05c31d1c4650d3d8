// core/openmp_wait.h — how the CPU backend's idle threads wait between parallel regions: by
// sleeping, not by spinning, unless the user chose otherwise.
//
// Why. An OpenMP thread that reaches the end of a parallel region waits for the next one. GCC's
// libgomp, by default, first spins (about 300,000 turns of a loop: up to a millisecond) and only
// then sleeps. On an idle machine that saves a wake-up per region. On a machine where something
// else wants the cores (a build, another run, a second job of the same sweep) the spinning threads
// take the core from the very thread the region is waiting for, and every region costs a time
// slice: bench/threads_bench.sh measured two moelab processes at once, each with a thread per core,
// 9.8x (a small training loop) and 39.6x (train_step_bench) slower than with one thread each;
// with OMP_WAIT_POLICY=passive (threads sleep at once) the same pairs ran 0.94x and 1.01x.
//
// How. libgomp reads OMP_WAIT_POLICY (and GOMP_SPINCOUNT) once, when it is loaded, before main
// runs: setting the variable in main is too late. So wait_passively_unless_set(argv), called
// first thing in main, does this:
//   - OMP_WAIT_POLICY or GOMP_SPINCOUNT already set (by the user, or by this function in the
//     process that started us): nothing; the user's choice stands (OMP_WAIT_POLICY=active brings
//     back libgomp's spinning).
//   - otherwise: sets OMP_WAIT_POLICY=passive and replaces the process with a fresh start of the
//     same program (execv of /proc/self/exe, same arguments, same environment plus the variable),
//     which then finds the variable set and goes on. The cost is one more program start (a few
//     milliseconds); the process id stays the same.
//   - under valgrind (its preload library in LD_PRELOAD) or where /proc/self/exe cannot be run,
//     nothing: the program goes on with libgomp's default.
// Child processes (a sweep's jobs) inherit the variable. moelab's programs (moelab, the examples,
// the benchmarks, the test runners) all call it; a program of your own may too.
//
//   int main(int argc, char** argv) {
//     moelab::wait_passively_unless_set(argv);   // may restart the program, once
//     ...
#pragma once

#include <string>

namespace moelab {

// See above. argv: main's, ending in a null pointer. Returns (without restarting) when a wait
// policy is already set or the restart is not possible.
void wait_passively_unless_set(char** argv);

// The policy libgomp was started with, as the user would write it: "passive", "active", or
// "default (spins, then sleeps)" when neither variable is set; "GOMP_SPINCOUNT=N" wins when set.
std::string openmp_wait_policy();

}  // namespace moelab
