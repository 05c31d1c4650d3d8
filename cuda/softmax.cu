// cuda/softmax.cu — softmax (over any axis) and log-softmax (over the last axis), and their
// backwards, on the GPU (mirrors core/cpu/softmax.cpp).
//
// x: [N, n] (leading axes flattened into N rows; softmax over another axis: x seen as
// [outer, n, inner], N = outer * inner rows of n elements at stride inner):
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
// A row that is entirely -inf gives NaN, as on the CPU and in PyTorch. The strided rows use the
// same kernels with element i of row r at (r / inner) * n * inner + r % inner + i * inner (inner = 1:
// r * n + i), so the arithmetic, hence every bit, is the same as for the transposed tensor's rows.
// Each thread then reads elements inner apart: uncoalesced, acceptable for the short columns Soft
// MoE normalises (m tokens); a wide strided softmax would want a thread per column instead.
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

// A row of n elements `inner` apart: this block's (row blockIdx.x of [outer * inner, n]).
struct StridedRow {
  std::int64_t first, inner;
  __device__ StridedRow(std::int64_t n, std::int64_t inner_)
      : first(blockIdx.x / inner_ * n * inner_ + blockIdx.x % inner_), inner(inner_) {}
  __device__ std::int64_t operator[](std::int64_t i) const { return first + i * inner; }
};

// Shared memory of a row kernel: blockDim.x doubles, reused by block_max (as T) and block_sum.
template <class T>
__device__ T row_max(const T* x, const StridedRow& at, std::int64_t n, double* scratch) {
  T m = x[at[0]];  // n >= 1 (the front end never launches on empty tensors)
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const T v = x[at[i]];
    if (v > m || v != v) m = v;
  }
  return cuda::block_max(m, reinterpret_cast<T*>(scratch));
}

template <class T>
__device__ double row_sum_exp(const T* x, const StridedRow& at, std::int64_t n, T m, double* scratch) {
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(cuda::DeviceMath<T>::exp(x[at[i]] - m));
  return cuda::block_sum(acc, scratch);
}

template <class T>
__global__ void softmax_kernel(const T* x, T* y, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  const T m = row_max(x, at, n, scratch);
  const T inv = static_cast<T>(1.0 / row_sum_exp(x, at, n, m, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) y[at[i]] = cuda::DeviceMath<T>::exp(x[at[i]] - m) * inv;
}

template <class T>
__global__ void log_softmax_kernel(const T* x, T* y, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  const T m = row_max(x, at, n, scratch);
  const T log_s = static_cast<T>(::log(row_sum_exp(x, at, n, m, scratch)));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) y[at[i]] = (x[at[i]] - m) - log_s;
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(dy[at[i]]) * double(y[at[i]]);
  const T dot = static_cast<T>(cuda::block_sum(acc, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) dx[at[i]] = y[at[i]] * (dy[at[i]] - dot);
}

template <class T>
__global__ void log_softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(dy[at[i]]);
  const T total = static_cast<T>(cuda::block_sum(acc, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    dx[at[i]] = dy[at[i]] - cuda::DeviceMath<T>::exp(y[at[i]]) * total;
}

// Launches kernel<<<rows, row_threads(n), shared>>>(args..., n, inner), rows = numel / n, for a
// tensor seen as [outer, n, inner] (the last axis: n = its size, inner = 1).
template <class Kernel, class... Args>
void launch_rows(const Tensor& shape_of, std::int64_t n, std::int64_t inner, Kernel kernel, Args... args) {
  const std::int64_t rows = shape_of.numel() / n;
  MOELAB_CHECK(rows <= 0x7fffffffLL, "softmax", "too many rows for one launch: ", rows);
  const int threads = cuda::row_threads(n);
  kernel<<<static_cast<unsigned int>(rows), threads, threads * sizeof(double), cuda::stream()>>>(args..., n, inner);
  MOELAB_CUDA_CHECK_LAUNCH();
}

// The last axis of t: [rows, n] with inner = 1.
std::int64_t last_axis(const Tensor& t) { return t.shape().back(); }

}  // namespace

void CudaBackend::softmax(const Tensor& x, std::int64_t, std::int64_t n, std::int64_t inner, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() { launch_rows(x, n, inner, softmax_kernel<T>, x.data<T>(), y.data<T>()); });
}

void CudaBackend::log_softmax(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    launch_rows(x, last_axis(x), 1, log_softmax_kernel<T>, x.data<T>(), y.data<T>());
  });
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t, std::int64_t n, std::int64_t inner,
                                   Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    launch_rows(y, n, inner, softmax_backward_kernel<T>, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

void CudaBackend::log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    launch_rows(y, last_axis(y), 1, log_softmax_backward_kernel<T>, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

}  // namespace moelab
