// core/cpu/softmax.cpp — softmax and log-softmax over the last axis, softmax over any axis, and
// their backwards.
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
//
// Softmax over another axis (Soft MoE's dispatch weights: over the m tokens of [B, m, S]): x is
// seen as [outer, n, inner] and each of the outer * inner columns (n elements, stride inner) is
// copied into a contiguous scratch row, run through the same row routine, and copied back. This
// replaces transpose -> softmax -> transpose (two full copies of the tensor each way) with the
// same bits: no step of the row routine depends on where the row sits in memory (exp's scalar
// head and tail compute as its vector lanes do, core/cpu/exact_math.h; the sums' order is by index).
// Short columns (n < 8 and below Eigen's vector width for T; m = 4 tokens in Soft MoE) take a
// faster road to the same bits: a row that short never reaches Eigen's vector body or pairwise_sum's
// tree, so the row routine is a running max, exp, a sum in double in index order from 0 and one
// reciprocal, and that same arithmetic runs here across the inner axis, which is contiguous, a
// vector of columns at a time, with no scratch copies. tests/test_softmax.cpp checks both roads
// against the transposed one.
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/exact_math.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Calls body(r, n) for every row r of a tensor seen as [rows, n] (n: its last axis unless given;
// a softmax over an axis followed only by size-1 axes passes that axis' size); rows run in
// parallel when the tensor is large. The front end guarantees numel > 0.
template <class Body>
void for_each_row(const Tensor& x, const Body& body, std::int64_t row_length = 0) {
  const std::int64_t n = row_length > 0 ? row_length : x.shape().back();
  const std::int64_t rows = x.numel() / n;
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1 && rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) body(r, n);
}

template <class T>
double sum_of(const T* v, std::int64_t n) {
  return cpu::pairwise_sum(0, n, [v](std::int64_t i) { return double(v[i]); });
}

// The row routines, shared by the last-axis path and the strided one.
template <class T>
void softmax_row(const T* x, T* y, std::int64_t n) {
  ConstRow<T> xr(x, n);
  Row<T> yr(y, n);
  const T m = xr.maxCoeff();
  cpu::exp_shifted(x, m, y, n);
  yr *= static_cast<T>(1.0 / sum_of(yr.data(), n));
}

template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, std::int64_t n) {
  const double dot = cpu::pairwise_sum(0, n, [&](std::int64_t i) { return double(dy[i]) * double(y[i]); });
  Row<T>(dx, n) = ConstRow<T>(y, n) * (ConstRow<T>(dy, n) - static_cast<T>(dot));
}

// Scratch rows for the strided path: `count` rows of n elements in one tensor (64-byte aligned,
// as every tensor), each starting on a 64-byte line.
template <class T>
class ScratchRows {
 public:
  ScratchRows(int count, std::int64_t n)
      : stride_((n + kLine - 1) / kLine * kLine), block_(Tensor::empty({count * stride_}, dtype_of<T>())) {}
  T* row(int k) { return block_.data<T>() + k * stride_; }

 private:
  static constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));  // elements per line
  std::int64_t stride_;
  Tensor block_;
};

// For a tensor seen as [outer, n, inner] with inner > 1: calls body(scratch, base) for every
// column: scratch = the thread's scratch rows, base = the offset of the column's first element
// (the others follow at stride inner). Columns run in parallel when the tensor is large.
template <class T, class Body>
void for_each_column(std::int64_t outer, std::int64_t n, std::int64_t inner, int scratch_rows, const Body& body) {
#pragma omp parallel num_threads(cpu::element_threads(outer * n * inner)) if (cpu::element_threads(outer * n * inner) > 1)
  {
    ScratchRows<T> scratch(scratch_rows, n);
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) body(scratch, o * n * inner + i);
  }
}

// True when a row of n elements of T stays in Eigen's scalar code and pairwise_sum's tail loop.
template <class T>
bool short_row(std::int64_t n) {
  return n < 8 && n < static_cast<std::int64_t>(Eigen::internal::packet_traits<T>::size);
}

