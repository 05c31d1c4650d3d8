// autograd/ops_matmul.cpp — gradients of C = op(A) @ op(B), op = identity or transpose.
//
// For C = A @ B with g = dL/dC:  dA = g @ B^T,  dB = A^T @ g.
// When A is stored transposed (C = A^T @ B), the gradient for the *stored* A is the transpose of
// the one above: dA = (g @ B^T)^T = B @ g^T. Working through the four cases, every gradient is
// again one matmul with transpose flags, so no transpose is ever materialised:
//
//   trans_a trans_b |  dA                        dB
//      no     no    |  g @ B^T   (g, B, 0, 1)     A^T @ g   (A, g, 1, 0)
//      no     yes   |  g @ B     (g, B, 0, 0)     g^T @ A   (g, A, 1, 0)
//      yes    no    |  B @ g^T   (B, g, 0, 1)     A @ g     (A, g, 0, 0)
//      yes    yes   |  B^T @ g^T (B, g, 1, 1)     g^T @ A^T (g, A, 1, 1)
//
// Batched (3-d) products apply the same formulas batch by batch.
//
// Under the bf16 policy (autograd/precision.h) the same four products read bfloat16 copies: the
// forward rounds A and B once and the node keeps those copies; the backward rounds g and
// multiplies it with them (every product then sums in float32 and returns float32).
#include "autograd/ops_matmul.h"

#include <string>
#include <utility>

#include "autograd/precision.h"
#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

Variable matmul(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  const bool bf16 = current_precision() == Precision::BFloat16 && a.data().dtype() == DType::Float32 &&
                    b.data().dtype() == DType::Float32;
  // What the products read: the operands, or under bf16 their bfloat16 copies (the node keeps them).
  const Tensor A = bf16 ? a.data().to(DType::BFloat16) : a.data();
  const Tensor B = bf16 ? b.data().to(DType::BFloat16) : b.data();
  Tensor out = kernels::matmul(A, B, trans_a, trans_b);  // float32 under bf16
  Variable y = record("matmul", std::move(out), {a, b},
                      [A, B, trans_a, trans_b, bf16](const std::vector<Variable>& in, const Tensor& g_out) {
                        const Tensor g = bf16 ? g_out.to(DType::BFloat16) : g_out;
                        Tensor da, db;
                        if (in[0].requires_grad())
                          da = trans_a ? kernels::matmul(B, g, trans_b, true) : kernels::matmul(g, B, false, !trans_b);
                        if (in[1].requires_grad())
                          db = trans_b ? kernels::matmul(g, A, true, trans_a) : kernels::matmul(A, g, !trans_a, false);
                        return std::vector<Tensor>{da, db};
                      });
  // A printed graph (autograd/graph_print.h) shows which product it was: matmul[a^T], [b^T, bf16], ...
  if (y.node() && (trans_a || trans_b || bf16)) {
    std::string detail = trans_a && trans_b ? "a^T, b^T" : (trans_a ? "a^T" : (trans_b ? "b^T" : ""));
    if (bf16) detail += detail.empty() ? "bf16" : ", bf16";
    y.node()->detail = detail;
  }
  return y;
}

}  // namespace moelab
