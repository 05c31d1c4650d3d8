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

#include <utility>

#include "autograd/precision.h"
#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {
namespace {

// y = round(A) @ round(B) in float32 (see above), recorded as "matmul" with detail "bf16".
Variable matmul_bf16(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  const Tensor A = a.data().to(DType::BFloat16), B = b.data().to(DType::BFloat16);
  Tensor out = kernels::matmul(A, B, trans_a, trans_b);  // float32
  return record("matmul", std::move(out), {a, b},
                [A, B, trans_a, trans_b](const std::vector<Variable>& in, const Tensor& g32) {
                  const Tensor g = g32.to(DType::BFloat16);
                  Tensor da, db;
                  if (in[0].requires_grad())
                    da = trans_a ? kernels::matmul(B, g, trans_b, true) : kernels::matmul(g, B, false, !trans_b);
                  if (in[1].requires_grad())
                    db = trans_b ? kernels::matmul(g, A, true, trans_a) : kernels::matmul(A, g, !trans_a, false);
                  return std::vector<Tensor>{da, db};
                });
}

}  // namespace

Variable matmul(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  if (current_precision() == Precision::BFloat16 && a.data().dtype() == DType::Float32 &&
      b.data().dtype() == DType::Float32) {
    Variable y = matmul_bf16(a, b, trans_a, trans_b);
    if (y.node()) y.node()->detail = std::string(trans_a ? "a^T, " : "") + (trans_b ? "b^T, " : "") + "bf16";
    return y;
  }
  Tensor out = kernels::matmul(a.data(), b.data(), trans_a, trans_b);
  Variable y = record("matmul", std::move(out), {a, b},
                [trans_a, trans_b](const std::vector<Variable>& in, const Tensor& g) {
                  const Tensor& A = in[0].data();
                  const Tensor& B = in[1].data();
                  Tensor da, db;
                  if (in[0].requires_grad())
                    da = trans_a ? kernels::matmul(B, g, trans_b, true) : kernels::matmul(g, B, false, !trans_b);
                  if (in[1].requires_grad())
                    db = trans_b ? kernels::matmul(g, A, true, trans_a) : kernels::matmul(A, g, !trans_a, false);
                  return std::vector<Tensor>{da, db};
                });
  // A printed graph (autograd/graph_print.h) shows which product it was: matmul[a^T], [b^T], [a^T, b^T].
  if (y.node() && (trans_a || trans_b))
    y.node()->detail = trans_a && trans_b ? "a^T, b^T" : (trans_a ? "a^T" : "b^T");
  return y;
}

}  // namespace moelab
