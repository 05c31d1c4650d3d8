// autograd/ops_norm.cpp — norms as fused forward/backward kernel pairs.
//
// The forward kernels save per-row statistics (rstd = 1/sqrt(mean(x^2)+eps) for RMSNorm, and the
// mean too for LayerNorm); the grad_fn keeps those small [N] tensors and hands them to the
// backward kernel, which returns dx, dw (and db) in one pass. With xhat = normalised x:
//   rmsnorm:   dw = sum_rows(g * xhat),           dx = rstd * (g*w - xhat * mean(g*w * xhat))
//   layernorm: dw = sum_rows(g * xhat), db = sum_rows(g),
//              dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat))
#include "autograd/ops_norm.h"

#include <utility>

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

// x: [..., d], w: [d] -> [..., d]
Variable rmsnorm(const Variable& x, const Variable& w, double eps) {
  kernels::NormResult result = kernels::rmsnorm(x.data(), w.data(), eps);
  Tensor rstd = result.rstd;
  return record("rmsnorm", std::move(result.y), {x, w}, [rstd](const std::vector<Variable>& in, const Tensor& g) {
    kernels::NormGrads grads = kernels::rmsnorm_backward(in[0].data(), in[1].data(), rstd, g);
    return std::vector<Tensor>{std::move(grads.dx), std::move(grads.dw)};
  });
}

// x: [..., d], w, b: [d] -> [..., d]
Variable layernorm(const Variable& x, const Variable& w, const Variable& b, double eps) {
  kernels::NormResult result = kernels::layernorm(x.data(), w.data(), b.data(), eps);
  Tensor mean = result.mean, rstd = result.rstd;
  return record("layernorm", std::move(result.y), {x, w, b},
                [mean, rstd](const std::vector<Variable>& in, const Tensor& g) {
                  kernels::NormGrads grads = kernels::layernorm_backward(in[0].data(), in[1].data(), mean, rstd, g);
                  return std::vector<Tensor>{std::move(grads.dx), std::move(grads.dw), std::move(grads.db)};
                });
}

}  // namespace moelab
