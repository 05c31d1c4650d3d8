// cuda/slot_mix.cu — Soft MoE's token-order mixing on the GPU (mirrors core/cpu/slot_mix.cpp).
//
//   w [B, m, n, p], u [B, m, f, n], v [B, f, n, p]
//   reduce  out[b, c, e, j] = sum_i w[b, i, e, j] u[b, i, c, e]      -> [B, f, n, p]
//   expand  out[b, i, c, e] = sum_j w[b, i, e, j] v[b, c, e, j]      -> [B, m, f, n]
//   dot     out[b, i, e, j] = sum_c u[b, i, c, e] v[b, c, e, j]      -> [B, m, n, p]
// One thread per output element (grid-stride loops), which sums its m, p or f terms from 0 in
// index order with the round-to-nearest intrinsics (no FMA contraction), as the CPU loops do.
// Consecutive threads take consecutive experts (and slots), the innermost axis of every tensor,
// so the reads of w, u, v and the writes are coalesced; the sums are short (m, p and f are
// small where Soft MoE runs in token order), so no shared-memory reduction is needed. The
// slot-order trio (dispatch, combine: consecutive threads on consecutive features c; dot: one
// thread per (b, i, s) with the CPU's eight partial sums) follows the same rules.
#include <cstdint>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"
#include "cuda/rounded_math.cuh"

namespace moelab {
namespace {

using namespace cuda::rounded;  // mul, add: no FMA contraction (cuda/rounded_math.cuh)

// t = ((b * f + c) * n + e) * p + j
template <class T>
__global__ void reduce_kernel(const T* w, const T* u, std::int64_t B, std::int64_t m, std::int64_t n, std::int64_t p,
                              std::int64_t f, T* out) {
  const std::int64_t total = B * f * n * p;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = t % p, e = (t / p) % n, c = (t / p / n) % f, b = t / p / n / f;
    T acc = T(0);
    for (std::int64_t i = 0; i < m; ++i)
      acc = add(acc, mul(w[((b * m + i) * n + e) * p + j], u[((b * m + i) * f + c) * n + e]));
    out[t] = acc;
  }
}

// t = ((b * m + i) * f + c) * n + e
template <class T>
__global__ void expand_kernel(const T* w, const T* v, std::int64_t B, std::int64_t m, std::int64_t n, std::int64_t p,
                              std::int64_t f, T* out) {
  const std::int64_t total = B * m * f * n;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t e = t % n, c = (t / n) % f, bi = t / n / f, b = bi / m;
    T acc = T(0);
    for (std::int64_t j = 0; j < p; ++j) acc = add(acc, mul(w[(bi * n + e) * p + j], v[((b * f + c) * n + e) * p + j]));
    out[t] = acc;
  }
}

// t = ((b * m + i) * n + e) * p + j
template <class T>
__global__ void dot_kernel(const T* u, const T* v, std::int64_t B, std::int64_t m, std::int64_t n, std::int64_t p,
                           std::int64_t f, T* out) {
  const std::int64_t total = B * m * n * p;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = t % p, e = (t / p) % n, bi = t / p / n, b = bi / m;
    T acc = T(0);
    for (std::int64_t c = 0; c < f; ++c) acc = add(acc, mul(u[(bi * f + c) * n + e], v[((b * f + c) * n + e) * p + j]));
    out[t] = acc;
  }
}

// ---- slot order, expert-major slots: w [B, m, S], x [B, m, d], y [S, B, d]

// t = (s * B + b) * d + c
template <class T>
__global__ void dispatch_kernel(const T* w, const T* x, std::int64_t B, std::int64_t m, std::int64_t S, std::int64_t d,
                                T* out) {
  const std::int64_t total = S * B * d;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t c = t % d, b = (t / d) % B, s = t / d / B;
    T acc = T(0);
    for (std::int64_t i = 0; i < m; ++i) acc = add(acc, mul(w[(b * m + i) * S + s], x[(b * m + i) * d + c]));
    out[t] = acc;
  }
}

