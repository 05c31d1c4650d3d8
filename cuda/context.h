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
//
// Debugging a fault. Kernels run asynchronously, so a fault inside one (an illegal address, say)
// normally surfaces at the next synchronisation, usually the read of the loss, with no hint of
// which op caused it. With the environment variable MOELAB_CUDA_SYNC=1 every launch (and every
// cuBLAS product) is followed by a stream synchronisation and a check, so the error names the op
// that launched the failing kernel, its file and line. Slow: for finding bugs, not for training.
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
// After a <<<...>>> launch (or a cuBLAS call): reports a bad launch configuration at the launch
// site and, under MOELAB_CUDA_SYNC=1, waits for the kernel and reports its fault or the index
// error it recorded (cuda/device_errors.cuh), naming the function that launched it.
void check_launch(const char* function, const char* file, int line);
#define MOELAB_CUDA_CHECK_LAUNCH() ::moelab::cuda::check_launch(__PRETTY_FUNCTION__, __FILE__, __LINE__)
// Whether every launch synchronises (MOELAB_CUDA_SYNC=1 when the process started; tests set it).
bool sync_each_launch();
void set_sync_each_launch(bool on);
// Whether the general kernels run where a specialised one would apply (MOELAB_CUDA_GENERIC=1
// when the process started; tests set it to run both paths): softmax's block per row instead of
// a warp per short row (cuda/softmax.cu), permute's 64-bit index walk over single elements
// instead of 16-byte words and 32-bit indices (cuda/shape_ops.cu). Same results, bit for bit in
// permute's case; for timing the specialised kernels against the general ones.
bool generic_kernels();
void set_generic_kernels(bool on);

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
