// core/cpu/gemm_kernels_avx2.cpp — the GEMM kernels for AVX2 + FMA CPUs: a 6 x 16 tile of C in
// 12 of the 16 ymm registers (and a narrow 12 x 8 one, also 12 registers). Compiled with -mavx2 -mfma (CMakeLists.txt) and only run where the
// CPU has both (core/cpu/cpu_features.h); the template is gemm_micro_kernel.h.
#include <immintrin.h>

#include "core/cpu/gemm_micro_kernel.h"

namespace moelab::cpu {
namespace {

struct Avx2 {
  static constexpr CpuIsa isa = CpuIsa::Avx2;
  static constexpr int lanes = 8, mr = 6, nr = 16, narrow_mr = 12;
  typedef float Vec __attribute__((vector_size(32)));
  static Vec broadcast(float x) { return reinterpret_cast<Vec>(_mm256_set1_ps(x)); }  // one vbroadcastss
  static float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
};

}  // namespace

const GemmKernels& gemm_kernels_avx2() { return gemm_detail::kernels_for<Avx2>(); }

}  // namespace moelab::cpu
