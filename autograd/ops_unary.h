// autograd/ops_unary.h — the differentiable unary math functions: y = f(x) elementwise, x: [...]
// -> the same shape, float32 or float64; dx = dy * f'(x) (autograd/ops_elementwise.cpp).
//
// One declaration per op of the list MOELAB_UNARY_OPS (core/kernels/elementwise_ops.h, which says
// how to add one), in its order; each is in the autograd registry under its name and gradchecked
// on its domain with no further line (tests/test_gradcheck.cpp walks the list). This header is
// not part of autograd/ops.h on purpose: adding an op adds a line here, and only the files that
// include this header recompile (about a dozen; docs/ARCHITECTURE.md, "Iteration cost"). Include
// it where you call exp, relu, sigmoid and the others on Variables.
#pragma once

#include "autograd/variable.h"

namespace moelab {

Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);         // x > 0
Variable sqrt(const Variable& x);        // x > 0 for a finite gradient
Variable abs(const Variable& x);         // gradient 0 at x == 0
Variable square(const Variable& x);
Variable relu(const Variable& x);        // gradient 0 at x == 0
Variable sigmoid(const Variable& x);
Variable tanh(const Variable& x);
Variable erf(const Variable& x);         // the error function, 2/sqrt(pi) int_0^x exp(-t^2) dt
// GELU, exact (PyTorch's nn.GELU() default): 0.5 x (1 + erf(x / sqrt 2)), composed of the ops above
// (so its gradient is theirs); the ViT's activation (nn/mlp.h activation = gelu).
Variable gelu(const Variable& x);
Variable sin(const Variable& x);
Variable cos(const Variable& x);
Variable reciprocal(const Variable& x);  // 1 / x

}  // namespace moelab
