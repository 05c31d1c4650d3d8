// cuda/context.cu — the one CUDA stream, the cuBLAS and cuRAND handles, and the error checks
// every CUDA file uses (declared in cuda/context.h).
//
// cuBLAS and cuRAND are opened on first use too (cuda/libraries.h), not linked.
//
// Lifetime. Each handle is created on first use (so a program that never touches a GPU never
// initialises CUDA) by a function-local static, which C++ guarantees to initialise exactly once
// even when several threads ask at the same time. The handles are deliberately never destroyed:
// tensors held in static variables may be freed during static destruction, after the CUDA
// runtime has begun to shut down, and destroying a stream or handle then fails or crashes. The
// driver reclaims everything when the process exits.
//
// The stream is a *blocking* stream (cudaStreamDefault flags, not cudaStreamNonBlocking): work on
// it is ordered with the legacy default stream. moelab itself enqueues everything on stream(),
// but if any code (a test, a library) issues a plain cudaMemcpy or cudaMemset on the default
// stream, a blocking stream keeps that ordered with our kernels instead of racing them.
//
// cuBLAS runs in CUBLAS_DEFAULT_MATH: full float32 arithmetic for SGEMM, no TF32 tensor-core
// shortcut (TF32 keeps only 10 mantissa bits of each input, which would break CPU/GPU parity at
// float32 tolerances). cuBLAS's default atomics mode (not allowed) keeps its results bitwise
// reproducible run after run on one GPU model.
//
// The cuRAND generator is Philox4x32-10, the same algorithm as moelab::Generator (core/random.h).
// moelab's random fills (cuda/random_fill.cu) evaluate Philox themselves so that they reproduce
// the Generator's word stream exactly; the handle is here for code that wants cuRAND's own
// distributions on the shared stream.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/device_errors.cuh"
#include "cuda/libraries.h"

namespace moelab::cuda {
namespace {

const char* curand_status_string(curandStatus_t status) {
  switch (status) {
    case CURAND_STATUS_SUCCESS: return "no error";
    case CURAND_STATUS_VERSION_MISMATCH: return "header and library versions differ";
    case CURAND_STATUS_NOT_INITIALIZED: return "generator not initialised";
    case CURAND_STATUS_ALLOCATION_FAILED: return "memory allocation failed";
    case CURAND_STATUS_TYPE_ERROR: return "wrong generator type";
    case CURAND_STATUS_OUT_OF_RANGE: return "argument out of range";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "length is not a multiple of the dimension";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: return "the GPU lacks double precision";
    case CURAND_STATUS_LAUNCH_FAILURE: return "kernel launch failure";
    case CURAND_STATUS_PREEXISTING_FAILURE: return "an earlier CUDA failure is pending";
    case CURAND_STATUS_INITIALIZATION_FAILED: return "CUDA initialisation failed";
    case CURAND_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CURAND_STATUS_INTERNAL_ERROR: return "internal cuRAND error";
  }
  return "unknown cuRAND status";
}

[[noreturn]] void raise(const char* what, const char* file, int line, const char* reason, int code) {
  fail("cuda", what, " failed at ", file, ":", line, ": ", reason, " (code ", code, ")");
}

}  // namespace

void check(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  raise(what, file, line, cudaGetErrorString(status), static_cast<int>(status));
}

void check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  raise(what, file, line, cublas_library().status_string(status), static_cast<int>(status));
}

void check(curandStatus_t status, const char* what, const char* file, int line) {
  if (status == CURAND_STATUS_SUCCESS) return;
  raise(what, file, line, curand_status_string(status), static_cast<int>(status));
}

