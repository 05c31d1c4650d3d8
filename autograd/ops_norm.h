// autograd/ops_norm.h — differentiable RMSNorm and LayerNorm over the last axis (fused kernels).
#pragma once

#include "autograd/variable.h"

namespace moelab {

// x: [..., d], w: [d] -> [..., d],  y = x / sqrt(mean(x^2) + eps) * w
Variable rmsnorm(const Variable& x, const Variable& w, double eps = 1e-5);
// x: [..., d], w, b: [d] -> [..., d],  y = (x - mean) / sqrt(var + eps) * w + b  (biased variance)
Variable layernorm(const Variable& x, const Variable& w, const Variable& b, double eps = 1e-5);

}  // namespace moelab
