// autograd/ops_grouped_matmul.cpp — gradients of the grouped product y_e = x_e @ op(w[e]).
//
// Each group is an ordinary matmul, so with g = dL/dy (g_e its rows of group e):
//   dx_e = g_e @ op(w[e])^T      for all groups at once: dx = grouped_matmul(g, w, offsets, !trans_w)
//   dw[e] = x_e^T @ g_e          [in, out]: grouped_matmul_weight_grad(x, g, offsets, E)
// When w is stored transposed ([E, out, in]), the gradient of the *stored* matrix is the transpose,
// dw[e]^T = g_e^T @ x_e — the same kernel with x and g swapped: grouped_matmul_weight_grad(g, x, ...).
// An empty group gets dw[e] = 0. offsets are an index, not differentiated; the node keeps them.
//
// Under the bf16 policy (autograd/precision.h) x and w are rounded to bfloat16 once, the node keeps
// the copies, and the backward rounds g: every product reads bfloat16 and sums in float32.
#include "autograd/ops_grouped_matmul.h"

#include <utility>

#include "autograd/precision.h"
#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

Variable grouped_matmul(const Variable& x, const Variable& w, const Tensor& offsets, bool trans_w) {
  const bool bf16 = current_precision() == Precision::BFloat16 && x.data().dtype() == DType::Float32 &&
                    w.data().dtype() == DType::Float32;
  // What the products read: the operands, or under bf16 their bfloat16 copies (the node keeps them).
  const Tensor X = bf16 ? x.data().to(DType::BFloat16) : x.data();  // [N, in]
  const Tensor W = bf16 ? w.data().to(DType::BFloat16) : w.data();  // [E, in, out] or [E, out, in]
  Tensor out = kernels::grouped_matmul(X, W, offsets, trans_w);      // [N, out], float32 under bf16
  Variable y = record("grouped_matmul", std::move(out), {x, w},
                [X, W, offsets, trans_w, bf16](const std::vector<Variable>& in, const Tensor& g_out) {
                  const Tensor g = bf16 ? g_out.to(DType::BFloat16) : g_out;
                  const std::int64_t groups = W.size(0);
                  Tensor dx, dw;
                  if (in[0].requires_grad()) dx = kernels::grouped_matmul(g, W, offsets, !trans_w);  // [N, in]
                  if (in[1].requires_grad())
                    dw = trans_w ? kernels::grouped_matmul_weight_grad(g, X, offsets, groups)    // [E, out, in]
                                 : kernels::grouped_matmul_weight_grad(X, g, offsets, groups);   // [E, in, out]
                  return std::vector<Tensor>{dx, dw};
                });
  // shown by a printed graph (autograd/graph_print.h)
  if (y.node() && (trans_w || bf16)) y.node()->detail = trans_w ? (bf16 ? "w^T, bf16" : "w^T") : "bf16";
  return y;
}

}  // namespace moelab
