// core/cpu/slot_mix.cpp — Soft MoE's token-order mixing on the host (see core/kernels/slot_mix.cpp).
//
//   w [B, m, n, p], u [B, m, f, n], v [B, f, n, p]
//   reduce  out[b, c, e, j] = sum_i w[b, i, e, j] u[b, i, c, e]      -> [B, f, n, p]
//   expand  out[b, i, c, e] = sum_j w[b, i, e, j] v[b, c, e, j]      -> [B, m, f, n]
//   dot     out[b, i, e, j] = sum_c u[b, i, c, e] v[b, c, e, j]      -> [B, m, n, p]
// Every output element is one running sum in the tensors' dtype, started at 0 and its terms added
// in index order (i, j or c ascending), the same on every thread count and on the GPU
// (cuda/slot_mix.cu adds the same terms in the same order). The sums are short (m tokens, p
// slots, f features), so there is no pairwise tree here. The innermost loop runs over the n
// experts (a contiguous row of u, v, w and out), which the compiler vectorises; p = 1, one slot
// per expert, has its own branch so that the slot axis disappears from the index arithmetic.
// Examples are independent: the loops run one example b per iteration, in parallel for large
// tensors. The slot-order trio (dispatch, combine, dot; expert-major slots) follows the same
// rules, dot with eight interleaved partial sums (below).
#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {

void CpuBackend::slot_mix_reduce(const Tensor& w, const Tensor& u, Tensor& out) {
  const std::int64_t B = w.size(0), m = w.size(1), n = w.size(2), p = w.size(3), f = u.size(2);
  dispatch_float(w.dtype(), [&]<class T>() {
    const T* pw = w.data<T>();
    const T* pu = u.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(u.numel())) if (cpu::element_threads(u.numel()) > 1)
    for (std::int64_t b = 0; b < B; ++b) {
      T* ob = po + b * f * n * p;                     // out[b]: [f, n, p]
      for (std::int64_t k = 0; k < f * n * p; ++k) ob[k] = T(0);
      for (std::int64_t i = 0; i < m; ++i) {
        const T* wi = pw + (b * m + i) * n * p;       // w[b, i]: [n, p]
        for (std::int64_t c = 0; c < f; ++c) {
          const T* uc = pu + ((b * m + i) * f + c) * n;  // u[b, i, c]: [n]
          T* oc = ob + c * n * p;                     // out[b, c]: [n, p]
          if (p == 1) {
            for (std::int64_t e = 0; e < n; ++e) oc[e] += wi[e] * uc[e];
          } else {
            for (std::int64_t e = 0; e < n; ++e)
              for (std::int64_t j = 0; j < p; ++j) oc[e * p + j] += wi[e * p + j] * uc[e];
          }
        }
      }
    }
  });
}

void CpuBackend::slot_mix_expand(const Tensor& w, const Tensor& v, Tensor& out) {
  const std::int64_t B = w.size(0), m = w.size(1), n = w.size(2), p = w.size(3), f = v.size(1);
  dispatch_float(w.dtype(), [&]<class T>() {
    const T* pw = w.data<T>();
    const T* pv = v.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(out.numel())) if (cpu::element_threads(out.numel()) > 1)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < m; ++i) {
        const T* wi = pw + (b * m + i) * n * p;       // w[b, i]: [n, p]
        for (std::int64_t c = 0; c < f; ++c) {
          const T* vc = pv + (b * f + c) * n * p;     // v[b, c]: [n, p]
          T* oc = po + ((b * m + i) * f + c) * n;     // out[b, i, c]: [n]
          if (p == 1) {
            for (std::int64_t e = 0; e < n; ++e) oc[e] = T(0) + wi[e] * vc[e];
          } else {
            for (std::int64_t e = 0; e < n; ++e) {
              T acc = T(0);
              for (std::int64_t j = 0; j < p; ++j) acc += wi[e * p + j] * vc[e * p + j];
              oc[e] = acc;
            }
          }
        }
      }
  });
}

