// autograd/ops_attention.cpp — fused causal attention and its gradient.
//
// The forward kernel returns the output y and the attention weights p = softmax(masked, scaled
// scores); the grad_fn keeps p (as softmax's grad_fn keeps its output) and q, k, v (as matmul's
// does), and the backward kernel computes all three gradients in one pass (core/cpu/attention.cpp):
//   dp = g_h @ v_h^T, ds = scale * p * (dp - sum(dp * p)), dq_h = ds @ k_h, dk_h = ds^T @ q_h, dv_h = p^T @ g_h.
#include "autograd/ops_attention.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

// q: [B, T, H, hd], k, v: [B, S, H, hd] -> [B, T, H, hd]
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, double scale) {
  kernels::AttentionResult r = kernels::causal_attention(q.data(), k.data(), v.data(), scale);
  Tensor p = r.p;
  return record("causal_attention", std::move(r.y), {q, k, v},
                [p, scale](const std::vector<Variable>& in, const Tensor& g) {
                  kernels::AttentionGrads d =
                      kernels::causal_attention_backward(in[0].data(), in[1].data(), in[2].data(), scale, p, g);
                  return std::vector<Tensor>{d.dq, d.dk, d.dv};
                });
}

}  // namespace moelab
