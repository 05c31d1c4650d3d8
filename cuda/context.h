// cuda/context.h — what every CUDA kernel file shares: the stream, the library handles, error
// checks and launch arithmetic.
//
// moelab runs everything on one CUDA stream of one device (the current one when the context is
// first used). Kernels and cuBLAS calls are enqueued on it in program order, so no kernel needs
// its own synchronisation; copies to the host synchronise the stream before returning. The
// handles are created lazily, once, on first use, and live until the process ends.
//
// Every CUDA, cuBLAS and cuRAND call goes through MOELAB_CUDA_CHECK, which turns a failure into
// moelab::Error naming the call, the file and line, and the library's own error string.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>

#include <cstdint>

namespace moelab::cuda {

// Throw moelab::Error("moelab::cuda: <what> failed at <file>:<line>: <reason>") on failure.
void check(cudaError_t status, const char* what, const char* file, int line);
void check(cublasStatus_t status, const char* what, const char* file, int line);
void check(curandStatus_t status, const char* what, const char* file, int line);
#define MOELAB_CUDA_CHECK(expr) ::moelab::cuda::check((expr), #expr, __FILE__, __LINE__)
// After a <<<...>>> launch: reports bad launch configurations at the launch site.
#define MOELAB_CUDA_CHECK_LAUNCH() ::moelab::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

cudaStream_t stream();          // the one stream everything runs on
cublasHandle_t cublas();        // bound to stream()
curandGenerator_t curand();     // Philox4x32-10, bound to stream()
void synchronize();             // waits until everything enqueued on stream() has finished (benchmarks)

// Threads per block for simple elementwise kernels, and how many blocks cover n elements
// (grid-stride loops inside the kernels handle what a capped grid leaves over).
constexpr int kThreads = 256;
inline unsigned int blocks_for(std::int64_t n, int threads = kThreads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  constexpr std::int64_t kMaxBlocks = 65535LL * 32;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace moelab::cuda
