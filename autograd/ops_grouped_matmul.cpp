// autograd/ops_grouped_matmul.cpp — gradients of the grouped product y_e = x_e @ op(w[e]).
//
// Each group is an ordinary matmul, so with g = dL/dy (g_e its rows of group e):
//   dx_e = g_e @ op(w[e])^T      for all groups at once: dx = grouped_matmul(g, w, offsets, !trans_w)
//   dw[e] = x_e^T @ g_e          [in, out]: grouped_matmul_weight_grad(x, g, offsets, E)
// When w is stored transposed ([E, out, in]), the gradient of the *stored* matrix is the transpose,
// dw[e]^T = g_e^T @ x_e — the same kernel with x and g swapped: grouped_matmul_weight_grad(g, x, ...).
// An empty group gets dw[e] = 0. offsets are an index, not differentiated; the node keeps them.
#include "autograd/ops_grouped_matmul.h"

#include <utility>

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

Variable grouped_matmul(const Variable& x, const Variable& w, const Tensor& offsets, bool trans_w) {
  Tensor out = kernels::grouped_matmul(x.data(), w.data(), offsets, trans_w);  // [N, out]
  Variable y = record("grouped_matmul", std::move(out), {x, w},
                [offsets, trans_w](const std::vector<Variable>& in, const Tensor& g) {
                  const Tensor& X = in[0].data();  // [N, in]
                  const Tensor& W = in[1].data();  // [E, in, out] or [E, out, in]
                  const std::int64_t groups = W.size(0);
                  Tensor dx, dw;
                  if (in[0].requires_grad()) dx = kernels::grouped_matmul(g, W, offsets, !trans_w);  // [N, in]
                  if (in[1].requires_grad())
                    dw = trans_w ? kernels::grouped_matmul_weight_grad(g, X, offsets, groups)    // [E, out, in]
                                 : kernels::grouped_matmul_weight_grad(X, g, offsets, groups);   // [E, in, out]
                  return std::vector<Tensor>{dx, dw};
                });
  if (y.node() && trans_w) y.node()->detail = "w^T";  // shown by a printed graph (autograd/graph_print.h)
  return y;
}

}  // namespace moelab
