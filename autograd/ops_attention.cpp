// autograd/ops_attention.cpp — fused attention, causal and bidirectional, and its gradient.
//
// The forward kernel returns the output y and the attention weights p = softmax(masked, scaled
// scores); the grad_fn keeps p (as softmax's grad_fn keeps its output) and q, k, v (as matmul's
// does), and the backward kernel computes all three gradients in one pass (core/cpu/attention.cpp):
//   dp = g_h @ v_h^T, ds = scale * p * (dp - sum(dp * p)), dq_h = ds @ k_h, dk_h = ds^T @ q_h, dv_h = p^T @ g_h.
#include "autograd/ops_attention.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

namespace {

// q: [B, T, H, hd], k, v: [B, S, H, hd] -> [B, T, H, hd], recorded as `name`.
Variable fused_attention(const char* name, const Variable& q, const Variable& k, const Variable& v, double scale,
                         bool causal) {
  kernels::AttentionResult r = kernels::attention(q.data(), k.data(), v.data(), scale, causal);
  Tensor p = r.p;
  return record(name, std::move(r.y), {q, k, v},
                [p, scale, causal](const std::vector<Variable>& in, const Tensor& g) {
                  kernels::AttentionGrads d =
                      kernels::attention_backward(in[0].data(), in[1].data(), in[2].data(), scale, causal, p, g);
                  return std::vector<Tensor>{d.dq, d.dk, d.dv};
                });
}

}  // namespace

Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, double scale) {
  return fused_attention("causal_attention", q, k, v, scale, /*causal=*/true);
}

Variable bidirectional_attention(const Variable& q, const Variable& k, const Variable& v, double scale) {
  return fused_attention("bidirectional_attention", q, k, v, scale, /*causal=*/false);
}

}  // namespace moelab
