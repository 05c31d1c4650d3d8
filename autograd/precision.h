// autograd/precision.h — mixed precision as a policy: which arithmetic the matrix products use.
//
// Training in "bf16" does not mean every number is a bfloat16. It means the matrix products, where
// nearly all the time goes, read bfloat16 copies of their operands, while everything that loses
// accuracy in 8 bits of mantissa stays float32:
//
//   bfloat16 operands, float32 sum   matmul, grouped_matmul (the experts), attention's products
//   float32                          softmax, norms, losses, every reduction, the router's scores,
//                                    the parameters and the optimizer state (master weights)
//
// The policy lives here, in the ops, not in the models: a model written for float32 trains in
// mixed precision when its forward runs inside a PrecisionScope. The scope is thread_local and
// nests like NoGradGuard (autograd/no_grad.h); each op reads it when it runs its forward and keeps
// its choice for the backward, so backward() needs no scope.
//
//   {
//     PrecisionScope bf16(Precision::BFloat16);
//     Variable loss = cross_entropy(model.forward(tokens), targets);
//     loss.backward();                         // the products' gradients in bf16 too
//   }
//
// What a product does under BFloat16 (autograd/ops_matmul.cpp, ops_grouped_matmul.cpp,
// ops_attention.cpp), for float32 operands (float64 ones, gradcheck's, are left alone):
//   forward   y = round(a) @ round(b), each operand rounded to bfloat16 (nearest even), the
//             products and their sum in float32 (a product of two bfloat16s is exact in float32),
//             y kept in float32
//   backward  da = round(g) @ round(b)^T, db = round(a)^T @ round(g), likewise in float32; the
//             rounding itself passes the gradient through unchanged (as the gradient of PyTorch's
//             .to(torch.bfloat16) does)
// This is PyTorch's autocast for these ops with one difference, chosen for accuracy: autocast
// rounds each product's output to bfloat16 as well, moelab keeps the float32 sum (the next product
// rounds its input anyway; the ops between, residual adds and activations, then see float32).
// Tests that compare with autocast allow for that one extra rounding (tests/test_mixed_precision.cpp).
//
// Router scores: MoELayer runs its router inside PrecisionScope(Precision::Float32), so a scheme
// gets float32 scores whatever the policy (as Switch Transformer's "selective precision" and
// DeepSeek-V3 keep the gate in float32); Soft MoE's slot logits likewise (nn/moe/soft_moe.cpp).
#pragma once

#include <string>

namespace moelab {

enum class Precision { Float32, BFloat16 };

// The policy in force on this thread (Float32 unless a PrecisionScope says otherwise).
Precision current_precision();

// "fp32" / "bf16": the names --precision takes and records print.
const char* precision_name(Precision precision);
// Parses "fp32" or "bf16" (also "float32", "bfloat16"); throws moelab::Error naming `what` and
// the choices otherwise.
Precision parse_precision(const std::string& text, const char* what = "--precision");

class PrecisionScope {
 public:
  explicit PrecisionScope(Precision precision);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision previous_;
};

}  // namespace moelab
