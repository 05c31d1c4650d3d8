// nn/optim/clip.cpp — global-norm gradient clipping (see clip.h).
#include "nn/optim/clip.h"

#include <cmath>

#include "core/error.h"
#include "core/kernels.h"

namespace moelab {

double grad_norm(const std::vector<Variable>& params) {
  double sum_sq = 0.0;
  for (const Variable& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined() || g.numel() == 0) continue;
    // Square in the gradient's dtype, sum in double along a fixed tree (core/cpu/accumulate.h).
    const Tensor s = kernels::sum(kernels::unary(kernels::UnaryOp::Square, g));
    sum_sq += s.to(DType::Float64).item<double>();
  }
  return std::sqrt(sum_sq);
}

double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  MOELAB_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm", "max_norm must be finite and > 0, got ",
               max_norm);
  const double total = grad_norm(params);
  const double coef = max_norm / (total + 1e-6);
  if (!std::isfinite(total) || coef >= 1.0) return total;
  for (Variable p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    p.set_grad(kernels::binary_scalar(kernels::BinaryOp::Mul, g, coef));
  }
  return total;
}

}  // namespace moelab
