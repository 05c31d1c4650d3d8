// autograd/ops_attention.cpp — fused attention, causal and bidirectional, and its gradient.
//
// The forward kernel returns the output y and the attention weights p = softmax(masked, scaled
// scores); the grad_fn keeps p (as softmax's grad_fn keeps its output) and q, k, v (as matmul's
// does), and the backward kernel computes all three gradients in one pass (core/cpu/attention.cpp):
//   dp = g_h @ v_h^T, ds = scale * p * (dp - sum(dp * p)), dq_h = ds @ k_h, dk_h = ds^T @ q_h, dv_h = p^T @ g_h.
//
// Under the bf16 policy (autograd/precision.h) q, k, v and, in the backward, g are rounded to
// bfloat16 (bfloat16 tensors, which the node keeps), so q @ k^T and dp = g @ v^T read bfloat16
// operands and sum in float32 (on the CPU's AMX tiles or VDPBF16PS where it has one: core/cpu/attention.cpp).
// The softmax, p and ds stay float32, and so do the products that read them (p @ v, p^T @ g,
// ds @ k, ds^T @ q, on the bf16 values of v, g, k, q): p is a probability and ds its gradient, and
// rounding them would cost the accuracy the policy keeps float32 for. (PyTorch's bf16 SDPA rounds
// p before p @ v; the tests allow for it.)
#include "autograd/ops_attention.h"

#include "autograd/precision.h"
#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

namespace {

// q: [B, T, H, hd], k, v: [B, S, H, hd] -> [B, T, H, hd], recorded as `name`.
Variable fused_attention(const char* name, const Variable& q, const Variable& k, const Variable& v, double scale,
                         bool causal) {
  const bool bf16 = current_precision() == Precision::BFloat16 && q.data().dtype() == DType::Float32;
  const Tensor Q = bf16 ? q.data().to(DType::BFloat16) : q.data();
  const Tensor K = bf16 ? k.data().to(DType::BFloat16) : k.data();
  const Tensor V = bf16 ? v.data().to(DType::BFloat16) : v.data();
  kernels::AttentionResult r = kernels::attention(Q, K, V, scale, causal);
  Tensor p = r.p;
  Variable y = record(name, std::move(r.y), {q, k, v},
                      [Q, K, V, p, scale, causal, bf16](const std::vector<Variable>&, const Tensor& g) {
                        kernels::AttentionGrads d = kernels::attention_backward(
                            Q, K, V, scale, causal, p, bf16 ? g.to(DType::BFloat16) : g);
                        return std::vector<Tensor>{d.dq, d.dk, d.dv};
                      });
  if (bf16 && y.node()) y.node()->detail = "bf16";
  return y;
}

}  // namespace

Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, double scale) {
  return fused_attention("causal_attention", q, k, v, scale, /*causal=*/true);
}

Variable bidirectional_attention(const Variable& q, const Variable& k, const Variable& v, double scale) {
  return fused_attention("bidirectional_attention", q, k, v, scale, /*causal=*/false);
}

}  // namespace moelab
