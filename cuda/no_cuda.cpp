// cuda/no_cuda.cpp — what the engine links instead of the CUDA backend when built without CUDA.
//
// Asking for a CUDA tensor then fails with a clear message instead of a link error or a crash;
// cuda_available() answers false so tests and programs can skip GPU work and say so.
#include "core/backend.h"

namespace moelab {

Backend& cuda_backend() {
  fail("cuda", "this build of moelab has no CUDA backend (configure with nvcc present, or -DMOELAB_CUDA=ON)");
}

bool cuda_available() { return false; }

const CudaProbe& cuda_probe() {
  static const CudaProbe probe{false, true, "this build of moelab has no CUDA backend"};
  return probe;
}

void set_cuda_float32_products(CudaFloat32Products) {}
CudaFloat32Products cuda_float32_products() { return CudaFloat32Products::Float32; }

std::size_t cuda_peak_memory_bytes() { return 0; }

}  // namespace moelab
