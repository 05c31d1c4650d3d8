// core/cpu/optim.cpp — the fused optimizer updates on the host: Adam/AdamW and SGD, one pass.
//
// Written as a chain of tensor ops, an AdamW step reads and writes each parameter-sized array
// about ten times (PyTorch's single-tensor loop does exactly that). Here each element is loaded
// once, updated in registers, and stored once; large tensors are cut into fixed chunks that
// OpenMP threads share. Every element is computed by the same expression wherever the chunk
// boundaries fall, so the result does not depend on the thread count.
//
// The formulas are PyTorch 1.13's (torch/optim/adamw.py, adam.py, sgd.py: _single_tensor_*),
// op by op, in the tensor's dtype, with every Python scalar rounded to that dtype as PyTorch does.
// PyTorch's CPU kernels fuse some of those ops (checked bitwise against torch 1.13 in float32):
//   x.add_(y, alpha=a)        -> fma(y, a, x)
//   x.addcmul_(y, z, value=c) -> fma(c*y, z, x)
//   x.addcdiv_(y, z, value=c) -> x + (c*y) / z
// so std::fma appears exactly where PyTorch's results need it. With g = grad, p = param:
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
// The bias corrections, step size and sqrt(1 - beta2^step) are computed in double, as Python does.
// (torch's fused ops above are those of its AVX2/AVX-512 CPU kernels, which x86-64 machines use.)
#include <algorithm>
#include <cmath>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/chunks.h"
#include "core/dtype_dispatch.h"

namespace moelab {
namespace {

// std::sqrt may set errno (for a negative input), a side effect that keeps GCC from vectorising
// this loop; CMakeLists.txt compiles this file with -fno-math-errno, which drops only the errno
// write, and with -ffp-contract=off, so that a * b + c is never fused behind our back (GCC does
// so by default, and PyTorch's rounding would be lost); the only FMAs are the std::fma above.
template <class T>
void adam_range(T* p, const T* g, T* m, T* v, std::int64_t begin, std::int64_t end, const kernels::AdamHyper& h) {
  const double bias_correction1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias_correction2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  const T neg_step_size = static_cast<T>(-(h.lr / bias_correction1));
  const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  const T decay = static_cast<T>(1.0 - h.lr * h.weight_decay);
  const T wd = static_cast<T>(h.weight_decay);
  const T beta1 = static_cast<T>(h.beta1), one_minus_beta1 = static_cast<T>(1.0 - h.beta1);
  const T beta2 = static_cast<T>(h.beta2), one_minus_beta2 = static_cast<T>(1.0 - h.beta2);
  const T eps = static_cast<T>(h.eps);
  const bool l2 = !h.decoupled && h.weight_decay != 0;
  for (std::int64_t i = begin; i < end; ++i) {
    T param = p[i];
    T grad = g[i];
    if (h.decoupled) param = param * decay;
    if (l2) grad = std::fma(param, wd, grad);
    const T mi = std::fma(grad, one_minus_beta1, m[i] * beta1);
    const T vi = std::fma(one_minus_beta2 * grad, grad, v[i] * beta2);
    const T denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = param + (neg_step_size * mi) / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

template <class T>
void sgd_range(T* p, const T* g, T* buf, std::int64_t begin, std::int64_t end, const kernels::SgdHyper& h) {
  const T wd = static_cast<T>(h.weight_decay);
  const T mu = static_cast<T>(h.momentum);
  const T one_minus_dampening = static_cast<T>(1.0 - h.dampening);
  const T neg_lr = static_cast<T>(-h.lr);
  const bool decay = h.weight_decay != 0, momentum = h.momentum != 0;
  for (std::int64_t i = begin; i < end; ++i) {
    T d = decay ? std::fma(p[i], wd, g[i]) : g[i];
    if (momentum) {
      const T b = h.first_step ? d : std::fma(d, one_minus_dampening, buf[i] * mu);
      buf[i] = b;
      d = h.nesterov ? std::fma(b, mu, d) : b;
    }
    p[i] = std::fma(d, neg_lr, p[i]);
  }
}

}  // namespace

void CpuBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                             const kernels::AdamHyper& h) {
  dispatch_float(param.dtype(), [&]<class T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    cpu::for_chunks(param.numel(), [&](std::int64_t begin, std::int64_t end) { adam_range(p, g, m, v, begin, end, h); });
  });
}

void CpuBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const kernels::SgdHyper& h) {
  dispatch_float(param.dtype(), [&]<class T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* buf = h.momentum != 0 ? momentum_buffer.data<T>() : nullptr;
    cpu::for_chunks(param.numel(), [&](std::int64_t begin, std::int64_t end) { sgd_range(p, g, buf, begin, end, h); });
  });
}

}  // namespace moelab
