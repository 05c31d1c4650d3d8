// nn/optim/clip.cpp — global-norm gradient clipping (see clip.h).
//
// The *_tensor functions keep everything on the gradients' device: the norm is a float64 []
// tensor and the clipping factor min(1, max_norm / (norm + 1e-6)) is formed from it with tensor
// ops, so a training step that clips never waits on the host. The double-returning functions read
// the norm back (one device->host copy) and decide on the host, as they always did.
#include "nn/optim/clip.h"

#include <cmath>

#include "core/error.h"
#include "core/kernels.h"

namespace moelab {

using kernels::BinaryOp;

Tensor grad_norm_tensor(const std::vector<Variable>& params) {
  Tensor sum_sq;  // float64 [], on the gradients' device
  for (const Variable& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined() || g.numel() == 0) continue;
    // Square in the gradient's dtype, sum in double along a fixed tree (core/cpu/accumulate.h),
    // then add the per-parameter sums in parameter order in double.
    const Tensor s = kernels::sum(kernels::square(g)).to(DType::Float64);
    sum_sq = sum_sq.defined() ? kernels::add(sum_sq, s) : s;
  }
  if (!sum_sq.defined()) {  // no gradient at all: norm 0, on the CPU
    sum_sq = Tensor::empty(Shape{}, DType::Float64, Device::cpu());
    kernels::fill(sum_sq, 0.0);
  }
  return kernels::sqrt(sum_sq);
}

double grad_norm(const std::vector<Variable>& params) { return grad_norm_tensor(params).item<double>(); }

Tensor clip_grad_norm_tensor(const std::vector<Variable>& params, double max_norm) {
  MOELAB_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm", "max_norm must be finite and > 0, got ",
               max_norm);
  const Tensor total = grad_norm_tensor(params);
  // factor = min(1, max_norm / (total + 1e-6)), all in double: exactly the old host arithmetic.
  // A factor of 1 multiplies every gradient by 1, which changes no bit.
  const Tensor coef =
      kernels::div(max_norm, kernels::add(total, 1e-6));
  const Tensor factor = kernels::minimum(coef, 1.0);
  for (Variable p : params) {
    const Tensor& g = p.grad();
    if (!g.defined() || g.numel() == 0) continue;
    // The factor rounded once to the gradient's dtype, as binary_scalar rounds its double.
    p.set_grad(kernels::mul(g, factor.to(g.dtype())));
  }
  return total;
}

// The caller wants the value, so the norm is read back anyway: decide on the host, which leaves
// the gradients untouched (not even copied) when no clipping is needed.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  MOELAB_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm", "max_norm must be finite and > 0, got ",
               max_norm);
  const double total = grad_norm(params);
  const double coef = max_norm / (total + 1e-6);
  if (!std::isfinite(total) || coef >= 1.0) return total;
  for (Variable p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    p.set_grad(kernels::mul(g, coef));
  }
  return total;
}

}  // namespace moelab
