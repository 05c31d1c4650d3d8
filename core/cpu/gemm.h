// core/cpu/gemm.h — one matrix product on raw row-major buffers, for the CPU kernels that need it.
//
// c[m, n] = op(a)[m, k] @ op(b)[k, n]; op(a) = a^T when trans_a (a stored [k, m]), likewise b.
// Overwrites c; k >= 1. float32 runs moelab's blocked GEMM (core/cpu/gemm_f32.cpp, every OpenMP
// thread; one thread when called inside a parallel region); float64 runs Eigen's GEMM (gradcheck
// only). Used by matmul.cpp and grouped_matmul.cpp.
#pragma once

#include <cstdint>

namespace moelab::cpu {

void gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
          bool trans_b);
void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
          bool trans_b);

}  // namespace moelab::cpu
