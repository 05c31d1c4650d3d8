// core/kernels/norm.cpp — checks and dispatch for fused RMSNorm and LayerNorm, forward and backward.
//
// x: [..., d] is seen as N = numel / d rows of d; w, b: [d]; the per-row statistics are [N]:
//   rmsnorm    y = x * rstd * w,              rstd = 1 / sqrt(mean(x^2) + eps)
//   layernorm  y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(mean((x - mean)^2) + eps)
// The backward takes the statistics saved by the forward (it does not recompute them) and returns
// dx: [..., d] and dw (and db): [d], the latter summed over the N rows in a fixed order. The
// formulas are in core/cpu/norm.cpp.
//
// Choices: x, w, b, dy and the statistics share one float dtype (float32 or float64) and one
// device; the statistics come out in x's dtype. d must be >= 1 (a mean over nothing is
// undefined); N == 0 is fine (empty outputs, dw = db = 0). eps must be finite and > 0, so rstd is
// always finite, even for an all-zero row.
#include <cmath>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// x: [..., d] float with d >= 1, and t: `what` of the same dtype and device with the given shape.
void check_like(const Tensor& x, const Tensor& t, const Shape& shape, const char* op, const char* what) {
  check_defined(t, op, what);
  check_same_device(x, t, op);
  MOELAB_CHECK(t.dtype() == x.dtype(), op, what, " is ", t.dtype(), " but x is ", x.dtype());
  MOELAB_CHECK(t.shape() == shape, op, what, " must have shape ", shape, " for x ", x.shape(), ", got ", t.shape());
}

// The row length d of x: [..., d], checked to be a float tensor with d >= 1.
std::int64_t check_rows(const Tensor& x, const char* op) {
  check_floating(x, op, "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) >= 1, op, "x must be [..., d] with d >= 1, got ", x.shape());
  return x.size(-1);
}

void check_eps(double eps, const char* op) {
  MOELAB_CHECK(std::isfinite(eps) && eps > 0.0, op, "eps must be finite and > 0, got ", eps);
}

}  // namespace

NormResult rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  const std::int64_t d = check_rows(x, "rmsnorm");
  check_like(x, w, {d}, "rmsnorm", "w");
  check_eps(eps, "rmsnorm");
  const std::int64_t n = x.numel() / d;
  NormResult result;
  result.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  result.rstd = Tensor::empty({n}, x.dtype(), x.device());
  if (n == 0) return result;
  backend(x.device()).rmsnorm(x, w, eps, result.y, result.rstd);
  return result;
}

NormGrads rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy) {
  const std::int64_t d = check_rows(x, "rmsnorm_backward");
  const std::int64_t n = x.numel() / d;
  check_like(x, w, {d}, "rmsnorm_backward", "w");
  check_like(x, rstd, {n}, "rmsnorm_backward", "rstd");
  check_like(x, dy, x.shape(), "rmsnorm_backward", "dy");
  NormGrads grads;
  grads.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  grads.dw = Tensor::empty({d}, x.dtype(), x.device());
  if (n == 0) {
    fill(grads.dw, 0.0);
    return grads;
  }
  backend(x.device()).rmsnorm_backward(x, w, rstd, dy, grads.dx, grads.dw);
  return grads;
}

NormResult layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const std::int64_t d = check_rows(x, "layernorm");
  check_like(x, w, {d}, "layernorm", "w");
  check_like(x, b, {d}, "layernorm", "b");
  check_eps(eps, "layernorm");
  const std::int64_t n = x.numel() / d;
  NormResult result;
  result.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  result.mean = Tensor::empty({n}, x.dtype(), x.device());
  result.rstd = Tensor::empty({n}, x.dtype(), x.device());
  if (n == 0) return result;
  backend(x.device()).layernorm(x, w, b, eps, result.y, result.mean, result.rstd);
  return result;
}

NormGrads layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                             const Tensor& dy) {
  const std::int64_t d = check_rows(x, "layernorm_backward");
  const std::int64_t n = x.numel() / d;
  check_like(x, w, {d}, "layernorm_backward", "w");
  check_like(x, mean, {n}, "layernorm_backward", "mean");
  check_like(x, rstd, {n}, "layernorm_backward", "rstd");
  check_like(x, dy, x.shape(), "layernorm_backward", "dy");
  NormGrads grads;
  grads.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  grads.dw = Tensor::empty({d}, x.dtype(), x.device());
  grads.db = Tensor::empty({d}, x.dtype(), x.device());
  if (n == 0) {
    fill(grads.dw, 0.0);
    fill(grads.db, 0.0);
    return grads;
  }
  backend(x.device()).layernorm_backward(x, w, mean, rstd, dy, grads.dx, grads.dw, grads.db);
  return grads;
}

}  // namespace moelab::kernels
