// cuda/cross_entropy.cu — fused softmax + negative log-likelihood on the GPU (mirrors
// core/cpu/cross_entropy.cpp).
//
// logits: [N, V], targets: [N] int32 -> loss: [], logsumexp: [N], kept: [] float64
//   lse[i] = m + log(sum_j exp(logits[i, j] - m)),   m = max_j logits[i, j]
//   loss   = (1 / kept) * sum over kept rows i of (lse[i] - logits[i, targets[i]])
// A row is kept unless targets[i] == ignore_index; with no kept row the loss is 0. lse is
// computed for every row (ignored or not) and saved for the backward.
//
// Forward in two kernels, no atomics:
//   1. one block per row: the row maximum and sum of exponentials (block_max, block_sum in double),
//      lse[i] (rounded to T) and the row's loss lse - logits[i, t] in double into a scratch
//      vector (0.0 for an ignored row);
//   2. one block: sums the row losses in a fixed tree (block_sum) and counts kept rows, writes
//      loss = total / kept, and kept into the float64 [] tensor the backward reads.
// Nothing is copied to the host. A target outside [0, V) that is not ignore_index is skipped (its
// row's loss is 0) and recorded in the device error flag (cuda/device_errors.cuh), raised at the
// next synchronisation.
//
// Backward, with scale = dloss / kept formed in double by each thread from the two device scalars
// (0 when no row is kept), as the CPU forms it, one thread per element:
//   dlogits[i, j] = (exp(logits[i, j] - lse[i]) - [j == targets[i]]) * scale,   0 for ignored rows
#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

template <class T>
__global__ void cross_entropy_rows_kernel(const T* logits, const std::int32_t* targets, std::int64_t vocab,
                                          int ignore_index, cuda::DeviceError* error, T* lse_out,
                                          double* row_loss) {
  extern __shared__ double scratch[];
  const std::int64_t row = blockIdx.x;
  const T* xr = logits + row * vocab;
  T m = xr[0];
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
    if (xr[j] > m || xr[j] != xr[j]) m = xr[j];
  m = cuda::block_max(m, reinterpret_cast<T*>(scratch));
  double acc = 0.0;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) acc += double(cuda::DeviceMath<T>::exp(xr[j] - m));
  const double sum_exp = cuda::block_sum(acc, scratch);
  if (threadIdx.x == 0) {
    const double lse = double(m) + ::log(sum_exp);
    lse_out[row] = static_cast<T>(lse);
    const std::int32_t t = targets[row];
    const bool kept = t != ignore_index && cuda::index_ok(error, cuda::kCrossEntropy, row, t, vocab);
    row_loss[row] = kept ? lse - double(xr[t]) : 0.0;
  }
}

// One block: loss = sum(row_loss) / kept (0 if kept == 0); kept also written to *kept_out.
template <class T>
__global__ void cross_entropy_mean_kernel(const double* row_loss, const std::int32_t* targets, std::int64_t rows,
                                          int ignore_index, T* loss, double* kept_out) {
  extern __shared__ double scratch[];
  double acc = 0.0, count = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    acc += row_loss[r];
    count += targets[r] != ignore_index ? 1.0 : 0.0;  // exact in double up to 2^53 rows
  }
  const double total = cuda::block_sum(acc, scratch);
  const double kept = cuda::block_sum(count, scratch);
  if (threadIdx.x == 0) {
    loss[0] = static_cast<T>(kept > 0 ? total / kept : 0.0);
    *kept_out = kept;
  }
}

template <class T>
__global__ void cross_entropy_backward_kernel(const T* logits, const std::int32_t* targets, const T* lse,
                                              std::int64_t rows, std::int64_t vocab, const double* dloss,
                                              const double* kept, int ignore_index, cuda::DeviceError* error,
                                              T* dlogits) {
  const std::int64_t n = rows * vocab;
  const T scale = static_cast<T>(*kept > 0 ? *dloss / *kept : 0.0);
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i / vocab, j = i % vocab;
    const std::int32_t t = targets[r];
    if (t == ignore_index) {
      dlogits[i] = T(0);
      continue;
    }
    // A bad target is reported once per row; it matches no column, so nothing reads outside.
    if (j == 0) cuda::index_ok(error, cuda::kCrossEntropyBackward, r, t, vocab);
    const T p = cuda::DeviceMath<T>::exp(logits[i] - lse[r]);  // softmax, from the saved lse
    dlogits[i] = (j == t ? p - T(1) : p) * scale;
  }
}

}  // namespace

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& loss,
                                Tensor& logsumexp, Tensor& kept) {
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  MOELAB_CHECK(rows <= 0x7fffffffLL, "cross_entropy", "too many rows for one launch: ", rows);
  const std::int32_t* target = targets.data<std::int32_t>();
  cuda::DeviceBuffer<double> row_loss(static_cast<std::size_t>(rows));
  dispatch_float(logits.dtype(), [&]<class T>() {
    const int threads = cuda::row_threads(vocab);
    const std::size_t shared = threads * sizeof(double);
    cross_entropy_rows_kernel<T><<<static_cast<unsigned int>(rows), threads, shared, cuda::stream()>>>(
        logits.data<T>(), target, vocab, ignore_index, cuda::device_error(), logsumexp.data<T>(), row_loss.get());
    MOELAB_CUDA_CHECK_LAUNCH();
    constexpr int kMeanThreads = 256;
    cross_entropy_mean_kernel<T><<<1, kMeanThreads, kMeanThreads * sizeof(double), cuda::stream()>>>(
        row_loss.get(), target, rows, ignore_index, loss.data<T>(), kept.data<double>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                                         const Tensor& dloss, const Tensor& kept, int ignore_index,
                                         Tensor& dlogits) {
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  dispatch_float(logits.dtype(), [&]<class T>() {
    cross_entropy_backward_kernel<T><<<cuda::blocks_for(rows * vocab), cuda::kThreads, 0, cuda::stream()>>>(
        logits.data<T>(), targets.data<std::int32_t>(), logsumexp.data<T>(), rows, vocab, dloss.data<double>(),
        kept.data<double>(), ignore_index, cuda::device_error(), dlogits.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace moelab