namespace {

// Whether the environment variable `name` is "1".
bool env_is_one(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// Switches read from the environment once, then settable (tests turn them on and off).
std::atomic<bool>& sync_flag() {
  static std::atomic<bool> flag{env_is_one("MOELAB_CUDA_SYNC")};
  return flag;
}

std::atomic<bool>& generic_flag() {
  static std::atomic<bool> flag{env_is_one("MOELAB_CUDA_GENERIC")};
  return flag;
}

// "void moelab::CudaBackend::rmsnorm(const Tensor&, ...)::<lambda()> [with T = float]" ->
// "CudaBackend::rmsnorm": the op, without its parameters, template arguments and lambdas.
std::string op_of(const char* function) {
  std::string name(function);
  const std::size_t paren = name.find('(');
  if (paren != std::string::npos) name.resize(paren);
  const std::size_t space = name.rfind(' ');
  if (space != std::string::npos) name = name.substr(space + 1);
  if (name.rfind("moelab::", 0) == 0) name = name.substr(8);
  return name;
}

}  // namespace

bool sync_each_launch() { return sync_flag().load(std::memory_order_relaxed); }
void set_sync_each_launch(bool on) { sync_flag().store(on, std::memory_order_relaxed); }

bool generic_kernels() { return generic_flag().load(std::memory_order_relaxed); }
void set_generic_kernels(bool on) { generic_flag().store(on, std::memory_order_relaxed); }

void check_launch(const char* function, const char* file, int line) {
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess)
    fail("cuda", "kernel launch in ", op_of(function), " failed at ", file, ":", line, ": ",
         cudaGetErrorString(launched), " (code ", static_cast<int>(launched), ")");
  if (!sync_each_launch()) return;
  const cudaError_t ran = cudaStreamSynchronize(stream());
  if (ran != cudaSuccess)
    fail("cuda", "a kernel launched by ", op_of(function), " at ", file, ":", line, " failed: ",
         cudaGetErrorString(ran), " (code ", static_cast<int>(ran), "; MOELAB_CUDA_SYNC=1 checks after every launch)");
  raise_device_error();
}

cudaStream_t stream() {
  static cudaStream_t the_stream = [] {
    cudaStream_t s = nullptr;
    MOELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamDefault));
    return s;
  }();
  return the_stream;
}

cublasHandle_t cublas() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    MOELAB_CUDA_CHECK(cublas_library().create(&h));
    MOELAB_CUDA_CHECK(cublas_library().set_stream(h, stream()));
    MOELAB_CUDA_CHECK(cublas_library().set_math_mode(h, CUBLAS_DEFAULT_MATH));        // full float32, no TF32
    MOELAB_CUDA_CHECK(cublas_library().set_pointer_mode(h, CUBLAS_POINTER_MODE_HOST));  // alpha, beta from the host
    return h;
  }();
  return handle;
}

curandGenerator_t curand() {
  static curandGenerator_t generator = [] {
    curandGenerator_t g = nullptr;
    MOELAB_CUDA_CHECK(curand_library().create_generator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    MOELAB_CUDA_CHECK(curand_library().set_stream(g, stream()));
    return g;
  }();
  return generator;
}

void synchronize() { MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream())); }

}  // namespace moelab::cuda

namespace moelab {

// core/backend.h. cuBLAS's math mode for the dense products; the grouped expert products
// (cuda/grouped_matmul.cu) read the mode itself when they launch.
namespace {
std::atomic<CudaFloat32Products>& float32_products_mode() {
  static std::atomic<CudaFloat32Products> mode{CudaFloat32Products::Float32};
  return mode;
}
}  // namespace

void set_cuda_float32_products(CudaFloat32Products mode) {
  MOELAB_CUDA_CHECK(cuda::cublas_library().set_math_mode(
      cuda::cublas(), mode == CudaFloat32Products::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  float32_products_mode().store(mode, std::memory_order_relaxed);
}

CudaFloat32Products cuda_float32_products() { return float32_products_mode().load(std::memory_order_relaxed); }

std::size_t cuda_peak_memory_bytes() { return cuda::allocator_stats().peak_bytes_in_use; }

}  // namespace moelab