// Softmax of the short columns of [outer, n, inner], the row routine's steps across i.
template <class T>
void softmax_short_columns(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner) {
#pragma omp parallel num_threads(cpu::element_threads(outer * n * inner)) if (cpu::element_threads(outer * n * inner) > 1)
  {
    std::vector<T> m_buffer(static_cast<std::size_t>(inner));
    std::vector<double> s_buffer(static_cast<std::size_t>(inner));
    T* m = m_buffer.data();       // per column: the max, then 1 / s
    double* s = s_buffer.data();  // per column: the sum of the exponentials
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < outer; ++o) {
      const T* xo = x + o * n * inner;  // x[o]: [n, inner]
      T* yo = y + o * n * inner;
      for (std::int64_t i = 0; i < inner; ++i) m[i] = xo[i];
      for (std::int64_t k = 1; k < n; ++k)  // Eigen's scalar max: (m < v) ? v : m
        for (std::int64_t i = 0; i < inner; ++i) m[i] = m[i] < xo[k * inner + i] ? xo[k * inner + i] : m[i];
      const ConstRow<T> max_row(m, inner);
      for (std::int64_t k = 0; k < n; ++k)
        Row<T>(yo + k * inner, inner) = cpu::exact_exp(ConstRow<T>(xo + k * inner, inner) - max_row);
      for (std::int64_t i = 0; i < inner; ++i) s[i] = 0.0;
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < inner; ++i) s[i] += double(yo[k * inner + i]);
      for (std::int64_t i = 0; i < inner; ++i) m[i] = static_cast<T>(1.0 / s[i]);
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < inner; ++i) yo[k * inner + i] *= m[i];
    }
  }
}

// softmax_backward_row's steps across i for short columns: dot in double in index order.
template <class T>
void softmax_backward_short_columns(const T* y, const T* dy, T* dx, std::int64_t outer, std::int64_t n,
                                    std::int64_t inner) {
#pragma omp parallel num_threads(cpu::element_threads(outer * n * inner)) if (cpu::element_threads(outer * n * inner) > 1)
  {
    std::vector<double> dot_buffer(static_cast<std::size_t>(inner));
    std::vector<T> dot_t_buffer(static_cast<std::size_t>(inner));
    double* dot = dot_buffer.data();  // per column: sum(dy * y) in double
    T* dot_t = dot_t_buffer.data();   // ... rounded to T
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < outer; ++o) {
      const std::int64_t base = o * n * inner;
      for (std::int64_t i = 0; i < inner; ++i) dot[i] = 0.0;
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < inner; ++i)
          dot[i] += double(dy[base + k * inner + i]) * double(y[base + k * inner + i]);
      for (std::int64_t i = 0; i < inner; ++i) dot_t[i] = static_cast<T>(dot[i]);
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < inner; ++i) {
          const std::int64_t at = base + k * inner + i;
          dx[at] = y[at] * (dy[at] - dot_t[i]);
        }
    }
  }
}

}  // namespace

void CpuBackend::softmax(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    if (inner == 1) {
      for_each_row(x, [&](std::int64_t r, std::int64_t len) { softmax_row(px + r * len, py + r * len, len); }, n);
      return;
    }
    if (short_row<T>(n)) {
      softmax_short_columns(px, py, outer, n, inner);
      return;
    }
    for_each_column<T>(outer, n, inner, 2, [&](ScratchRows<T>& scratch, std::int64_t base) {
      T* xs = scratch.row(0);
      T* ys = scratch.row(1);
      for (std::int64_t k = 0; k < n; ++k) xs[k] = px[base + k * inner];
      softmax_row(xs, ys, n);
      for (std::int64_t k = 0; k < n; ++k) py[base + k * inner] = ys[k];
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
      cpu::exp_shifted(xr.data(), m, yr.data(), n);  // scratch: the exponentials, summed then overwritten
      const double log_s = std::log(sum_of(yr.data(), n));
      yr = (xr - m) - static_cast<T>(log_s);
    });
  });
}

void CpuBackend::softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t outer, std::int64_t n,
                                  std::int64_t inner, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    const T* py = y.data<T>();
    const T* pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    if (inner == 1) {
      for_each_row(y, [&](std::int64_t r, std::int64_t len) {
        softmax_backward_row(py + r * len, pdy + r * len, pdx + r * len, len);
      }, n);
      return;
    }
    if (short_row<T>(n)) {
      softmax_backward_short_columns(py, pdy, pdx, outer, n, inner);
      return;
    }
    for_each_column<T>(outer, n, inner, 3, [&](ScratchRows<T>& scratch, std::int64_t base) {
      T* ys = scratch.row(0);
      T* dys = scratch.row(1);
      T* dxs = scratch.row(2);
      for (std::int64_t k = 0; k < n; ++k) {
        ys[k] = py[base + k * inner];
        dys[k] = pdy[base + k * inner];
      }
      softmax_backward_row(ys, dys, dxs, n);
      for (std::int64_t k = 0; k < n; ++k) pdx[base + k * inner] = dxs[k];
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
