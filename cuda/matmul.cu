// cuda/matmul.cu — (batched) matrix products on cuBLAS (mirrors core/cpu/matmul.cpp).
//
//   a: [B, M, K] (stored [B, K, M] when trans_a), b: [B, K, N] (stored [B, N, K] when trans_b)
//   -> out: [B, M, N],  out[i] = op(a[i]) @ op(b[i])       (2-D products arrive as B == 1)
// One cublas{S,D}gemmStridedBatched call (plain gemm for B == 1) on the shared stream; the
// row-major/column-major mapping is spelled out in cuda/gemm.cuh. float32 runs in full float32
// (no TF32, see cuda/context.cu), float64 in double. cuBLAS sums each element over K in an
// order fixed by the shapes and the GPU, so results repeat bitwise from run to run (they are not
// bitwise equal to the CPU's, which sums in a different order: parity tests use a tolerance).
// bfloat16 operands (both) give a float32 out through cublasGemmEx on the tensor cores
// (cuda/gemm.cuh's gemm_row_major_bf16).
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"
#include "cuda/gemm.cuh"

namespace moelab {

void CudaBackend::matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) {
  const std::int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  const std::int64_t k = trans_a ? a.size(1) : a.size(2);
  if (a.dtype() == DType::BFloat16) {
    cuda::gemm_row_major_bf16(trans_a, trans_b, m, n, k, a.raw(), m * k, b.raw(), k * n, out.data<float>(), m * n,
                              batch);
    return;
  }
  dispatch_float(a.dtype(), [&]<class T>() {
    cuda::gemm_row_major<T>(trans_a, trans_b, m, n, k, a.data<T>(), m * k, b.data<T>(), k * n, out.data<T>(), m * n,
                            batch);
  });
}

}  // namespace moelab
