// core/cpu/gemm_f32.h — moelab's own single-precision matrix product (see gemm_f32.cpp).
#pragma once

#include <cstdint>

namespace moelab::cpu {

struct GemmKernels;

// out[m, n] = op(a)[m, k] @ op(b)[k, n], all row-major; op(a) = a ([m, k]) or a^T (a stored
// [k, m] when trans_a); likewise b. Overwrites out. Uses every OpenMP thread; k >= 1. Runs the
// kernels of the CPU's widest instruction set (core/cpu/cpu_features.h).
void gemm_f32(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k, std::int64_t n,
              bool trans_a, bool trans_b);

// The same with the given kernels (core/cpu/gemm_kernels.h): for tests and benchmarks that
// compare instruction sets on one machine.
void gemm_f32(const GemmKernels& kernels, const float* a, const float* b, float* out, std::int64_t m,
              std::int64_t k, std::int64_t n, bool trans_a, bool trans_b);

}  // namespace moelab::cpu
