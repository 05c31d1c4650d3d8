// cuda/grouped_matmul.cu — grouped matrix products on cuBLAS, the MoE expert layers (mirrors
// core/cpu/grouped_matmul.cpp).
//
// Group e owns rows r0 = offsets[e] .. r0 + rows - 1 of x (offsets are host integers, checked
// by the front end):
//   forward:      out[r0 : r0+rows] = x[r0 : r0+rows] @ op(w[e])
//                 x_e: [rows, in], w[e]: [in, out] (stored [out, in] when trans_w) -> [rows, out]
//   weight grad:  dw[e] = x_e^T @ dy_e        [in, rows] @ [rows, out] -> [in, out]
//                 (zeros, by cudaMemsetAsync, for a group with no rows)
// Each group is one ordinary cuBLAS GEMM on pointers into the contiguous tensors (no copies),
// enqueued one after another on the shared stream. Every output element belongs to exactly one
// GEMM and is summed over k by cuBLAS in a fixed order, so the results are deterministic.
//
// Why a loop of GEMMs and not cublasGemmGroupedBatchedEx (CUDA >= 12.5): the grouped API wants
// arrays of per-group sizes on the host and arrays of matrix pointers in device memory, i.e. an
// extra upload per call, and groups of different sizes are its whole point only when there are
// hundreds of small groups. moelab's MoE layers have E = 4..64 experts with tens to thousands of
// rows each; E launches of a few microseconds each are small next to the GEMMs themselves, and the
// loop reads exactly like the CPU version. Switching later changes only this file.
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"
#include "cuda/gemm.cuh"

namespace moelab {

void CudaBackend::grouped_matmul(const Tensor& x, const Tensor& w, const std::vector<std::int64_t>& offsets,
                                 bool trans_w, Tensor& out) {
  // x: [N, in], w: [E, in, out] or [E, out, in], out: [N, out]; in >= 1 (checked by the front end).
  const std::int64_t groups = w.size(0), in = x.size(1), n_out = out.size(1);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* po = out.data<T>();
    for (std::int64_t e = 0; e < groups; ++e) {
      const std::int64_t r0 = offsets[static_cast<std::size_t>(e)];
      const std::int64_t rows = offsets[static_cast<std::size_t>(e) + 1] - r0;
      if (rows == 0) continue;
      // [rows, in] @ op(w[e]) -> [rows, n_out]
      cuda::gemm_row_major<T>(false, trans_w, rows, n_out, in, px + r0 * in, 0, pw + e * in * n_out, 0,
                              po + r0 * n_out, 0, 1);
    }
  });
}

void CudaBackend::grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy,
                                             const std::vector<std::int64_t>& offsets, Tensor& dw) {
  // x: [N, in], dy: [N, out], dw: [E, in, out]; dw[e] = x_e^T @ dy_e with k = rows of group e.
  const std::int64_t groups = dw.size(0), in = x.size(1), n_out = dy.size(1);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    T* pdw = dw.data<T>();
    for (std::int64_t e = 0; e < groups; ++e) {
      const std::int64_t r0 = offsets[static_cast<std::size_t>(e)];
      const std::int64_t rows = offsets[static_cast<std::size_t>(e) + 1] - r0;
      T* dst = pdw + e * in * n_out;
      if (rows == 0) {  // an expert that received no tokens gets a zero gradient (all-zero bits = 0.0)
        MOELAB_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<std::size_t>(in * n_out) * sizeof(T), cuda::stream()));
        continue;
      }
      // x_e stored [rows, in] read transposed: [in, rows] @ [rows, n_out] -> [in, n_out]
      cuda::gemm_row_major<T>(true, false, in, n_out, rows, px + r0 * in, 0, pdy + r0 * n_out, 0, dst, 0, 1);
    }
  });
}

}  // namespace moelab
