// cuda/attention.cu — fused attention on the GPU, causal or not (mirrors core/cpu/attention.cpp).
//
//   q: [B, T, H, hd], k, v: [B, S, H, hd], S >= T -> per head, p = softmax(causal_mask(scale *
//   q_h @ k_h^T, -inf)): [B, H, T, S], y_h = p @ v_h: y [B, T, H, hd];  backward: dp = g_h @ v_h^T,
//   ds = scale * p * (dp - sum(dp * p)), dq_h = ds @ k_h, dk_h = ds^T @ q_h, dv_h = p^T @ g_h.
// Here the steps run as this backend's own kernels, one launch each on the stream: the heads
// permuted to [B, H, T, hd], batched GEMMs over the B*H pairs (cuBLAS, cuda/matmul.cu), the scale,
// mask and softmax kernels, and the permutes back, with the full [T, S] score matrices: on a GPU
// the masked half costs little next to a launch per block of rows, which is what the CPU kernel's
// block-by-block skipping would take. The masked entries of p come out exactly 0 (exp(-inf)), so
// softmax's backward gives them exactly 0 gradient, as on the CPU. No host reads.
// The scale, the mask and the softmax are one kernel when S <= 1024 (cuda::fused_attention_softmax,
// softmax.cu: a warp per row of scores, read once, written once), as are softmax's backward and
// the scale; with the same roundings as the separate kernels, which longer rows (and
// MOELAB_CUDA_GENERIC=1) still take.
#include <limits>

#include "core/kernels/elementwise_ops.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"

namespace moelab {
namespace {

// x: [B, L, H, hd] -> [B*H, L, hd]
Tensor heads_first(CudaBackend& be, const Tensor& x) {
  Tensor out = Tensor::empty({x.size(0) * x.size(2), x.size(1), x.size(3)}, x.dtype(), x.device());
  Tensor view = out.reshape({x.size(0), x.size(2), x.size(1), x.size(3)});
  be.permute(x, {0, 2, 1, 3}, view);
  return out;
}

// h: [B*H, L, hd] -> out: [B, L, H, hd]
void heads_back(CudaBackend& be, const Tensor& h, std::int64_t batch, Tensor& out) {
  be.permute(h.reshape({batch, h.size(0) / batch, h.size(1), h.size(2)}), {0, 2, 1, 3}, out);
}

}  // namespace

void CudaBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, Tensor& y,
                            Tensor& p) {
  // bf16 q, k, v (the bf16 policy's: autograd/ops_attention.cpp) widen exactly to float32 here; the
  // products then run in float32 on the same values, which is what the policy computes.
  if (q.dtype() == DType::BFloat16)
    return attention(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), scale, causal, y, p);
  const std::int64_t batch = q.size(0);
  const Tensor qh = heads_first(*this, q), kh = heads_first(*this, k), vh = heads_first(*this, v);
  Tensor scores = Tensor::empty({qh.size(0), qh.size(1), kh.size(1)}, q.dtype(), q.device());
  matmul(qh, kh, false, true, scores);                                    // [B*H, T, hd] @ [B*H, S, hd]^T
  Tensor weights = p.reshape(scores.shape());
  // Without the mask: the separate scale and softmax kernels (the fused one masks).
  if (!causal || !cuda::fused_attention_softmax(scores, scale, weights)) {  // S > 1024, or MOELAB_CUDA_GENERIC=1
    binary_scalar(kernels::BinaryOp::Mul, scores, scale, false, scores);  // elementwise: in place is safe
    if (causal) causal_mask(scores, -std::numeric_limits<double>::infinity(), scores);
    const std::int64_t keys = scores.size(2);
    softmax(scores, scores.numel() / keys, keys, 1, weights);  // over the last axis: rows of S keys
  }
  Tensor yh = Tensor::empty(qh.shape(), q.dtype(), q.device());
  matmul(weights, vh, false, false, yh);                                  // [B*H, T, S] @ [B*H, S, hd]
  heads_back(*this, yh, batch, y);
}

void CudaBackend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                     const Tensor& p, const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (q.dtype() == DType::BFloat16)  // widened exactly, as in the forward
    return attention_backward(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), scale, causal, p,
                              dy.to(DType::Float32), dq, dk, dv);
  // The mask lives in p (its masked entries are exactly 0), so the backward is the same for both.
  const std::int64_t batch = q.size(0);
  const Tensor qh = heads_first(*this, q), kh = heads_first(*this, k), vh = heads_first(*this, v);
  const Tensor gh = heads_first(*this, dy);
  const Tensor weights = p.reshape({qh.size(0), qh.size(1), kh.size(1)});
  Tensor dp = Tensor::empty(weights.shape(), p.dtype(), p.device());
  matmul(gh, vh, false, true, dp);  // dp = g @ v^T: [B*H, T, S]
  Tensor ds = Tensor::empty(weights.shape(), p.dtype(), p.device());
  if (!cuda::fused_attention_softmax_backward(weights, dp, scale, ds)) {
    const std::int64_t keys = weights.size(2);
    softmax_backward(weights, dp, weights.numel() / keys, keys, 1, ds);  // 0 wherever p is 0 (the masked entries)
    binary_scalar(kernels::BinaryOp::Mul, ds, scale, false, ds);
  }
  Tensor dqh = Tensor::empty(qh.shape(), q.dtype(), q.device()), dkh = Tensor::empty(kh.shape(), q.dtype(), q.device());
  Tensor dvh = Tensor::empty(kh.shape(), q.dtype(), q.device());
  matmul(ds, kh, false, false, dqh);  // [B*H, T, S] @ [B*H, S, hd]
  matmul(ds, qh, true, false, dkh);   // [B*H, T, S]^T @ [B*H, T, hd]
  matmul(weights, gh, true, false, dvh);
  heads_back(*this, dqh, batch, dq);
  heads_back(*this, dkh, batch, dk);
  heads_back(*this, dvh, batch, dv);
}

}  // namespace moelab
