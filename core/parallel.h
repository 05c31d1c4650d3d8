// core/parallel.h — the one thread-count setting for the CPU backend.
//
// CPU kernels parallelise with OpenMP (and Eigen, which is kept single-threaded inside our own
// parallel regions). set_num_threads(n) sets both; the default is every core. `--threads` on the
// command line feeds this.
#pragma once

namespace moelab {

void set_num_threads(int n);  // n >= 1
int num_threads();

}  // namespace moelab
