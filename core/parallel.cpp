// core/parallel.cpp — thread count for OpenMP and Eigen.
#include "core/parallel.h"

#include <Eigen/Core>
#include <omp.h>

#include "core/error.h"

namespace moelab {

void set_num_threads(int n) {
  MOELAB_CHECK(n >= 1, "set_num_threads", "need at least one thread, got ", n);
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace moelab
