// core/cpu/rope.cpp — the rotary position embedding on the host.
//
//   x, out: [B, T, H, hd];  p = position_offset + t;  a(p, i) = p * theta^(-2i / hd)
//   out[b, t, h, 2i]   = x[.., 2i] cos a - x[.., 2i+1] sin a
//   out[b, t, h, 2i+1] = x[.., 2i] sin a + x[.., 2i+1] cos a        (sin a -> -sin a when inverse)
// The angles depend only on (t, i), so one table of cos and sin, [T, hd/2], is computed first in
// double (T * hd/2 trig calls instead of B * T * H * hd/2) and rounded to the tensor's dtype; then
// every (b, t) row of H * hd values is rotated with two multiply-adds per element. Rows are
// independent and run in parallel for large tensors; the result never depends on the thread count.
#include <cmath>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"

namespace moelab {

void CpuBackend::rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) {
  const std::int64_t batch = x.size(0), seq = x.size(1), heads = x.size(2), hd = x.size(3), half = hd / 2;
  dispatch_float(x.dtype(), [&]<class T>() {
    // cos_sin[(t * half + i) * 2 + {0, 1}] = {cos a, +-sin a}
    std::vector<T> cos_sin(static_cast<std::size_t>(seq * half * 2));
    for (std::int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      for (std::int64_t t = 0; t < seq; ++t) {
        const double angle = static_cast<double>(position_offset + t) * freq;
        const std::size_t at = static_cast<std::size_t>((t * half + i) * 2);
        cos_sin[at] = static_cast<T>(std::cos(angle));
        cos_sin[at + 1] = static_cast<T>(inverse ? -std::sin(angle) : std::sin(angle));
      }
    }
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T* table = cos_sin.data();
    const std::int64_t row = heads * hd;  // one (b, t): every head's vector
#pragma omp parallel for schedule(static) if (x.numel() > cpu::kParallelMinElements)
    for (std::int64_t bt = 0; bt < batch * seq; ++bt) {
      const T* cs = table + (bt % seq) * half * 2;
      for (std::int64_t h = 0; h < heads; ++h) {
        const T* xi = px + bt * row + h * hd;
        T* yi = po + bt * row + h * hd;
        for (std::int64_t i = 0; i < half; ++i) {
          const T c = cs[2 * i], s = cs[2 * i + 1], x0 = xi[2 * i], x1 = xi[2 * i + 1];
          yi[2 * i] = x0 * c - x1 * s;
          yi[2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  });
}

}  // namespace moelab
