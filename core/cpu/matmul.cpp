// core/cpu/matmul.cpp — matrix products on the host.
//
// out[b] = op(a[b]) @ op(b[b]) where op is the identity or a transpose; all row-major.
//   float32: moelab's own blocked GEMM (core/cpu/gemm_f32.cpp), the training hot path.
//   float64: Eigen's GEMM (used by gradcheck, where speed does not matter).
//   bfloat16 operands (both; out float32): exact bf16 x bf16 products (8-bit mantissas multiply
//     exactly in float32's 24 bits) summed in float32, the product a bf16 GEMM computes
//     (core/kernels/matmul.cpp). Where the CPU has AMX or AVX512_BF16, core/cpu/gemm_bf16.h's AMX
//     or VDPBF16PS kernel (native_bf16_kernel); elsewhere the operands are widened to float32,
//     which is exact, and the float32 GEMM runs (sums in order): they differ by float32 rounding.
// Batches run one after another, each product deciding its own threads, unless each product is
// small and the batch as a whole is worth several threads (core/cpu/thread_count.h): then each
// thread takes whole products.
// No result depends on the thread count (each element is summed over k in a fixed order).
#include <algorithm>
#include <omp.h>

#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_bf16.h"
#include "core/cpu/thread_count.h"

namespace moelab {

void CpuBackend::matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) {
  const std::int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  const std::int64_t k = trans_a ? a.size(1) : a.size(2);
  if (a.dtype() == DType::BFloat16) {
    if (!cpu::use_native_bf16_gemm())
      return matmul(a.to(DType::Float32), b.to(DType::Float32), trans_a, trans_b, out);
    const auto* pa = reinterpret_cast<const std::uint16_t*>(a.data<BFloat16>());
    const auto* pb = reinterpret_cast<const std::uint16_t*>(b.data<BFloat16>());
    for (std::int64_t i = 0; i < batch; ++i)
      cpu::gemm_bf16(cpu::native_bf16_kernel(), pa + i * m * k, pb + i * k * n, out.data<float>() + i * m * n, m,
                     k, n, trans_a, trans_b);
    return;
  }
  dispatch_float(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const std::int64_t a_stride = m * k, b_stride = k * n, c_stride = m * n;
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const bool small = flops < 4.0e6;
    // Whole products per thread only when every thread gets at least a grain of work
    // (core/cpu/thread_count.h); a batch of tiny products stays on one thread.
    const int threads = static_cast<int>(
        std::min<std::int64_t>(cpu::threads_for(flops * static_cast<double>(batch), cpu::kGemmGrainFlops), batch));
    if (batch >= threads && threads > 1 && small) {
#pragma omp parallel for schedule(static) num_threads(threads)
      for (std::int64_t i = 0; i < batch; ++i)  // nested regions inside gemm run on one thread
        cpu::gemm(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b);
    } else {
      for (std::int64_t i = 0; i < batch; ++i)
        cpu::gemm(pa + i * a_stride, pb + i * b_stride, pc + i * c_stride, m, k, n, trans_a, trans_b);
    }
  });
}

}  // namespace moelab
