// core/cpu/matmul.cpp — matrix products on the host.
//
// out[b] = op(a[b]) @ op(b[b]) where op is the identity or a transpose; all row-major.
//   float32: moelab's own blocked GEMM (core/cpu/gemm_f32.cpp), the training hot path.
//   float64: Eigen's GEMM (used by gradcheck, where speed does not matter).
// Batches run one after another, each product using every thread, unless there are at least as
// many batches as threads and each product is small: then each thread takes whole batches.
// No result depends on the thread count (each element is summed over k in a fixed order).
#include <algorithm>
#include <omp.h>

#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/gemm.h"

namespace moelab {

void CpuBackend::matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) {
  const std::int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  const std::int64_t k = trans_a ? a.size(1) : a.size(2);
  dispatch_float(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const std::int64_t a_stride = m * k, b_stride = k * n, c_stride = m * n;
    const bool small = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < 4.0e6;
    if (batch >= omp_get_max_threads() && small) {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < batch; ++i)  // nested regions inside gemm run on one thread
        cpu::gemm(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b);
    } else {
      for (std::int64_t i = 0; i < batch; ++i)
        cpu::gemm(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b);
    }
  });
}

}  // namespace moelab
