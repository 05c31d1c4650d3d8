// cuda/mask.cu — the causal attention mask on the GPU (mirrors core/cpu/mask.cpp).
//
//   scores: [B, T, S] (all leading axes flattened into B) -> out: [B, T, S]
//   out[b, i, j] = fill            if j > i + (S - T)
//                  scores[b, i, j] otherwise
// One thread per element: from its flat number e it finds its row r = e / S (query i = r % T)
// and column j = e % S, and keeps the score when j < keep(i) = clamp(i + (S - T) + 1, 0, S),
// the CPU's per-row boundary. Consecutive threads handle consecutive columns, so the read and
// the write are coalesced. fill is rounded to the dtype once, on the host, as the CPU does.
#include <cstdint>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"

namespace moelab {
namespace {

template <class T>
__global__ void causal_mask_kernel(const T* in, std::int64_t total, std::int64_t t, std::int64_t s, T fill, T* out) {
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = e / s, j = e - r * s, i = r % t;
    std::int64_t keep = i + (s - t) + 1;
    keep = keep < 0 ? 0 : (keep > s ? s : keep);
    out[e] = j < keep ? in[e] : fill;
  }
}

template <class T>
void causal_mask_typed(const Tensor& scores, double fill, Tensor& out) {
  const std::int64_t t = scores.size(-2), s = scores.size(-1), total = scores.numel();
  causal_mask_kernel<T><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
      scores.data<T>(), total, t, s, static_cast<T>(fill), out.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::causal_mask(const Tensor& scores, double fill, Tensor& out) {
  if (scores.dtype() == DType::Float64) causal_mask_typed<double>(scores, fill, out);
  else causal_mask_typed<float>(scores, fill, out);
}

}  // namespace moelab
