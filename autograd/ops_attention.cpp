// autograd/ops_attention.cpp — fused causal attention and its gradient.
//
// The forward kernel returns the output y and the attention weights p = softmax(masked scores);
// the grad_fn keeps p (as softmax's grad_fn keeps its output) and q, k, v (as matmul's does), and
// the backward kernel computes all three gradients in one pass (core/cpu/attention.cpp):
//   dp = g @ v^T, ds = p * (dp - sum(dp * p)), dq = ds @ k, dk = ds^T @ q, dv = p^T @ g.
#include "autograd/ops_attention.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

// q: [N, T, hd], k, v: [N, S, hd] -> [N, T, hd]
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v) {
  kernels::AttentionResult r = kernels::causal_attention(q.data(), k.data(), v.data());
  Tensor p = r.p;
  return record("causal_attention", std::move(r.y), {q, k, v}, [p](const std::vector<Variable>& in, const Tensor& g) {
    kernels::AttentionGrads d = kernels::causal_attention_backward(in[0].data(), in[1].data(), in[2].data(), p, g);
    return std::vector<Tensor>{d.dq, d.dk, d.dv};
  });
}

}  // namespace moelab
