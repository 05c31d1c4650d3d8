// cuda/gemm.cuh — row-major matrix products on column-major cuBLAS (used by cuda/matmul.cu; the
// grouped products in cuda/grouped_matmul.cu have their own kernel, as cuBLAS wants host sizes).
//
// moelab stores matrices row-major; cuBLAS reads them column-major. A row-major [R, C] matrix
// with leading dimension C is, read column-major, its transpose [C, R] with the same leading
// dimension. So instead of C = op(A) @ op(B) (row-major, [M, N]) we ask cuBLAS for
//   C^T = op(B)^T @ op(A)^T       ([N, M] column-major: exactly row-major C's bytes, ldc = N)
// with cuBLAS's "A" being our B and its "B" being our A:
//   our B not transposed: stored [K, N] row-major = [N, K] col-major = op(B)^T  -> CUBLAS_OP_N, ld = N
//   our B transposed:     stored [N, K] row-major = [K, N] col-major = op(B)    -> CUBLAS_OP_T, ld = K
//   our A not transposed: stored [M, K] row-major = [K, M] col-major = op(A)^T  -> CUBLAS_OP_N, ld = K
//   our A transposed:     stored [K, M] row-major = [M, K] col-major = op(A)    -> CUBLAS_OP_T, ld = M
// and cuBLAS's (m, n, k) = (N, M, K). The batched form adds element strides between consecutive
// matrices (M*K, K*N, M*N for contiguous batches); a stride of 0 reuses one matrix.
//
// cuBLAS takes int sizes; larger matrices are an error (not silently truncated).
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "cuda/context.h"
#include "cuda/libraries.h"

namespace moelab::cuda {

inline int gemm_dim(std::int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX) fail("cuda", "GEMM ", what, " = ", value, " does not fit cuBLAS's int sizes");
  return static_cast<int>(value);
}

// out[b] = op(a[b]) @ op(b[b]) for b in [0, batch), all row-major; out: [M, N] per batch.
// a: [M, K] (or [K, M] when trans_a), b: [K, N] (or [N, K] when trans_b). beta = 0: out is
// overwritten (its old contents, even NaN, are never read).
template <class T>
void gemm_row_major(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
                    std::int64_t stride_a, const T* b, std::int64_t stride_b, T* out, std::int64_t stride_out,
                    std::int64_t batch) {
  const int M = gemm_dim(m, "M"), N = gemm_dim(n, "N"), K = gemm_dim(k, "K"), B = gemm_dim(batch, "batch");
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's first operand
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's second operand
  const int ld_b = trans_b ? K : N;
  const int ld_a = trans_a ? M : K;
  const int ld_out = N;
  const T alpha = T(1), beta = T(0);
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "cuBLAS GEMMs are float or double");
  const CublasLibrary& blas = cublas_library();
  if constexpr (std::is_same_v<T, float>) {
    if (B == 1)
      MOELAB_CUDA_CHECK(blas.sgemm(cublas(), op_b, op_a, N, M, K, &alpha, b, ld_b, a, ld_a, &beta, out, ld_out));
    else
      MOELAB_CUDA_CHECK(blas.sgemm_strided_batched(cublas(), op_b, op_a, N, M, K, &alpha, b, ld_b, stride_b, a, ld_a,
                                                   stride_a, &beta, out, ld_out, stride_out, B));
  } else {
    if (B == 1)
      MOELAB_CUDA_CHECK(blas.dgemm(cublas(), op_b, op_a, N, M, K, &alpha, b, ld_b, a, ld_a, &beta, out, ld_out));
    else
      MOELAB_CUDA_CHECK(blas.dgemm_strided_batched(cublas(), op_b, op_a, N, M, K, &alpha, b, ld_b, stride_b, a, ld_a,
                                                   stride_a, &beta, out, ld_out, stride_out, B));
  }
  MOELAB_CUDA_CHECK_LAUNCH();  // under MOELAB_CUDA_SYNC=1: wait for cuBLAS's kernels and check them
}

// The same product with bfloat16 operands (raw 16-bit words, core/bfloat16.h's layout, which is
// CUDA's __nv_bfloat16) and a float32 out: cublasGemmEx with CUDA_R_16BF inputs and
// CUBLAS_COMPUTE_32F, i.e. exact bf16 x bf16 products summed in float32, on the tensor cores
// (bf16 tensor-core instructions are not governed by the TF32 math mode of cuda/context.cu).
// The summation order is cuBLAS's, as for float32: results repeat from run to run, and differ from
// the CPU's widened float32 product by float32 rounding only.
inline void gemm_row_major_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                                const void* a, std::int64_t stride_a, const void* b, std::int64_t stride_b, float* out,
                                std::int64_t stride_out, std::int64_t batch) {
  const int M = gemm_dim(m, "M"), N = gemm_dim(n, "N"), K = gemm_dim(k, "K"), B = gemm_dim(batch, "batch");
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's first operand (see above)
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_b = trans_b ? K : N;
  const int ld_a = trans_a ? M : K;
  const int ld_out = N;
  const float alpha = 1.0f, beta = 0.0f;
  const CublasLibrary& blas = cublas_library();
  if (B == 1)
    MOELAB_CUDA_CHECK(blas.gemm_ex(cublas(), op_b, op_a, N, M, K, &alpha, b, CUDA_R_16BF, ld_b, a, CUDA_R_16BF, ld_a,
                                   &beta, out, CUDA_R_32F, ld_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else
    MOELAB_CUDA_CHECK(blas.gemm_strided_batched_ex(cublas(), op_b, op_a, N, M, K, &alpha, b, CUDA_R_16BF, ld_b,
                                                   stride_b, a, CUDA_R_16BF, ld_a, stride_a, &beta, out, CUDA_R_32F,
                                                   ld_out, stride_out, B, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace moelab::cuda
