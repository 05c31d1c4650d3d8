// cuda/softmax.cu — softmax and log-softmax over the last axis, and their backwards, on the GPU
// (mirrors core/cpu/softmax.cpp).
//
// x: [N, n] (leading axes flattened into N rows):
//   softmax:      y = exp(x - m) / s,        m = max(x), s = sum(exp(x - m))
//   log_softmax:  y = (x - m) - log(s)
//   softmax backward:      dx = y * (dy - sum(dy * y))
//   log_softmax backward:  dx = dy - exp(y) * sum(dy)
// Subtracting the row maximum keeps every exponent <= 0 (no overflow), and s >= 1.
//
// One block per row, blockDim = the smallest power of two >= n between 32 and 256
// (cuda::row_threads). Each thread walks a strided slice of the row; the row maximum and the
// row sums (s, sum(dy * y), sum(dy)) are combined with block_max / block_sum: sums in double, in a
// fixed tree, so results repeat bitwise run after run (and match the CPU, which also sums in
// double, to rounding). exp is evaluated in T as on the CPU, and the row is read twice rather
// than keeping exponentials in a scratch row: the second read usually hits the L2 cache.
// A row that is entirely -inf gives NaN, as on the CPU and in PyTorch.
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

// Shared memory of a row kernel: blockDim.x doubles, reused by block_max (as T) and block_sum.
template <class T>
__device__ T row_max(const T* xr, std::int64_t n, double* scratch) {
  T m = xr[0];  // n >= 1 (the front end never launches on empty tensors)
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const T v = xr[i];
    if (v > m || v != v) m = v;
  }
  return cuda::block_max(m, reinterpret_cast<T*>(scratch));
}

template <class T>
__device__ double row_sum_exp(const T* xr, std::int64_t n, T m, double* scratch) {
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(cuda::DeviceMath<T>::exp(xr[i] - m));
  return cuda::block_sum(acc, scratch);
}

template <class T>
__global__ void softmax_kernel(const T* x, T* y, std::int64_t n) {
  extern __shared__ double scratch[];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  const T m = row_max(xr, n, scratch);
  const T inv = static_cast<T>(1.0 / row_sum_exp(xr, n, m, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = cuda::DeviceMath<T>::exp(xr[i] - m) * inv;
}

template <class T>
__global__ void log_softmax_kernel(const T* x, T* y, std::int64_t n) {
  extern __shared__ double scratch[];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  const T m = row_max(xr, n, scratch);
  const T log_s = static_cast<T>(::log(row_sum_exp(xr, n, m, scratch)));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] - m) - log_s;
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n) {
  extern __shared__ double scratch[];
  const std::int64_t base = blockIdx.x * n;
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(dy[base + i]) * double(y[base + i]);
  const T dot = static_cast<T>(cuda::block_sum(acc, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) dx[base + i] = y[base + i] * (dy[base + i] - dot);
}

template <class T>
__global__ void log_softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n) {
  extern __shared__ double scratch[];
  const std::int64_t base = blockIdx.x * n;
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(dy[base + i]);
  const T total = static_cast<T>(cuda::block_sum(acc, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    dx[base + i] = dy[base + i] - cuda::DeviceMath<T>::exp(y[base + i]) * total;
}

// Launches kernel<<<rows, row_threads(n), shared>>>(args..., n) for a tensor seen as [rows, n].
template <class Kernel, class... Args>
void launch_rows(const Tensor& shape_of, Kernel kernel, Args... args) {
  const std::int64_t n = shape_of.shape().back();
  const std::int64_t rows = shape_of.numel() / n;
  MOELAB_CHECK(rows <= 0x7fffffffLL, "softmax", "too many rows for one launch: ", rows);
  const int threads = cuda::row_threads(n);
  kernel<<<static_cast<unsigned int>(rows), threads, threads * sizeof(double), cuda::stream()>>>(args..., n);
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::softmax(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() { launch_rows(x, softmax_kernel<T>, x.data<T>(), y.data<T>()); });
}

void CudaBackend::log_softmax(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() { launch_rows(x, log_softmax_kernel<T>, x.data<T>(), y.data<T>()); });
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    launch_rows(y, softmax_backward_kernel<T>, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

void CudaBackend::log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    launch_rows(y, log_softmax_backward_kernel<T>, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

}  // namespace moelab
