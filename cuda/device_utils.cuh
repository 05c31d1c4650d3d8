// cuda/device_utils.cuh — small pieces the kernel files of cuda/ share: dtype dispatch, the
// float/double maths overloads, and a deterministic block-wide sum.
//
//   dispatch_float / dispatch_all                   from core/dtype_dispatch.h (shared with the CPU)
//   DeviceMath<T>::exp(x) ...                       expf/exp, logf/log, ... picked by T
//   block_sum(value, scratch)                       sum over the block, in a fixed tree order
//   first_index(), grid_stride()                    a grid-stride loop: for (i = first_index(); i < n; i += grid_stride())
//   warp_sum(value)                                 sum over the 32 lanes of a warp, the same bits on every lane
//   ceil_div(a, b), with_word(dtype, body)          launch arithmetic; a dtype's element as an unsigned word
//
// Determinism of block_sum: each thread's value enters a shared-memory tree whose shape depends
// only on blockDim.x (a power of two, at most 1024), so for a given launch configuration the same
// inputs give bitwise the same sum, run after run. No atomics.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/dtype_dispatch.h"  // dispatch_float, dispatch_all
#include "core/error.h"

namespace moelab::cuda {

// Grid-stride loops: this thread's first element and the number of threads in the whole grid.
__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

template <class T>
struct DeviceMath;

template <>
struct DeviceMath<float> {
  static __device__ float exp(float x) { return ::expf(x); }
  static __device__ float log(float x) { return ::logf(x); }
  static __device__ float sqrt(float x) { return ::sqrtf(x); }
  static __device__ float abs(float x) { return ::fabsf(x); }
  static __device__ float tanh(float x) { return ::tanhf(x); }
  static __device__ float erf(float x) { return ::erff(x); }
  static __device__ float sin(float x) { return ::sinf(x); }
  static __device__ float cos(float x) { return ::cosf(x); }
  static __device__ float pow(float x, float y) { return ::powf(x, y); }
  static __device__ float infinity() { return __int_as_float(0x7f800000); }
  // x * y rounded to float, never contracted with a following add into an FMA (as a product
  // stored to memory by one kernel and read by the next would be)
  static __device__ float mul_rounded(float x, float y) { return __fmul_rn(x, y); }
};

template <>
struct DeviceMath<double> {
  static __device__ double exp(double x) { return ::exp(x); }
  static __device__ double log(double x) { return ::log(x); }
  static __device__ double sqrt(double x) { return ::sqrt(x); }
  static __device__ double abs(double x) { return ::fabs(x); }
  static __device__ double tanh(double x) { return ::tanh(x); }
  static __device__ double erf(double x) { return ::erf(x); }
  static __device__ double sin(double x) { return ::sin(x); }
  static __device__ double cos(double x) { return ::cos(x); }
  static __device__ double pow(double x, double y) { return ::pow(x, y); }
  static __device__ double infinity() { return __longlong_as_double(0x7ff0000000000000LL); }
  static __device__ double mul_rounded(double x, double y) { return __dmul_rn(x, y); }
};

// Blocks (or chunks) of b that cover a: the smallest c with c * b >= a, for a >= 0 and b > 0.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Calls body.template operator()<Word>() with Word the unsigned integer of the element's size
// (8 bytes: std::uint64_t, else std::uint32_t): for kernels that move elements without reading them.
template <class Body>
void with_word(DType dtype, Body&& body) {
  if (dtype_size(dtype) == 8) body.template operator()<std::uint64_t>();
  else body.template operator()<std::uint32_t>();
}

// Threads per block for row-wise kernels: the smallest power of two >= n, between 32 and 256.
inline int row_threads(std::int64_t n) {
  int threads = 32;
  while (threads < 256 && threads < n) threads *= 2;
  return threads;
}

// Sum of `value` over all threads of the block; every thread gets the result. scratch holds
// blockDim.x doubles of shared memory; blockDim.x must be a power of two. Contains
// __syncthreads(), so every thread of the block must call it.
__device__ inline double block_sum(double value, double* scratch) {
  const unsigned int tid = threadIdx.x;
  scratch[tid] = value;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) scratch[tid] += scratch[tid + half];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return total;
}

// Every lane of a warp, for the __shfl_*_sync masks.
constexpr unsigned kFullWarpMask = 0xffffffffu;

// Sum of v over the 32 lanes of a warp by a butterfly of __shfl_xor_sync: every lane gets the
// same bits, because a + b == b + a bit for bit, so the two lanes of each pair hold equal values
// after every round. The whole warp must call it.
__device__ inline double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

// Maximum of `value` over the block (NaN wins: a NaN anywhere gives NaN), as block_sum.
template <class T>
__device__ inline T block_max(T value, T* scratch) {
  const unsigned int tid = threadIdx.x;
  scratch[tid] = value;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) {
      const T other = scratch[tid + half];
      const T mine = scratch[tid];
      if (other > mine || other != other) scratch[tid] = other;
    }
    __syncthreads();
  }
  const T result = scratch[0];
  __syncthreads();
  return result;
}

}  // namespace moelab::cuda
