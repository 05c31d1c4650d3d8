// core/cpu/gemm_kernels_generic.cpp — the GEMM kernels in portable C++ (GCC/Clang vector
// extensions, 8 floats a vector, a 6 x 16 tile), compiled for the build's baseline: what runs on
// a CPU without AVX2 and FMA, and on other architectures. A multiply-add is fused when the
// baseline has FMA (the tile's `acc += a * b` by -ffp-contract=fast, the small-product loop's by
// __builtin_fmaf), so the products are then bitwise those of the avx2 kernels; without FMA both
// round twice.
#include "core/cpu/gemm_micro_kernel.h"

namespace moelab::cpu {
namespace {

struct Generic {
  static constexpr CpuIsa isa = CpuIsa::Generic;
  static constexpr int lanes = 8, mr = 6, nr = 16, narrow_mr = 12;
  typedef float Vec __attribute__((vector_size(32)));
  static Vec broadcast(float x) { return Vec{} + x; }
  static float fma(float a, float b, float c) {
#if defined(__FMA__)
    return __builtin_fmaf(a, b, c);  // GCC does not contract a scalar chain like small_gemm's
#else
    return c + a * b;
#endif
  }
};

}  // namespace

const GemmKernels& gemm_kernels_generic() { return gemm_detail::kernels_for<Generic>(); }

}  // namespace moelab::cpu