// t = (b * m + i) * d + c
template <class T>
__global__ void combine_kernel(const T* w, const T* y, std::int64_t B, std::int64_t m, std::int64_t S, std::int64_t d,
                               T* out) {
  const std::int64_t total = B * m * d;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t c = t % d, bi = t / d, b = bi / m;
    T acc = T(0);
    for (std::int64_t s = 0; s < S; ++s) acc = add(acc, mul(w[bi * S + s], y[(s * B + b) * d + c]));
    out[t] = acc;
  }
}

// t = (b * m + i) * S + s; eight partial sums over c mod 8, combined as the CPU does.
template <class T>
__global__ void slot_dot_kernel(const T* x, const T* y, std::int64_t B, std::int64_t m, std::int64_t S, std::int64_t d,
                                T* out) {
  const std::int64_t total = B * m * S;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = t % S, bi = t / S, b = bi / m;
    const T* a = x + bi * d;
    const T* r = y + (s * B + b) * d;
    T lane[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};
    for (std::int64_t c = 0; c < d; ++c) lane[c % 8] = add(lane[c % 8], mul(a[c], r[c]));
    out[t] = add(add(add(lane[0], lane[1]), add(lane[2], lane[3])), add(add(lane[4], lane[5]), add(lane[6], lane[7])));
  }
}

}  // namespace

void CudaBackend::slot_dispatch(const Tensor& w, const Tensor& x, Tensor& out) {
  dispatch_float(w.dtype(), [&]<class T>() {
    dispatch_kernel<T><<<cuda::blocks_for(out.numel()), cuda::kThreads, 0, cuda::stream()>>>(
        w.data<T>(), x.data<T>(), w.size(0), w.size(1), w.size(2), x.size(2), out.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::slot_combine(const Tensor& w, const Tensor& y, Tensor& out) {
  dispatch_float(w.dtype(), [&]<class T>() {
    combine_kernel<T><<<cuda::blocks_for(out.numel()), cuda::kThreads, 0, cuda::stream()>>>(
        w.data<T>(), y.data<T>(), w.size(0), w.size(1), w.size(2), y.size(2), out.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::slot_dot(const Tensor& x, const Tensor& y, Tensor& out) {
  dispatch_float(x.dtype(), [&]<class T>() {
    slot_dot_kernel<T><<<cuda::blocks_for(out.numel()), cuda::kThreads, 0, cuda::stream()>>>(
        x.data<T>(), y.data<T>(), x.size(0), x.size(1), y.size(0), x.size(2), out.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::slot_mix_reduce(const Tensor& w, const Tensor& u, Tensor& out) {
  dispatch_float(w.dtype(), [&]<class T>() {
    reduce_kernel<T><<<cuda::blocks_for(out.numel()), cuda::kThreads, 0, cuda::stream()>>>(
        w.data<T>(), u.data<T>(), w.size(0), w.size(1), w.size(2), w.size(3), u.size(2), out.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::slot_mix_expand(const Tensor& w, const Tensor& v, Tensor& out) {
  dispatch_float(w.dtype(), [&]<class T>() {
    expand_kernel<T><<<cuda::blocks_for(out.numel()), cuda::kThreads, 0, cuda::stream()>>>(
        w.data<T>(), v.data<T>(), w.size(0), w.size(1), w.size(2), w.size(3), v.size(1), out.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::slot_mix_dot(const Tensor& u, const Tensor& v, Tensor& out) {
  dispatch_float(u.dtype(), [&]<class T>() {
    dot_kernel<T><<<cuda::blocks_for(out.numel()), cuda::kThreads, 0, cuda::stream()>>>(
        u.data<T>(), v.data<T>(), u.size(0), u.size(1), u.size(3), v.size(3), u.size(2), out.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace moelab
