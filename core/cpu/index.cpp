// core/cpu/index.cpp — gathers and scatter-adds by int32 indices on the host.
//
//   index_select      src: [N, inner], index: [M]     -> out: [M, inner]   out[m] = src[index[m]]
//   scatter_add_rows  src: [M, inner], index: [M]     -> out: [R, inner]   out[index[m]] += src[m]
//   scatter_add_rows_scaled  the same with scale: [M]  -> out: [R, inner]   out[index[m]] += scale[m] * src[m]
//     (and its backward: dsrc[m] = scale[m] * dy[index[m]], dscale[m] = src[m] . dy[index[m]])
//   gather_last       src: [rows, K], index: [rows, J] -> out: [rows, J]   out[r, j] = src[r, index[r, j]]
//   scatter_add_last  src: [rows, J], index: [rows, J] -> out: [rows, K]   out[r, index[r, j]] += src[r, j]
// (embedding and its backward are these row ops, called from core/kernels/index.cpp.)
// Each op scans its indices first, serially and before touching any memory, and throws
// IndexRangeError (core/backend.h) for the first one outside [0, limit): the indices are already on
// the host, so the check costs one pass and no copy; core/kernels/index.cpp words the message.
// Row gathers copy whole rows with memcpy, so they
// work for every dtype without knowing it.
//
// Determinism of scatter_add_rows: several m may hit the same destination row, and floating-point
// addition is not associative, so the order of the adds is part of the result. We always add in
// m = 0, 1, ..., M-1 order per destination. Sequentially that is the plain loop. In parallel we
// first bucket the source rows by destination with a stable counting sort (CSR: offsets[r] ..
// offsets[r+1] lists the m with index[m] == r, ascending), then give each thread whole destination
// rows: every row still sums its sources in ascending m, so the result is bitwise the same as the
// sequential loop, whatever the thread count. No atomics.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

// dst[c] += src[c], or dst[c] += *scale * src[c] (the product rounded first) when scale is set.
template <class T>
inline void add_row(T* dst, const T* src, const T* scale, std::int64_t inner) {
  if (!scale) {
    for (std::int64_t c = 0; c < inner; ++c) dst[c] += src[c];
    return;
  }
  const T g = *scale;
  for (std::int64_t c = 0; c < inner; ++c) dst[c] += g * src[c];
}

// out[r, :] += scale[m] * src[m, :] (src[m, :] when scale is null) for the m of each destination
// row, in ascending m (see the header). Each product is rounded before it is added (this file is
// compiled with -ffp-contract=off), so the scaled scatter is bitwise the unscaled one of the products.
template <class T>
void scatter_rows_parallel(const T* src, const T* scale, const std::int32_t* index, std::int64_t m_count,
                           std::int64_t inner, T* out, std::int64_t rows) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t m = 0; m < m_count; ++m) ++offsets[static_cast<std::size_t>(index[m]) + 1];
  for (std::int64_t r = 0; r < rows; ++r) offsets[r + 1] += offsets[r];
  std::vector<std::int64_t> sources(static_cast<std::size_t>(m_count));
  std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
  for (std::int64_t m = 0; m < m_count; ++m) sources[static_cast<std::size_t>(next[index[m]]++)] = m;
#pragma omp parallel for schedule(dynamic, 16) num_threads(cpu::element_threads(m_count * inner))
  for (std::int64_t r = 0; r < rows; ++r) {
    T* dst = out + r * inner;
    for (std::int64_t s = offsets[r]; s < offsets[r + 1]; ++s) {
      const std::int64_t m = sources[static_cast<std::size_t>(s)];
      add_row(dst, src + m * inner, scale ? scale + m : nullptr, inner);
    }
  }
}

// The scatter-adds, sequential (small) or by destination row (parallel): the same sums.
template <class T>
void scatter_rows(const T* src, const T* scale, const std::int32_t* index, std::int64_t m_count, std::int64_t inner,
                  T* out, std::int64_t rows) {
  std::fill_n(out, rows * inner, T(0));
  if (cpu::element_threads(m_count * inner) > 1 && rows > 1) {
    scatter_rows_parallel(src, scale, index, m_count, inner, out, rows);
    return;
  }
  for (std::int64_t m = 0; m < m_count; ++m)
    add_row(out + static_cast<std::int64_t>(index[m]) * inner, src + m * inner, scale ? scale + m : nullptr, inner);
}

// Throws IndexRangeError for the first index[i] outside [0, limit).
void check_range(const std::int32_t* index, std::int64_t n, std::int64_t limit) {
  for (std::int64_t i = 0; i < n; ++i)
    if (index[i] < 0 || index[i] >= limit) throw IndexRangeError(i, index[i], limit);
}

}  // namespace

