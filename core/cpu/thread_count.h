// core/cpu/thread_count.h — how many threads a parallel region gets: as many as have a grain of
// work each, never more than --threads (as PyTorch's at::parallel_for divides by its grain size).
//
// Starting a team of OpenMP threads and joining it costs microseconds on an idle machine, and on a
// busy one a whole scheduler time slice whenever one team member is not running: the team waits at
// the join for the thread that the kernel gave to another process. A small phone-book run on two
// cores took 2.0 s with the default threads beside 0.85 s with one, when one other process was
// busy (5.7 s against 1.7 s with three; 400 s against 5 s at a load of 4-5). The products of a
// small model are a few thousand flops: every one of them went parallel. So every parallel region
// asks for threads_for(work, grain): one thread per `grain` of work (elements, flops), at least
// one, at most omp_get_max_threads() (the --threads setting, core/parallel.h), and one inside a
// region that is already parallel. Below two grains of work a region runs on the calling thread
// alone and starts no team at all.
//
//   const int t = threads_for(flops, kGemmGrainFlops);
//   #pragma omp parallel num_threads(t) if (t > 1)
//
// No result depends on the thread count (each kernel fixes its order of summation), so the grains
// change speed only.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace moelab::cpu {

// Elements per thread for elementwise loops, row-wise softmax, reductions, gathers and scatters
// (PyTorch's GRAIN_SIZE is the same 32768).
inline constexpr double kElementGrain = 32768;

// Floating-point operations per thread for matrix products (2 m n k each): about 20 us of one
// core's work at 100 GFLOP/s, well above what a team costs on an idle machine, so that a product
// goes parallel only when each thread has far more to do than waiting for the team costs.
// bench/threads_bench.sh measures the effect.
inline constexpr double kGemmGrainFlops = 2.0e6;

// Threads for `work` units at `grain` units per thread: 1 when the work is under two grains or
// the caller is already inside a parallel region; else floor(work / grain), at most the thread
// setting.
inline int threads_for(double work, double grain) {
  if (omp_in_parallel()) return 1;
  const double by_work = work / grain;
  if (!(by_work >= 2.0)) return 1;
  return static_cast<int>(std::min<double>(omp_get_max_threads(), by_work));
}

// Threads for a loop over n elements: threads_for(n, kElementGrain).
inline int element_threads(std::int64_t n) { return threads_for(static_cast<double>(n), kElementGrain); }

}  // namespace moelab::cpu
