// cuda/reduce.cu — sums and maxima along one axis on the GPU (mirrors core/cpu/reduce.cpp).
//
// The front end (core/kernels/reduce.cpp) sees any reduction as x: [outer, n, inner] reduced over
// the middle axis (n >= 1): out: [outer, inner]. Sum over everything is outer = inner = 1.
//   sum:  out[o, c] = sum_k x[o, k, c]           accumulated in double, rounded once to T
//   max:  values[o, c] = max_k x[o, k, c],  indices[o, c] = the first k that attains it (int32);
//         NaN counts as larger than everything and the first NaN wins, as on the CPU.
//
// Determinism: no atomics. Every sum is split into pieces and combined in an order fixed by the
// shape alone (chunk sizes and block sizes are constants or functions of n), so the same input
// gives bitwise the same output run after run. The order differs from the CPU's pairwise tree,
// so GPU and CPU agree to rounding (double accumulation makes that ~1 ulp of float32), not bitwise.
//
// Contiguous axis (inner == 1): row o is x[o*n : (o+1)*n].
//   The row is cut into chunks of kRowBlockElements elements; one block per (row, chunk) sums its
//   chunk (each thread a strided slice, in double, then block_sum's fixed tree). One chunk: the block
//   writes the result. Several (a long row with few rows, e.g. sum over everything): partial
//   sums go to a scratch buffer and a second kernel adds each row's chunks in order.
// Strided axis (inner > 1): x[o, k, c] at x[(o*n + k)*inner + c]; adjacent threads take adjacent
//   columns c, so their loads coalesce. With many outputs, one thread per output adds k = 0..n-1
//   in order. With few outputs (sum over the first axis of [N, d], the bias gradient), k is cut
//   into chunks of kStridedChunk, one thread per (chunk, output), and a second kernel adds each
//   output's chunks in order.
// max: one block per row (contiguous) combining (value, index) pairs in a fixed tree, or one
//   thread per output scanning k in order (strided). Maxima are exact, so order matters only for
//   which index is reported, and the rule "larger value, then lower index" fixes that.
#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

constexpr std::int64_t kRowBlockElements = 32768;  // elements of a contiguous row per block
constexpr std::int64_t kStridedChunk = 256;        // values of k per thread in the chunked strided sum
constexpr std::int64_t kManyOutputs = 1 << 15;     // enough outputs to keep the GPU busy one thread each

// ---------------------------------------------------------------- sums
// grid.x = outer * chunks; block b sums row b / chunks, chunk b % chunks.
template <class T>
__global__ void sum_rows_kernel(const T* x, std::int64_t n, std::int64_t chunks, T* out, double* partial) {
  extern __shared__ double scratch[];
  const std::int64_t row = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const std::int64_t begin = chunk * kRowBlockElements;
  const std::int64_t end = begin + kRowBlockElements < n ? begin + kRowBlockElements : n;
  const T* xr = x + row * n;
  double acc = 0.0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += double(xr[i]);
  const double total = cuda::block_sum(acc, scratch);
  if (threadIdx.x == 0) {
    if (chunks == 1)
      out[row] = static_cast<T>(total);
    else
      partial[blockIdx.x] = total;
  }
}

// out[j] = sum over p of partial[p * stride + j * step] for p in [0, parts), in order.
template <class T>
__global__ void combine_partials_kernel(const double* partial, std::int64_t outputs, std::int64_t parts,
                                        std::int64_t part_stride, std::int64_t output_step, T* out) {
  for (std::int64_t j = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; j < outputs;
       j += std::int64_t{gridDim.x} * blockDim.x) {
    double acc = 0.0;
    for (std::int64_t p = 0; p < parts; ++p) acc += partial[p * part_stride + j * output_step];
    out[j] = static_cast<T>(acc);
  }
}

// Thread t handles output j = t % outputs over k in chunk t / outputs (chunks == 1: all of k).
template <class T>
__global__ void sum_strided_kernel(const T* x, std::int64_t n, std::int64_t inner, std::int64_t outputs,
                                   std::int64_t chunks, std::int64_t k_per_chunk, T* out, double* partial) {
  const std::int64_t total = outputs * chunks;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < total;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t chunk = t / outputs, j = t % outputs;
    const std::int64_t o = j / inner, c = j % inner;
    const std::int64_t k0 = chunk * k_per_chunk;
    const std::int64_t k1 = k0 + k_per_chunk < n ? k0 + k_per_chunk : n;
    const T* col = x + o * n * inner + c;
    double acc = 0.0;
    for (std::int64_t k = k0; k < k1; ++k) acc += double(col[k * inner]);
    if (chunks == 1)
      out[j] = static_cast<T>(acc);
    else
      partial[t] = acc;  // t = chunk * outputs + j
  }
}

// ---------------------------------------------------------------- maxima
// Whether (v1 at i1) is the better maximum than (v2 at i2): NaN beats numbers, then the larger
// value, then the lower index. An index < 0 marks "no element" and always loses.
template <class T>
__device__ bool better(T v1, std::int64_t i1, T v2, std::int64_t i2) {
  if (i2 < 0) return i1 >= 0;
  if (i1 < 0) return false;
  const bool nan1 = v1 != v1, nan2 = v2 != v2;
  if (nan1 != nan2) return nan1;
  if (!nan1 && v1 != v2) return v1 > v2;
  return i1 < i2;
}