void CpuBackend::index_select(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t m_count = out.size(0);
  const std::size_t row_bytes = static_cast<std::size_t>(src.shape().inner(0)) * dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.raw());
  char* o = static_cast<char*>(out.raw());
  const std::int32_t* idx = index.data<std::int32_t>();
  check_range(idx, m_count, src.size(0));
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(out.numel())) if (cpu::element_threads(out.numel()) > 1)
  for (std::int64_t m = 0; m < m_count; ++m)
    std::memcpy(o + static_cast<std::size_t>(m) * row_bytes, s + static_cast<std::size_t>(idx[m]) * row_bytes,
                row_bytes);
}

void CpuBackend::scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t m_count = src.size(0), rows = out.size(0), inner = src.shape().inner(0);
  const std::int32_t* idx = index.data<std::int32_t>();
  check_range(idx, m_count, rows);
  dispatch_float(src.dtype(), [&]<class T>() {
    scatter_rows<T>(src.data<T>(), nullptr, idx, m_count, inner, out.data<T>(), rows);
  });
}

void CpuBackend::scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, Tensor& out) {
  const std::int64_t m_count = src.size(0), rows = out.size(0), inner = src.shape().inner(0);
  const std::int32_t* idx = index.data<std::int32_t>();
  check_range(idx, m_count, rows);
  dispatch_float(src.dtype(), [&]<class T>() {
    scatter_rows<T>(src.data<T>(), scale.data<T>(), idx, m_count, inner, out.data<T>(), rows);
  });
}

// Row by row, independent rows on any thread: gy = dy[index[m]]; dsrc[m] = scale[m] * gy (rounded
// products, as mul's gradient); dscale[m] = the row sum of the rounded products src[m] * gy, in
// the pairwise order of kernels::sum over a row (as sum's gradient of the broadcast mul).
void CpuBackend::scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale,
                                                  const Tensor& index, Tensor& dsrc, Tensor& dscale) {
  const std::int64_t m_count = src.size(0), inner = src.shape().inner(0);
  const std::int32_t* idx = index.data<std::int32_t>();
  check_range(idx, m_count, dy.size(0));
  dispatch_float(src.dtype(), [&]<class T>() {
    const T* pdy = dy.data<T>();
    const T* ps = src.data<T>();
    const T* pscale = scale.data<T>();
    T* pdsrc = dsrc.data<T>();
    T* pdscale = dscale.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(m_count * inner)) if (cpu::element_threads(m_count * inner) > 1)
    for (std::int64_t m = 0; m < m_count; ++m) {
      const T* gy = pdy + static_cast<std::int64_t>(idx[m]) * inner;
      const T* row = ps + m * inner;
      T* out = pdsrc + m * inner;
      const T g = pscale[m];
      for (std::int64_t c = 0; c < inner; ++c) out[c] = gy[c] * g;
      pdscale[m] = static_cast<T>(cpu::pairwise_sum(0, inner, [&](std::int64_t c) { return double(T(gy[c] * row[c])); }));
    }
  });
}

void CpuBackend::gather_last(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t k = src.size(-1), j_count = index.size(-1);
  const std::int64_t rows = index.numel() / j_count;
  const std::int32_t* idx = index.data<std::int32_t>();
  check_range(idx, index.numel(), k);
  dispatch_all(src.dtype(), [&]<class T>() {
    const T* s = src.data<T>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(out.numel())) if (cpu::element_threads(out.numel()) > 1)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < j_count; ++j) o[r * j_count + j] = s[r * k + idx[r * j_count + j]];
  });
}

void CpuBackend::scatter_add_last(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t k = out.size(-1), j_count = src.size(-1);
  const std::int64_t rows = src.numel() / j_count;
  const std::int32_t* idx = index.data<std::int32_t>();
  check_range(idx, index.numel(), k);
  dispatch_float(src.dtype(), [&]<class T>() {
    const T* s = src.data<T>();
    T* o = out.data<T>();
    // Each row is its own scatter (ascending j), so rows can run on any thread.
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(src.numel() + out.numel())) if (cpu::element_threads(src.numel() + out.numel()) > 1)
    for (std::int64_t r = 0; r < rows; ++r) {
      T* dst = o + r * k;
      std::fill_n(dst, k, T(0));
      for (std::int64_t j = 0; j < j_count; ++j) dst[idx[r * j_count + j]] += s[r * j_count + j];
    }
  });
}

}  // namespace moelab
