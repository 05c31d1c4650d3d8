// cuda/optim.cu — the fused optimizer updates on the GPU: Adam/AdamW and SGD, one kernel per
// parameter tensor (mirrors core/cpu/optim.cpp, which derives the formulas).
//
// PyTorch 1.13's single-tensor formulas, op by op, in the tensor's dtype, with every Python
// scalar rounded to that dtype, and std::fma exactly where the CPU version (and PyTorch's fused
// CPU kernels) have one. With g = grad, p = param:
//
// AdamW (decoupled):                       Adam (L2):
//   p = p * (1 - lr*wd)                      g = fma(p, wd, g)            (only when wd != 0)
//   m = fma(g, 1-beta1, m*beta1)             m, v, p as on the left, without the first line
//   v = fma((1-beta2)*g, g, v*beta2)
//   denom = sqrt(v) / sqrt(1 - beta2^step) + eps
//   p = p + (-(lr / (1 - beta1^step)) * m) / denom
//
// SGD (mu = momentum, buf = momentum buffer):
//   d = wd != 0 ? fma(p, wd, g) : g
//   if mu != 0: buf = first_step ? d : fma(d, 1-dampening, buf*mu)
//               d = nesterov ? fma(buf, mu, d) : buf
//   p = fma(d, -lr, p)
//
// Bitwise agreement with the CPU: the scalars (bias corrections, step size, sqrt(1 - beta2^step),
// 1 - lr*wd, ...) are computed on the host by the very expressions of core/cpu/optim.cpp and
// passed in already rounded to the dtype. On the device every other operation is written with an
// explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn and
// their double versions): nvcc never contracts those into FMAs nor swaps in an approximate
// division or square root, whatever the compiler flags, so each element goes through exactly
// the CPU's sequence of IEEE operations (core/cpu/optim.cpp is compiled with -ffp-contract=off
// for the same reason). Each element is independent: one thread per element, grid-stride.
#include <cmath>
#include <cstdint>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/rounded_math.cuh"

namespace moelab {
namespace {

using namespace cuda::rounded;  // mul, add, ...: no FMA contraction (cuda/rounded_math.cuh)
__device__ inline float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ inline double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

// The per-tensor scalars, rounded to T on the host (core/cpu/optim.cpp's adam_range preamble).
template <class T>
struct AdamScalars {
  T neg_step_size, bc2_sqrt, decay, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  bool decoupled, l2;
};

template <class T>
AdamScalars<T> adam_scalars(const kernels::AdamHyper& h) {
  const double bias_correction1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias_correction2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  AdamScalars<T> s;
  s.neg_step_size = static_cast<T>(-(h.lr / bias_correction1));
  s.bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  s.decay = static_cast<T>(1.0 - h.lr * h.weight_decay);
  s.wd = static_cast<T>(h.weight_decay);
  s.beta1 = static_cast<T>(h.beta1);
  s.one_minus_beta1 = static_cast<T>(1.0 - h.beta1);
  s.beta2 = static_cast<T>(h.beta2);
  s.one_minus_beta2 = static_cast<T>(1.0 - h.beta2);
  s.eps = static_cast<T>(h.eps);
  s.decoupled = h.decoupled;
  s.l2 = !h.decoupled && h.weight_decay != 0;
  return s;
}

template <class T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, std::int64_t n, AdamScalars<T> s) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    T param = p[i];
    T grad = g[i];
    if (s.decoupled) param = mul(param, s.decay);
    if (s.l2) grad = fma_rn(param, s.wd, grad);
    const T mi = fma_rn(grad, s.one_minus_beta1, mul(m[i], s.beta1));
    const T vi = fma_rn(mul(s.one_minus_beta2, grad), grad, mul(v[i], s.beta2));
    const T denom = add(div(sqrt_rn(vi), s.bc2_sqrt), s.eps);
    p[i] = add(param, div(mul(s.neg_step_size, mi), denom));
    m[i] = mi;
    v[i] = vi;
  }
}

template <class T>
struct SgdScalars {
  T wd, mu, one_minus_dampening, neg_lr;
  bool decay, momentum, nesterov, first_step;
};

template <class T>
__global__ void sgd_kernel(T* p, const T* g, T* buf, std::int64_t n, SgdScalars<T> s) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const T param = p[i];
    T d = s.decay ? fma_rn(param, s.wd, g[i]) : g[i];
    if (s.momentum) {
      const T b = s.first_step ? d : fma_rn(d, s.one_minus_dampening, mul(buf[i], s.mu));
      buf[i] = b;
      d = s.nesterov ? fma_rn(b, s.mu, d) : b;
    }
    p[i] = fma_rn(d, s.neg_lr, param);
  }
}

template <class T>
void adam_typed(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const kernels::AdamHyper& h) {
  const std::int64_t n = param.numel();
  if (n == 0) return;
  adam_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
      param.data<T>(), grad.data<T>(), exp_avg.data<T>(), exp_avg_sq.data<T>(), n, adam_scalars<T>(h));
  MOELAB_CUDA_CHECK_LAUNCH();
}

template <class T>
void sgd_typed(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const kernels::SgdHyper& h) {
  const std::int64_t n = param.numel();
  if (n == 0) return;
  SgdScalars<T> s;
  s.wd = static_cast<T>(h.weight_decay);
  s.mu = static_cast<T>(h.momentum);
  s.one_minus_dampening = static_cast<T>(1.0 - h.dampening);
  s.neg_lr = static_cast<T>(-h.lr);
  s.decay = h.weight_decay != 0;
  s.momentum = h.momentum != 0;
  s.nesterov = h.nesterov;
  s.first_step = h.first_step;
  T* buf = s.momentum ? momentum_buffer.data<T>() : nullptr;
  sgd_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(param.data<T>(), grad.data<T>(), buf, n,
                                                                            s);
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                              const kernels::AdamHyper& h) {
  if (param.dtype() == DType::Float64) adam_typed<double>(param, grad, exp_avg, exp_avg_sq, h);
  else adam_typed<float>(param, grad, exp_avg, exp_avg_sq, h);
}

void CudaBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const kernels::SgdHyper& h) {
  if (param.dtype() == DType::Float64) sgd_typed<double>(param, grad, momentum_buffer, h);
  else sgd_typed<float>(param, grad, momentum_buffer, h);
}

}  // namespace moelab
