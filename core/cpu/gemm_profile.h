// core/cpu/gemm_profile.h — which matrix products a program runs, how often, and how fast.
//
// A sampling profiler (perf) says how much of a training step the GEMM takes, but not which of
// its products are slow: every product runs the same micro-kernel. This profile records each
// float32 product the CPU GEMM runs (core/cpu/gemm_f32.h), keyed by its shape, with the calls
// and the time spent in them, so that a product that runs far below the others stands out:
//
//   set_gemm_profiling(true);
//   ... run steps ...
//   set_gemm_profiling(false);
//   for (const GemmShapeTime& s : gemm_profile()) ...   // the largest total time first
//   clear_gemm_profile();
//
// bench/train_step_bench.cpp --gemm-profile writes it for the benchmark's training step. Off by
// default: then a product pays one relaxed atomic load. On, it reads the clock twice a product
// and takes a lock: about 0.1 us a product (attention's [24, 32] @ [32, 24]^T block, one thread:
// 1.12-1.20 us unprofiled, 1.23-1.30 profiled), so the smallest products read up to ~9% slower
// than they run, and the step a little slower. The time is each product's own, on the thread that
// ran it: products that run side by side (a batch of them shared among threads) add up to more
// than the wall time; with one thread the seconds are the step's wall time in products.
#pragma once

#include <cstdint>
#include <vector>

namespace moelab::cpu {

// One product shape: out[m, n] = op(a)[m, k] @ op(b)[k, n]; `strided` when a, b or out is a block
// of a larger matrix (attention's per-head products), not a whole contiguous one.
struct GemmShapeTime {
  std::int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false, strided = false;
  std::int64_t calls = 0;
  double seconds = 0;  // summed over the calls
  double flops() const { return 2.0 * double(m) * double(k) * double(n) * double(calls); }
};

void set_gemm_profiling(bool on);
bool gemm_profiling();

// What was recorded since the last clear, the largest total time first.
std::vector<GemmShapeTime> gemm_profile();
void clear_gemm_profile();

// Times one product while profiling is on (used by core/cpu/gemm_f32.cpp around each product).
class GemmProfileScope {
 public:
  GemmProfileScope(std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a, bool trans_b, bool strided);
  ~GemmProfileScope();
  GemmProfileScope(const GemmProfileScope&) = delete;
  GemmProfileScope& operator=(const GemmProfileScope&) = delete;

 private:
  GemmShapeTime shape_;
  std::int64_t start_ns_ = -1;  // -1: profiling was off when the product started
};

}  // namespace moelab::cpu
