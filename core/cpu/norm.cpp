// core/cpu/norm.cpp — fused RMSNorm and LayerNorm, forward and backward, on the host.
//
// x: [N, d] (all leading axes flattened), w, b: [d], mean, rstd: [N].
// Forward, per row (xhat is the normalised row):
//   rmsnorm    rstd = 1 / sqrt(sum(x^2) / d + eps),          xhat = x * rstd,          y = xhat * w
//   layernorm  mean = sum(x) / d,
//              rstd = 1 / sqrt(sum((x - mean)^2) / d + eps), xhat = (x - mean) * rstd, y = xhat * w + b
// The row sums go through cpu::pairwise_sum (core/cpu/accumulate.h): double accumulation whatever
// the dtype, along a fixed tree that depends only on d. The variance uses two passes (mean first,
// then squared deviations), which stays accurate when |mean| >> std, where the one-pass
// E[x^2] - E[x]^2 cancels catastrophically.
//
// Backward, with g = dy * w (the gradient reaching xhat) and row means taken over the d columns:
//   rmsnorm    dx = rstd * (g - xhat * mean(g * xhat))
//   layernorm  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw = sum over rows of dy * xhat,  db = sum over rows of dy
// (rmsnorm: d rstd / d x_i = -rstd^3 x_i / d, so dx_i = rstd g_i - rstd^3 x_i sum_j(g_j x_j) / d,
//  which is the line above; layernorm adds the mean's path, which subtracts mean(g). See llm.c's
//  layernorm_backward for the same algebra.)
//
// Threads and determinism: forward and dx work row by row, so rows run in parallel. dw and db sum
// over rows, so they are computed in a second pass that is parallel over blocks of columns: each
// column adds its rows in the order 0, 1, ..., N-1 (in double) on one thread, so the result is
// bitwise the same for any thread count.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

constexpr std::int64_t kColumnBlock = 64;  // columns per task in the dw/db pass

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// dw[c] = sum_r dy[r, c] * xhat[r, c] and, when db != nullptr, db[c] = sum_r dy[r, c], over rows
// r = 0..n-1 in order, with xhat[r, c] = (x[r, c] - mean[r]) * rstd[r] (mean == nullptr: 0).
template <class T>
void sum_weight_grads(const T* x, const T* mean, const T* rstd, const T* dy, std::int64_t n, std::int64_t d, T* dw,
                      T* db) {
  const std::int64_t blocks = (d + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(n * d)) if (cpu::element_threads(n * d) > 1)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t c0 = blk * kColumnBlock, width = std::min(kColumnBlock, d - c0);
    double acc_w[kColumnBlock] = {}, acc_b[kColumnBlock] = {};
    for (std::int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * d + c0;
      const T* dyr = dy + r * d + c0;
      const T mu = mean ? mean[r] : T(0), rs = rstd[r];
      for (std::int64_t c = 0; c < width; ++c) {
        const T xhat = (xr[c] - mu) * rs;
        acc_w[c] += static_cast<double>(dyr[c]) * static_cast<double>(xhat);
        acc_b[c] += static_cast<double>(dyr[c]);
      }
    }
    for (std::int64_t c = 0; c < width; ++c) {
      dw[c0 + c] = static_cast<T>(acc_w[c]);
      if (db) db[c0 + c] = static_cast<T>(acc_b[c]);
    }
  }
}

}  // namespace

void CpuBackend::rmsnorm(const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) {
  const std::int64_t d = x.size(-1), n = x.numel() / d;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    T* prstd = rstd.data<T>();
    const ConstRow<T> wr(w.data<T>(), d);
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1)
    for (std::int64_t r = 0; r < n; ++r) {
      const ConstRow<T> xr(px + r * d, d);
      const double mean_square = cpu::pairwise_sum(0, d, [&xr](std::int64_t c) {
                                   const double v = xr[c];
                                   return v * v;
                                 }) / static_cast<double>(d);
      const T rs = static_cast<T>(1.0 / std::sqrt(mean_square + eps));
      prstd[r] = rs;
      Row<T>(py + r * d, d) = xr * rs * wr;
    }
  });
}

void CpuBackend::rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                                  Tensor& dw) {
  const std::int64_t d = x.size(-1), n = x.numel() / d;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* prstd = rstd.data<T>();
    T* pdx = dx.data<T>();
    const ConstRow<T> wr(w.data<T>(), d);
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1)
    for (std::int64_t r = 0; r < n; ++r) {
      const T rs = prstd[r];
      const ConstRow<T> xr(px + r * d, d), dyr(pdy + r * d, d);
      // g and xhat are lazy Eigen expressions: computed element by element where used, no buffers.
      const auto g = dyr * wr;
      const auto xhat = xr * rs;
      const double mean_gx =
          cpu::pairwise_sum(0, d, [&](std::int64_t c) { return double(g[c]) * double(xhat[c]); }) / double(d);
      Row<T>(pdx + r * d, d) = rs * (g - xhat * static_cast<T>(mean_gx));
    }
    sum_weight_grads<T>(px, nullptr, prstd, pdy, n, d, dw.data<T>(), nullptr);
  });
}

void CpuBackend::layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                           Tensor& rstd) {
  const std::int64_t d = x.size(-1), n = x.numel() / d;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    T* pmean = mean.data<T>();
    T* prstd = rstd.data<T>();
    const ConstRow<T> wr(w.data<T>(), d), br(b.data<T>(), d);
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1)
    for (std::int64_t r = 0; r < n; ++r) {
      const ConstRow<T> xr(px + r * d, d);
      const double mu = cpu::pairwise_sum(0, d, [&xr](std::int64_t c) { return double(xr[c]); }) / double(d);
      const double var = cpu::pairwise_sum(0, d, [&xr, mu](std::int64_t c) {
                           const double v = xr[c] - mu;
                           return v * v;
                         }) / double(d);
      const T mu_t = static_cast<T>(mu), rs = static_cast<T>(1.0 / std::sqrt(var + eps));
      pmean[r] = mu_t;
      prstd[r] = rs;
      Row<T>(py + r * d, d) = (xr - mu_t) * rs * wr + br;
    }
  });
}

void CpuBackend::layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  const std::int64_t d = x.size(-1), n = x.numel() / d;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* pmean = mean.data<T>();
    const T* prstd = rstd.data<T>();
    T* pdx = dx.data<T>();
    const ConstRow<T> wr(w.data<T>(), d);
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1)
    for (std::int64_t r = 0; r < n; ++r) {
      const T mu = pmean[r], rs = prstd[r];
      const ConstRow<T> xr(px + r * d, d), dyr(pdy + r * d, d);
      const auto g = dyr * wr;
      const auto xhat = (xr - mu) * rs;
      const double mean_g = cpu::pairwise_sum(0, d, [&](std::int64_t c) { return double(g[c]); }) / double(d);
      const double mean_gx =
          cpu::pairwise_sum(0, d, [&](std::int64_t c) { return double(g[c]) * double(xhat[c]); }) / double(d);
      Row<T>(pdx + r * d, d) = rs * (g - static_cast<T>(mean_g) - xhat * static_cast<T>(mean_gx));
    }
    sum_weight_grads<T>(px, pmean, prstd, pdy, n, d, dw.data<T>(), db.data<T>());
  });
}

}  // namespace moelab
