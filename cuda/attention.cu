// cuda/attention.cu — fused causal attention on the GPU (mirrors core/cpu/attention.cpp).
//
//   q: [N, T, hd], k, v: [N, S, hd], S >= T -> p = softmax(causal_mask(q @ k^T, -inf)): [N, T, S],
//   y = p @ v: [N, T, hd];  backward: dp = g @ v^T, ds = p * (dp - sum(dp * p)),
//   dq = ds @ k, dk = ds^T @ q, dv = p^T @ g.
// Here the steps run as this backend's own batched GEMM (cuBLAS, cuda/matmul.cu), mask and
// softmax kernels, one launch each on the stream, with the full [N, T, S] score matrix: on a GPU
// the masked half costs little next to a launch per block, which is what the CPU kernel's
// block-by-block skipping would take. The masked entries of p come out exactly 0 (exp(-inf)), so
// softmax's backward gives them exactly 0 gradient, as on the CPU. No host reads.
#include <limits>

#include "cuda/cuda_backend.h"

namespace moelab {

void CudaBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& y, Tensor& p) {
  Tensor scores = Tensor::empty(p.shape(), p.dtype(), p.device());
  matmul(q, k, false, true, scores);                                  // [N, T, hd] @ [N, S, hd]^T
  causal_mask(scores, -std::numeric_limits<double>::infinity(), scores);  // elementwise: in place is safe
  softmax(scores, p);
  matmul(p, v, false, false, y);                                      // [N, T, S] @ [N, S, hd]
}

void CudaBackend::causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& p,
                                            const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) {
  Tensor dp = Tensor::empty(p.shape(), p.dtype(), p.device());
  matmul(dy, v, false, true, dp);    // dp = g @ v^T: [N, T, S]
  Tensor ds = Tensor::empty(p.shape(), p.dtype(), p.device());
  softmax_backward(p, dp, ds);       // 0 wherever p is 0 (the masked entries)
  matmul(ds, k, false, false, dq);   // [N, T, S] @ [N, S, hd]
  matmul(ds, q, true, false, dk);    // [N, T, S]^T @ [N, T, hd]
  matmul(p, dy, true, false, dv);
}

}  // namespace moelab
