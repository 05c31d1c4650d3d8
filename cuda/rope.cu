// cuda/rope.cu — the rotary position embedding on the GPU (mirrors core/cpu/rope.cpp).
//
//   x, out: [B, T, H, hd];  p = position_offset + t;  a(p, i) = p * theta^(-2i / hd)
//   out[b, t, h, 2i]   = x[.., 2i] cos a - x[.., 2i+1] sin a
//   out[b, t, h, 2i+1] = x[.., 2i] sin a + x[.., 2i+1] cos a        (sin a -> -sin a when inverse)
//
// Two kernels, as the CPU's two loops:
//   1. the table of {cos a, +-sin a} for every (t, i), [T, hd/2, 2], one thread per entry. The
//      angle is computed in double exactly as the CPU writes it (pow(theta, -2.0 * i / hd), times
//      the position as a double), cos and sin are taken in double and rounded to the tensor's
//      dtype. CUDA's double pow/sin/cos are within 2 ulp of exact (the host's are within 1), so a
//      float32 table entry can differ from the CPU's by one float ulp in the rare case where the
//      double result sits next to a float rounding boundary; float64 entries by a few 1e-16.
//   2. the rotation, one thread per pair (x[2i], x[2i+1]) of every (b, t, h): pair e of the flat
//      tensor is elements 2e and 2e+1, its i = e % (hd/2) and its t = (e / (hd/2) / H) % T.
//      Products and sums use the round-to-nearest intrinsics, so nvcc does not fuse them into
//      FMAs: each is one IEEE operation, as the CPU's expression is written.
// The table is B*H times smaller than x, so its trig calls cost little; the rotation reads and
// writes each element once, coalesced.
#include <cstdint>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/rounded_math.cuh"

namespace moelab {
namespace {

using namespace cuda::rounded;  // mul, add, ...: no FMA contraction (cuda/rounded_math.cuh)

// table[(t * half + i) * 2 + {0, 1}] = {cos a, +-sin a}.
template <class T>
__global__ void rope_table_kernel(std::int64_t seq, std::int64_t half, std::int64_t hd, std::int64_t position_offset,
                                  double theta, bool inverse, T* table) {
  const std::int64_t total = seq * half;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = e / half, i = e - t * half;
    const double freq = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    const double angle = static_cast<double>(position_offset + t) * freq;
    const double s = sin(angle);
    table[2 * e] = static_cast<T>(cos(angle));
    table[2 * e + 1] = static_cast<T>(inverse ? -s : s);
  }
}

template <class T>
__global__ void rope_rotate_kernel(const T* x, const T* table, std::int64_t pairs, std::int64_t seq,
                                   std::int64_t heads, std::int64_t half, T* out) {
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < pairs;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % half, t = (e / half / heads) % seq;
    const T c = table[(t * half + i) * 2], s = table[(t * half + i) * 2 + 1];
    const T x0 = x[2 * e], x1 = x[2 * e + 1];
    out[2 * e] = sub(mul(x0, c), mul(x1, s));
    out[2 * e + 1] = add(mul(x0, s), mul(x1, c));
  }
}

template <class T>
void rope_typed(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) {
  const std::int64_t seq = x.size(1), heads = x.size(2), hd = x.size(3), half = hd / 2;
  Tensor table = Tensor::empty({seq, half, 2}, x.dtype(), x.device());
  rope_table_kernel<T><<<cuda::blocks_for(seq * half), cuda::kThreads, 0, cuda::stream()>>>(
      seq, half, hd, position_offset, theta, inverse, table.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
  const std::int64_t pairs = x.numel() / 2;
  rope_rotate_kernel<T><<<cuda::blocks_for(pairs), cuda::kThreads, 0, cuda::stream()>>>(
      x.data<T>(), table.data<T>(), pairs, seq, heads, half, out.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) {
  if (x.dtype() == DType::Float64) rope_typed<double>(x, position_offset, theta, inverse, out);
  else rope_typed<float>(x, position_offset, theta, inverse, out);
}

}  // namespace moelab
