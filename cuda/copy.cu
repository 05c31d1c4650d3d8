// cuda/copy.cu — fill, arange and dtype conversion on the GPU (mirrors core/cpu/copy.cpp).
//
//   fill:    x: [...] any dtype,   x[i] = value (converted to the dtype like static_cast does)
//   arange:  x: [...] any dtype,   x[i] = start + step * i in double, then converted like
//            static_cast; the product and the sum are rounded separately (cuda/rounded_math.cuh:
//            nvcc would fuse them into one FMA), as the CPU's loop computes them when not contracted
//   cast:    x: [...] -> out: [...], out[i] = static_cast<To>(x[i]) for every pair of float32,
//            float64 and int32 (float -> int truncates toward zero, as on the CPU); to and from
//            bfloat16 through float32, rounding to nearest even with core/bfloat16.h's bit
//            arithmetic (NaN -> 0x7FC0), so both devices give the same bits
// One thread per element in a grid-stride loop (the grid is capped by blocks_for; each thread
// then handles several elements). All three are pure per-element maps, so the results are exact and
// independent of the launch shape.
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"
#include "cuda/rounded_math.cuh"

namespace moelab {
namespace {

template <class T>
__global__ void fill_kernel(T* x, std::int64_t n, T value) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = value;
}

template <class T>
__global__ void arange_kernel(T* x, std::int64_t n, double start, double step) {
  using namespace cuda::rounded;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = static_cast<T>(add(start, mul(step, static_cast<double>(i))));
}

template <class From, class To>
__global__ void cast_kernel(const From* x, To* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<To>(x[i]);
}

// core/bfloat16.h's conversions, on the device (the host's struct holds just the 16 bits).
__device__ inline std::uint16_t to_bfloat16_bits(float value) {
  const std::uint32_t f = __float_as_uint(value);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;  // NaN
  return static_cast<std::uint16_t>((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}
__device__ inline float from_bfloat16_bits(std::uint16_t bits) {
  return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
}

template <class From>
__global__ void cast_to_bfloat16_kernel(const From* x, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = to_bfloat16_bits(static_cast<float>(x[i]));
}

template <class To>
__global__ void cast_from_bfloat16_kernel(const std::uint16_t* x, To* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<To>(from_bfloat16_bits(x[i]));
}

}  // namespace

void CudaBackend::fill(Tensor& x, double value) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  if (x.dtype() == DType::BFloat16) {
    fill_kernel<std::uint16_t><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<std::uint16_t*>(x.raw()), n, BFloat16::from_float(static_cast<float>(value)).bits);
    MOELAB_CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_all(x.dtype(), [&]<class T>() {
    fill_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), n, static_cast<T>(value));
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::arange(Tensor& x, double start, double step) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  dispatch_all(x.dtype(), [&]<class T>() {
    arange_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), n, start, step);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::cast(const Tensor& x, Tensor& out) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  if (x.dtype() == DType::BFloat16 && out.dtype() == DType::BFloat16) {
    copy_on_device(out.raw(), x.raw(), x.nbytes());
    return;
  }
  if (out.dtype() == DType::BFloat16) {
    dispatch_all(x.dtype(), [&]<class From>() {
      cast_to_bfloat16_kernel<From><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
          x.data<From>(), static_cast<std::uint16_t*>(out.raw()), n);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
    return;
  }
  if (x.dtype() == DType::BFloat16) {
    dispatch_all(out.dtype(), [&]<class To>() {
      cast_from_bfloat16_kernel<To><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
          static_cast<const std::uint16_t*>(x.raw()), out.data<To>(), n);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
    return;
  }
  dispatch_all(x.dtype(), [&]<class From>() {
    dispatch_all(out.dtype(), [&]<class To>() {
      cast_kernel<From, To><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<From>(),
                                                                                         out.data<To>(), n);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace moelab
