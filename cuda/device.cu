// cuda/device.cu — GPU discovery, compiled by nvcc whenever the build has CUDA.
//
// The CUDA backend proper (memory, copies, every kernel of core/kernels.h on cuBLAS, cuRAND and
// kernels of our own, mirroring core/cpu/ file for file) is the CUDA issue's work. Until it
// lands, this file makes the build's CUDA path real — nvcc compiles it and cudart is linked — and
// answers whether a GPU is present, while asking for a CUDA tensor fails with a clear message.
#include <cuda_runtime.h>

#include "core/backend.h"

namespace moelab {

bool cuda_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Backend& cuda_backend() {
  fail("cuda", "the CUDA kernels are not in this build yet (the CUDA backend issue adds them); use the CPU");
}

}  // namespace moelab
