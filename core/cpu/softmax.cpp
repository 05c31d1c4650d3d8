// core/cpu/softmax.cpp — softmax and log-softmax over the last axis, and their backwards.
//
// x: [N, n] (any leading axes flattened into N rows), one row at a time:
//   softmax:      y = exp(x - m) / s,        m = max(x), s = sum(exp(x - m))
//   log_softmax:  y = (x - m) - log(s)
// Subtracting the row maximum m changes nothing mathematically (it cancels in the ratio) but
// keeps every exponent <= 0, so exp never overflows: logits of 1000 are as safe as logits of 1.
// The largest term is exp(0) = 1, so s >= 1 and log(s) is finite.
//
// Backwards (y is the forward output, dy the gradient of the loss with respect to y):
//   softmax:      dx = y * (dy - sum(dy * y))     (the Jacobian is diag(y) - y y^T)
//   log_softmax:  dx = dy - exp(y) * sum(dy)      (exp(y) is the softmax)
//
// Row sums (s, sum(dy * y), sum(dy)) are pairwise sums in double (core/cpu/accumulate.h):
// accurate, and in a fixed order. Rows are independent, so they are shared among OpenMP threads
// when the tensor is large, with no effect on the results. exp runs through Eigen's vectorised
// implementation, made exact at the extremes (core/cpu/exact_math.h: exp(-2000) is exactly 0). A row that is entirely -inf has no defined softmax and gives NaN (as PyTorch).
#include <Eigen/Core>
#include <cmath>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/exact_math.h"
#include "core/dtype_dispatch.h"

namespace moelab {
namespace {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Calls body(r, n) for every row r of a tensor seen as [rows, n], n = its last axis; rows run in
// parallel when the tensor is large. The front end guarantees numel > 0.
template <class Body>
void for_each_row(const Tensor& x, const Body& body) {
  const std::int64_t n = x.shape().back();
  const std::int64_t rows = x.numel() / n;
#pragma omp parallel for schedule(static) if (x.numel() > cpu::kParallelMinElements && rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) body(r, n);
}

template <class T>
double sum_of(const T* v, std::int64_t n) {
  return cpu::pairwise_sum(0, n, [v](std::int64_t i) { return double(v[i]); });
}

}  // namespace

void CpuBackend::softmax(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_row(x, [&](std::int64_t r, std::int64_t n) {
      ConstRow<T> xr(px + r * n, n);
      Row<T> yr(py + r * n, n);
      const T m = xr.maxCoeff();
      yr = cpu::exact_exp(xr - m);
      yr *= static_cast<T>(1.0 / sum_of(yr.data(), n));
    });
  });
}

void CpuBackend::log_softmax(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_row(x, [&](std::int64_t r, std::int64_t n) {
      ConstRow<T> xr(px + r * n, n);
      Row<T> yr(py + r * n, n);
      const T m = xr.maxCoeff();
      yr = cpu::exact_exp(xr - m);  // scratch: the exponentials, summed then overwritten
      const double log_s = std::log(sum_of(yr.data(), n));
      yr = (xr - m) - static_cast<T>(log_s);
    });
  });
}

void CpuBackend::softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    const T* py = y.data<T>();
    const T* pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    for_each_row(y, [&](std::int64_t r, std::int64_t n) {
      const T* yrow = py + r * n;
      const T* dyrow = pdy + r * n;
      const double dot = cpu::pairwise_sum(0, n, [&](std::int64_t i) { return double(dyrow[i]) * double(yrow[i]); });
      Row<T>(pdx + r * n, n) = ConstRow<T>(yrow, n) * (ConstRow<T>(dyrow, n) - static_cast<T>(dot));
    });
  });
}

void CpuBackend::log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    const T* py = y.data<T>();
    const T* pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    for_each_row(y, [&](std::int64_t r, std::int64_t n) {
      const T* dyrow = pdy + r * n;
      const T total = static_cast<T>(sum_of(dyrow, n));
      Row<T>(pdx + r * n, n) = ConstRow<T>(dyrow, n) - cpu::exact_exp(ConstRow<T>(py + r * n, n)) * total;
    });
  });
}

}  // namespace moelab
