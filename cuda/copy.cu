// cuda/copy.cu — fill and dtype conversion on the GPU (mirrors core/cpu/copy.cpp).
//
//   fill:  x: [...] any dtype,   x[i] = value (converted to the dtype like static_cast does)
//   cast:  x: [...] -> out: [...], out[i] = static_cast<To>(x[i]) for every pair of float32,
//          float64 and int32 (float -> int truncates toward zero, as on the CPU)
// One thread per element in a grid-stride loop (the grid is capped by blocks_for; each thread
// then handles several elements). Both are pure per-element maps, so the results are exact and
// independent of the launch shape.
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

template <class T>
__global__ void fill_kernel(T* x, std::int64_t n, T value) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = value;
}

template <class From, class To>
__global__ void cast_kernel(const From* x, To* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<To>(x[i]);
}

}  // namespace

void CudaBackend::fill(Tensor& x, double value) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  dispatch_all(x.dtype(), [&]<class T>() {
    fill_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), n, static_cast<T>(value));
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::cast(const Tensor& x, Tensor& out) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  dispatch_all(x.dtype(), [&]<class From>() {
    dispatch_all(out.dtype(), [&]<class To>() {
      cast_kernel<From, To><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<From>(),
                                                                                         out.data<To>(), n);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace moelab
