// nn/optim/clip.h — gradient clipping by the global L2 norm (PyTorch's clip_grad_norm_).
//
// total = sqrt(sum over parameters with a gradient of sum(grad^2))
// if max_norm / (total + 1e-6) < 1, every gradient is multiplied by that ratio, so the clipped
// global norm is just under max_norm; otherwise the gradients are left as they are. Parameters
// without a gradient are skipped. Returns the norm before clipping, as PyTorch does.
//
// Deterministic: each gradient's sum of squares is a fixed-order kernels::sum (accumulated in
// double), and the per-parameter sums are added in parameter order in double. A NaN or infinite
// norm is returned as it is and the gradients are left unchanged (PyTorch 1.13 would multiply
// them by NaN); check the returned value to skip such a step.
//
//   loss.backward();
//   double norm = clip_grad_norm(model.parameters(), 1.0);
//   optimizer.step();
#pragma once

#include <vector>

#include "autograd/variable.h"

namespace moelab {

// max_norm must be finite and > 0.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm);

// The global L2 norm of the gradients, without changing them (what clip_grad_norm returns).
double grad_norm(const std::vector<Variable>& params);

}  // namespace moelab
