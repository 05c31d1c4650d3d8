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

// The same on strided matrices: row r of the stored a starts at a + r * lda (a is [m, k], or [k, m]
// when trans_a), likewise b with ldb, and row i of out at out + i * ldc. For blocks of a larger
// matrix: attention's rows of one head's scores (core/cpu/attention.cpp). Always the blocked path
// (never the unpacked small-product loop, which was slower on attention's blocks); the same bits.
void gemm_f32_strided(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* out, std::int64_t ldc,
                      std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a, bool trans_b);
void gemm_f32_strided(const GemmKernels& kernels, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                      float* out, std::int64_t ldc, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
                      bool trans_b);

}  // namespace moelab::cpu
