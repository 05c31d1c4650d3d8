// core/cpu/matmul.cpp — matrix products on the host: Eigen's GEMM, parallelised by us.
//
// out[b] = op(a[b]) @ op(b[b]) where op is the identity or a transpose; all row-major.
// Eigen's own multi-threaded GEMM scales poorly on the thin shapes of small transformers
// (2048x128 @ 128x128 runs at half the speed of one thread per half). So we split the work
// ourselves: over batches when there are at least as many batches as threads, otherwise into
// contiguous blocks of output rows, and call Eigen's single-threaded GEMM on each piece (Eigen does
// not start threads inside an OpenMP parallel region). Each output element is computed by exactly
// one thread, with no cross-thread reduction, so a run is bitwise repeatable for a given thread
// count (Eigen picks its k-blocking from the block shape, so another thread count may round
// differently in the last bit).
#include <Eigen/Core>
#include <algorithm>
#include <omp.h>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/dispatch.h"

namespace moelab {
namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// out rows [r0, r0 + rows) of op(a) @ op(b) for one batch.
template <class T>
void gemm_rows(const T* a, const T* b, T* out, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
               bool trans_b, std::int64_t r0, std::int64_t rows) {
  Eigen::Map<RowMatrix<T>> c(out + r0 * n, rows, n);
  // op(a) rows [r0, r0+rows): a is [m, k] (or [k, m] stored when transposed).
  auto multiply = [&](const auto& lhs) {
    if (trans_b) {
      Eigen::Map<const RowMatrix<T>> bt(b, n, k);
      c.noalias() = lhs * bt.transpose();
    } else {
      Eigen::Map<const RowMatrix<T>> bb(b, k, n);
      c.noalias() = lhs * bb;
    }
  };
  if (trans_a) {
    Eigen::Map<const RowMatrix<T>> at(a, k, m);
    multiply(at.middleCols(r0, rows).transpose());
  } else {
    Eigen::Map<const RowMatrix<T>> aa(a + r0 * k, rows, k);
    multiply(aa);
  }
}

}  // namespace

void CpuBackend::matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) {
  const std::int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  const std::int64_t k = trans_a ? a.size(1) : a.size(2);
  cpu::dispatch_float(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const std::int64_t a_stride = m * k, b_stride = k * n, c_stride = m * n;
    const int threads = omp_get_max_threads();
    const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
                         static_cast<double>(k);
    if (threads == 1 || flops < 2.0e5) {
      for (std::int64_t i = 0; i < batch; ++i)
        gemm_rows(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b, 0, m);
    } else if (batch >= threads) {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < batch; ++i)
        gemm_rows(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b, 0, m);
    } else {
      // Row blocks: round to multiples of 8 rows so each block keeps whole register tiles.
      const std::int64_t per_thread = std::max<std::int64_t>(8, ((m + threads - 1) / threads + 7) / 8 * 8);
      const std::int64_t blocks = (m + per_thread - 1) / per_thread;
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t i = 0; i < batch; ++i)
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
          const std::int64_t r0 = blk * per_thread;
          const std::int64_t rows = std::min(per_thread, m - r0);
          gemm_rows(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b, r0, rows);
        }
    }
  });
}

}  // namespace moelab