void CpuBackend::slot_mix_dot(const Tensor& u, const Tensor& v, Tensor& out) {
  const std::int64_t B = u.size(0), m = u.size(1), f = u.size(2), n = u.size(3), p = v.size(3);
  dispatch_float(u.dtype(), [&]<class T>() {
    const T* pu = u.data<T>();
    const T* pv = v.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(u.numel())) if (cpu::element_threads(u.numel()) > 1)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < m; ++i) {
        T* oi = po + (b * m + i) * n * p;             // out[b, i]: [n, p]
        for (std::int64_t k = 0; k < n * p; ++k) oi[k] = T(0);
        for (std::int64_t c = 0; c < f; ++c) {
          const T* uc = pu + ((b * m + i) * f + c) * n;  // u[b, i, c]: [n]
          const T* vc = pv + (b * f + c) * n * p;     // v[b, c]: [n, p]
          if (p == 1) {
            for (std::int64_t e = 0; e < n; ++e) oi[e] += uc[e] * vc[e];
          } else {
            for (std::int64_t e = 0; e < n; ++e)
              for (std::int64_t j = 0; j < p; ++j) oi[e * p + j] += uc[e] * vc[e * p + j];
          }
        }
      }
  });
}

// ---- slot order, expert-major slots: w [B, m, S], x [B, m, d], y [S, B, d]. The innermost loops
// run over the d features of a row (contiguous in x, y and out); one example b per iteration.

void CpuBackend::slot_dispatch(const Tensor& w, const Tensor& x, Tensor& out) {
  const std::int64_t B = w.size(0), m = w.size(1), S = w.size(2), d = x.size(2);
  dispatch_float(w.dtype(), [&]<class T>() {
    const T* pw = w.data<T>();
    const T* px = x.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(out.numel())) if (cpu::element_threads(out.numel()) > 1)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t s = 0; s < S; ++s) {
        T* dst = po + (s * B + b) * d;                // out[s, b]: [d]
        for (std::int64_t c = 0; c < d; ++c) dst[c] = T(0);
        for (std::int64_t i = 0; i < m; ++i) {
          const T wv = pw[(b * m + i) * S + s];
          const T* src = px + (b * m + i) * d;        // x[b, i]: [d]
          for (std::int64_t c = 0; c < d; ++c) dst[c] += wv * src[c];
        }
      }
  });
}

void CpuBackend::slot_combine(const Tensor& w, const Tensor& y, Tensor& out) {
  const std::int64_t B = w.size(0), m = w.size(1), S = w.size(2), d = y.size(2);
  dispatch_float(w.dtype(), [&]<class T>() {
    const T* pw = w.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(y.numel())) if (cpu::element_threads(y.numel()) > 1)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < m; ++i) {
        T* dst = po + (b * m + i) * d;                // out[b, i]: [d]
        for (std::int64_t c = 0; c < d; ++c) dst[c] = T(0);
        for (std::int64_t s = 0; s < S; ++s) {
          const T wv = pw[(b * m + i) * S + s];
          const T* src = py + (s * B + b) * d;        // y[s, b]: [d]
          for (std::int64_t c = 0; c < d; ++c) dst[c] += wv * src[c];
        }
      }
  });
}

void CpuBackend::slot_dot(const Tensor& x, const Tensor& y, Tensor& out) {
  const std::int64_t B = x.size(0), m = x.size(1), d = x.size(2), S = y.size(0);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(y.numel())) if (cpu::element_threads(y.numel()) > 1)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < m; ++i) {
        const T* a = px + (b * m + i) * d;            // x[b, i]: [d]
        for (std::int64_t s = 0; s < S; ++s) {
          const T* r = py + (s * B + b) * d;          // y[s, b]: [d]
          // Eight partial sums, lane l taking c = l mod 8 (a vector register's worth at float32).
          T lane[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};
          std::int64_t c = 0;
          for (; c + 8 <= d; c += 8)
            for (int l = 0; l < 8; ++l) lane[l] += a[c + l] * r[c + l];
          for (int l = 0; c < d; ++c, ++l) lane[l] += a[c] * r[c];
          po[(b * m + i) * S + s] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
      }
  });
}

}  // namespace moelab
