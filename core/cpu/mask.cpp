// core/cpu/mask.cpp — the causal attention mask on the host.
//
//   scores: [B, T, S] (all leading axes flattened into B) -> out: [B, T, S]
//   out[b, i, j] = fill            if j > i + (S - T)
//                  scores[b, i, j] otherwise
// Row (b, i) keeps its first min(S, max(0, i + S - T + 1)) columns and fills the rest: one copy
// and one fill per row, both contiguous. Rows are independent, so they run in parallel when the
// tensor is large; the result never depends on the thread count.
#include <algorithm>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {

void CpuBackend::causal_mask(const Tensor& scores, double fill, Tensor& out) {
  const std::int64_t t = scores.size(-2), s = scores.size(-1);
  const std::int64_t rows = scores.numel() / s;  // B * T
  dispatch_float(scores.dtype(), [&]<class T>() {
    const T* in = scores.data<T>();
    T* o = out.data<T>();
    const T value = static_cast<T>(fill);
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(scores.numel())) if (cpu::element_threads(scores.numel()) > 1)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = r % t;
      const std::int64_t keep = std::clamp<std::int64_t>(i + (s - t) + 1, 0, s);
      std::copy_n(in + r * s, keep, o + r * s);
      std::fill(o + r * s + keep, o + (r + 1) * s, value);
    }
  });
}

}  // namespace moelab
