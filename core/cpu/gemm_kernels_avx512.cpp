// core/cpu/gemm_kernels_avx512.cpp — the GEMM kernels for AVX-512 CPUs: a 12 x 32 tile of C in
// 24 of the 32 zmm registers (and a narrow 24 x 16 one, also 24 registers). Compiled with -mavx512f -mfma (CMakeLists.txt) and only run where
// the CPU has AVX-512F (core/cpu/cpu_features.h); the template is gemm_micro_kernel.h.
#include <immintrin.h>

#include "core/cpu/gemm_micro_kernel.h"

namespace moelab::cpu {
namespace {

struct Avx512 {
  static constexpr CpuIsa isa = CpuIsa::Avx512;
  static constexpr int lanes = 16, mr = 12, nr = 32, narrow_mr = 24;
  typedef float Vec __attribute__((vector_size(64)));
  // One vbroadcastss from memory (the portable `Vec{} + x` makes GCC add 0.0f first and
  // broadcast from a register, which costs a shuffle-port slot per row).
  static Vec broadcast(float x) { return reinterpret_cast<Vec>(_mm512_set1_ps(x)); }
  static float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
};

}  // namespace

const GemmKernels& gemm_kernels_avx512() { return gemm_detail::kernels_for<Avx512>(); }

}  // namespace moelab::cpu