// One block per row; blockDim.x a power of two. Shared memory: blockDim.x values then indices.
template <class T>
__global__ void max_rows_kernel(const T* x, std::int64_t n, T* values, std::int32_t* indices) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* best_value = reinterpret_cast<T*>(shared_bytes);
  std::int64_t* best_index = reinterpret_cast<std::int64_t*>(shared_bytes + blockDim.x * sizeof(double));
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * n;
  T v = T(0);
  std::int64_t arg = -1;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (better(xr[i], i, v, arg)) {
      v = xr[i];
      arg = i;
    }
  const unsigned int tid = threadIdx.x;
  best_value[tid] = v;
  best_index[tid] = arg;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half && better(best_value[tid + half], best_index[tid + half], best_value[tid], best_index[tid])) {
      best_value[tid] = best_value[tid + half];
      best_index[tid] = best_index[tid + half];
    }
    __syncthreads();
  }
  if (tid == 0) {
    values[row] = best_value[0];  // the element itself: keeps the sign of a zero maximum
    if (indices) indices[row] = static_cast<std::int32_t>(best_index[0]);
  }
}

// One thread per output (o, c), scanning k in order: a later value replaces the best only when
// strictly greater (or the first NaN), so the first maximum stays.
template <class T>
__global__ void max_strided_kernel(const T* x, std::int64_t n, std::int64_t inner, std::int64_t outputs, T* values,
                                   std::int32_t* indices) {
  for (std::int64_t j = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; j < outputs;
       j += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t o = j / inner, c = j % inner;
    const T* col = x + o * n * inner + c;
    T best = col[0];
    std::int32_t arg = 0;
    for (std::int64_t k = 1; k < n; ++k) {
      const T v = col[k * inner];
      if (v > best || (v != v && best == best)) {
        best = v;
        arg = static_cast<std::int32_t>(k);
      }
    }
    values[j] = best;
    if (indices) indices[j] = arg;
  }
}

}  // namespace

void CudaBackend::sum(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& out) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (inner == 1) {
      const std::int64_t chunks = (n + kRowBlockElements - 1) / kRowBlockElements;
      const int threads = chunks > 1 ? 256 : cuda::row_threads(n);
      const std::int64_t blocks = outer * chunks;
      MOELAB_CHECK(blocks <= 0x7fffffffLL, "sum", "too many rows for one launch: ", outer, " x ", n);
      cuda::DeviceBuffer<double> partial(chunks > 1 ? static_cast<std::size_t>(blocks) : 1);
      sum_rows_kernel<T><<<static_cast<unsigned int>(blocks), threads, threads * sizeof(double), cuda::stream()>>>(
          px, n, chunks, po, partial.get());
      MOELAB_CUDA_CHECK_LAUNCH();
      if (chunks > 1) {  // partial[row * chunks + chunk]: part stride 1, output step chunks
        combine_partials_kernel<T><<<cuda::blocks_for(outer), cuda::kThreads, 0, cuda::stream()>>>(
            partial.get(), outer, chunks, 1, chunks, po);
        MOELAB_CUDA_CHECK_LAUNCH();
      }
      return;
    }
    const std::int64_t outputs = outer * inner;
    const std::int64_t chunks =
        outputs >= kManyOutputs || n <= kStridedChunk ? 1 : (n + kStridedChunk - 1) / kStridedChunk;
    const std::int64_t k_per_chunk = chunks == 1 ? n : kStridedChunk;
    cuda::DeviceBuffer<double> partial(chunks > 1 ? static_cast<std::size_t>(outputs * chunks) : 1);
    sum_strided_kernel<T><<<cuda::blocks_for(outputs * chunks), cuda::kThreads, 0, cuda::stream()>>>(
        px, n, inner, outputs, chunks, k_per_chunk, po, partial.get());
    MOELAB_CUDA_CHECK_LAUNCH();
    if (chunks > 1) {  // partial[chunk * outputs + j]: part stride outputs, output step 1
      combine_partials_kernel<T><<<cuda::blocks_for(outputs), cuda::kThreads, 0, cuda::stream()>>>(
          partial.get(), outputs, chunks, outputs, 1, po);
      MOELAB_CUDA_CHECK_LAUNCH();
    }
  });
}

void CudaBackend::max(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& values,
                      Tensor* indices) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    std::int32_t* pi = indices ? indices->data<std::int32_t>() : nullptr;
    if (inner == 1) {
      MOELAB_CHECK(outer <= 0x7fffffffLL, "max", "too many rows for one launch: ", outer);
      const int threads = cuda::row_threads(n);
      const std::size_t shared = static_cast<std::size_t>(threads) * (sizeof(double) + sizeof(std::int64_t));
      max_rows_kernel<T><<<static_cast<unsigned int>(outer), threads, shared, cuda::stream()>>>(px, n, pv, pi);
      MOELAB_CUDA_CHECK_LAUNCH();
      return;
    }
    const std::int64_t outputs = outer * inner;
    max_strided_kernel<T><<<cuda::blocks_for(outputs), cuda::kThreads, 0, cuda::stream()>>>(px, n, inner, outputs, pv,
                                                                                            pi);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace moelab
