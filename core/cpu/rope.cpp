// core/cpu/rope.cpp — the rotary position embedding on the host.
//
//   x, out: [B, T, H, hd];  p = position_offset + t;  a(p, i) = p * theta^(-2i / hd)
//   out[b, t, h, 2i]   = x[.., 2i] cos a - x[.., 2i+1] sin a
//   out[b, t, h, 2i+1] = x[.., 2i] sin a + x[.., 2i+1] cos a        (sin a -> -sin a when inverse)
// The angles depend only on (t, i), so one table of cos and sin, [T, hd/2], is computed first in
// double (T * hd/2 trig calls instead of B * T * H * hd/2) and rounded to the tensor's dtype; then
// every (b, t) row of H * hd values is rotated with two multiply-adds per element. Rows are
// independent and run in parallel for large tensors; the result never depends on the thread count.
// Every product is rounded on its own (CMakeLists.txt: no contraction, no auto-vectorisation, as
// cuda/rope.cu rounds them). float32 rows run 8 floats at a time in AVX2 (the baseline every x86
// build targets): with the table expanded to one cos and one signed sin per element,
//   y = x * [c0, c0, c1, c1, ..] + swap_pairs(x) * [-s0, s0, -s1, s1, ..]
// which is x0 c - x1 s and x1 c + x0 s with each product rounded, the scalar loop's bits exactly
// (x1 (-s) is -(x1 s), and a sum does not depend on its order). It was 3.5% of the dense training
// step scalar.
// The tables depend only on (T, hd, theta, position_offset, inverse), the same for every call of a
// training step (q and k of every layer, forward and backward), so each thread keeps the last ones
// of each direction and computes them again only when one of those changes: RoPE's share of the
// dense step's perf samples went from 3.0% to 2.4% (the sin/cos calls, 0.4%, and the table fills).
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

// The angle tables of one (T, seq, hd, theta, position_offset, inverse).
template <class T>
struct RopeTables {
  std::int64_t seq = -1, hd = -1, position_offset = 0;
  double theta = 0.0;
  std::vector<T> cos_sin;   // [(t * half + i) * 2 + {0, 1}] = {cos a, +-sin a}
  std::vector<float> wide;  // float32, hd % 8 == 0: [(t * 2 + {0, 1}) * hd + j] = cos, signed sin of j's pair
};

// This thread's tables for the call, computed again only when the key changed (header).
template <class T>
const RopeTables<T>& rope_tables(std::int64_t seq, std::int64_t hd, double theta, std::int64_t position_offset,
                                 bool inverse) {
  thread_local RopeTables<T> last[2];  // one per direction: forward and backward alternate
  RopeTables<T>& tables = last[inverse ? 1 : 0];
  if (tables.seq == seq && tables.hd == hd && tables.theta == theta && tables.position_offset == position_offset)
    return tables;
  const std::int64_t half = hd / 2;
  tables.cos_sin.assign(static_cast<std::size_t>(seq * half * 2), T(0));
  for (std::int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    for (std::int64_t t = 0; t < seq; ++t) {
      const double angle = static_cast<double>(position_offset + t) * freq;
      const std::size_t at = static_cast<std::size_t>((t * half + i) * 2);
      tables.cos_sin[at] = static_cast<T>(std::cos(angle));
      tables.cos_sin[at + 1] = static_cast<T>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  tables.wide.clear();
  if (std::is_same_v<T, float> && hd % 8 == 0) {
    tables.wide.resize(static_cast<std::size_t>(seq * 2 * hd));
    const T* table = tables.cos_sin.data();
    for (std::int64_t t = 0; t < seq; ++t)
      for (std::int64_t i = 0; i < half; ++i) {
        const float c = static_cast<float>(table[(t * half + i) * 2]), sn = static_cast<float>(table[(t * half + i) * 2 + 1]);
        float* w = tables.wide.data() + t * 2 * hd;
        w[2 * i] = w[2 * i + 1] = c;
        w[hd + 2 * i] = -sn;
        w[hd + 2 * i + 1] = sn;
      }
  }
  tables.seq = seq, tables.hd = hd, tables.theta = theta, tables.position_offset = position_offset;
  return tables;
}

}  // namespace

void CpuBackend::rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) {
  const std::int64_t batch = x.size(0), seq = x.size(1), heads = x.size(2), hd = x.size(3), half = hd / 2;
  dispatch_float(x.dtype(), [&]<class T>() {
    const RopeTables<T>& tables = rope_tables<T>(seq, hd, theta, position_offset, inverse);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T* table = tables.cos_sin.data();
    const std::int64_t row = heads * hd;  // one (b, t): every head's vector
#ifdef __AVX2__
    // The vector path: float32 heads of a multiple of 8, on the expanded table.
    const std::vector<float>& wide = tables.wide;
    const bool vector_path = std::is_same_v<T, float> && hd % 8 == 0;
#endif
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1)
    for (std::int64_t bt = 0; bt < batch * seq; ++bt) {
      const T* cs = table + (bt % seq) * half * 2;
#ifdef __AVX2__
      if (vector_path) {
        const float* w = wide.data() + (bt % seq) * 2 * hd;
        const float* xr = reinterpret_cast<const float*>(px) + bt * row;
        float* yr = reinterpret_cast<float*>(po) + bt * row;
        for (std::int64_t h = 0; h < heads; ++h)
          for (std::int64_t j = 0; j < hd; j += 8) {
            const __m256 v = _mm256_loadu_ps(xr + h * hd + j);
            const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x1, x0, x3, x2, ...)
            const __m256 a = _mm256_mul_ps(v, _mm256_loadu_ps(w + j));
            const __m256 b = _mm256_mul_ps(swapped, _mm256_loadu_ps(w + hd + j));
            _mm256_storeu_ps(yr + h * hd + j, _mm256_add_ps(a, b));
          }
        continue;
      }
#endif
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
