// nn/optim/clip.h — gradient clipping by the global L2 norm (PyTorch's clip_grad_norm_).
//
// total = sqrt(sum over parameters with a gradient of sum(grad^2))
// if max_norm / (total + 1e-6) < 1, every gradient is multiplied by that ratio, so the clipped
// global norm is just under max_norm; otherwise the gradients are left as they are. Parameters
// without a gradient are skipped. Returns the norm before clipping, as PyTorch does.
//
// The work stays on the gradients' device and nothing is read back (README: the hot path never
// waits on the host): the *_tensor functions return the norm as a float64 [] tensor there; the
// double-returning ones read it back (one device->host copy), for callers that want the value.
//
// Deterministic: each gradient's sum of squares is a fixed-order kernels::sum (accumulated in
// double), and the per-parameter sums are added in parameter order in double. A NaN or infinite
// norm is returned as it is and clip_grad_norm leaves the gradients unchanged (PyTorch 1.13 would
// multiply them by NaN); check the returned value to skip such a step. clip_grad_norm_tensor,
// which cannot look at the norm, multiplies every gradient by the factor: 1 when no clipping is
// needed (no bit changes, but the gradients are new tensors), NaN for a NaN norm and 0 for an
// infinite one, as PyTorch 2 does; such a norm means a gradient is already NaN or infinite.
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

// The same two without reading anything back: the norm as a float64 [] tensor on the gradients'
// device (on the CPU when no parameter has a gradient). The training loop uses these.
Tensor clip_grad_norm_tensor(const std::vector<Variable>& params, double max_norm);
Tensor grad_norm_tensor(const std::vector<Variable>& params);

}  // namespace moelab
