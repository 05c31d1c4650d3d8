// cuda/memory.cu — the CUDA backend object, device discovery, device memory and copies.
//
//   cuda_backend()     the one CudaBackend; throws moelab::Error when no GPU is usable
//   cuda_available()   whether a GPU is usable; never throws
//   cuda_probe()       why: the GPU, driver and runtime versions, or the error, in words
//   allocate/deallocate  through the caching allocator (cuda/caching_allocator.h)
//   copy_from_host     host -> device, enqueued on the stream, then the stream is synchronised
//   copy_to_host       device -> host, enqueued on the stream, then the stream is synchronised
//   copy_on_device     device -> device, enqueued on the stream (no synchronisation)
//   synchronize        waits until everything enqueued on the stream has finished (benchmarks)
// After each of the three synchronisations an error a kernel recorded (an index out of range,
// cuda/device_errors.cuh) is raised as moelab::Error.
//
// Why both host copies synchronise. copy_to_host must: the caller reads the host buffer as soon
// as we return, and the copy also has to wait for the kernels that produce the data, which stream
// order guarantees. copy_from_host must not return while the DMA engine may still read the host
// buffer, since the caller may free it at once (Tensor::to frees its host staging tensor right
// after). For pageable memory (what CpuBackend::allocate returns) cudaMemcpyAsync already copies
// into a driver staging buffer before returning, but for page-locked memory it is truly
// asynchronous; synchronising after the copy makes the contract hold for any host buffer. The
// cost is waiting for work queued before the upload, a few microseconds when the GPU is idle.
//
// Device index: everything runs on the CUDA runtime's current device (device 0 unless the program
// calls cudaSetDevice before the first CUDA tensor). Device::cuda(i)'s index is not used to pick
// a GPU yet.
#include <string>

#include "core/error.h"
#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"

namespace moelab {

namespace {

// "13.0" from CUDA's 13000 (1000 * major + 10 * minor).
std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

CudaProbe probe_once() {
  CudaProbe probe;
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  (void)cudaRuntimeGetVersion(&runtime);
  const std::string versions = "driver " + (driver == 0 ? std::string("none") : cuda_version_string(driver)) +
                               ", runtime " + cuda_version_string(runtime);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error
    // No driver, or a driver that sees no device: nothing to use. Anything else (the classic: a
    // driver older than the runtime, cudaErrorInsufficientDriver with a driver present) is a fault.
    probe.no_gpu = driver == 0 || status == cudaErrorNoDevice;
    probe.description = std::string(probe.no_gpu ? "no usable CUDA device" : "the CUDA runtime cannot use the GPU") +
                        ": cudaGetDeviceCount: " + cudaGetErrorString(status) + " (code " +
                        std::to_string(static_cast<int>(status)) + "; " + versions + ")";
    return probe;
  }
  if (count == 0) {
    probe.description = "no CUDA device (" + versions + ")";
    return probe;
  }
  cudaDeviceProp props{};
  const cudaError_t queried = cudaGetDeviceProperties(&props, 0);
  if (queried != cudaSuccess) {
    (void)cudaGetLastError();
    probe.no_gpu = false;
    probe.description = std::string("cudaGetDeviceProperties(0): ") + cudaGetErrorString(queried) + " (" + versions + ")";
    return probe;
  }
  probe.available = true;
  probe.no_gpu = false;
  probe.description = std::string(props.name) + " (sm_" + std::to_string(props.major) + std::to_string(props.minor) +
                      ", " + std::to_string(props.multiProcessorCount) + " SMs, " +
                      std::to_string(props.totalGlobalMem >> 20) + " MiB; " + std::to_string(count) +
                      " device(s)), " + versions;
  return probe;
}

}  // namespace

const CudaProbe& cuda_probe() {
  static const CudaProbe probe = probe_once();
  return probe;
}

bool cuda_available() { return cuda_probe().available; }

Backend& cuda_backend() {
  if (!cuda_available())
    fail("cuda", cuda_probe().description, "; use the CPU");
  // Never destroyed: tensors in static variables release their memory through it during static
  // destruction, possibly after a function-local static backend would already be gone.
  static CudaBackend* instance = new CudaBackend();
  return *instance;
}

void* CudaBackend::allocate(std::size_t bytes) { return cuda::CachingAllocator::instance().allocate(bytes); }

void CudaBackend::deallocate(void* ptr, std::size_t) { cuda::CachingAllocator::instance().deallocate(ptr); }

void CudaBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  MOELAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda::stream()));
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  cuda::raise_device_error();
}

void CudaBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  MOELAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cuda::stream()));
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  cuda::raise_device_error();  // a bad index found by a kernel since the last synchronisation
}

void CudaBackend::copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  MOELAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::stream()));
}

void CudaBackend::synchronize() {
  cuda::synchronize();
  cuda::raise_device_error();
}

}  // namespace moelab
