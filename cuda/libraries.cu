// cuda/libraries.cu — opening cuBLAS and cuRAND on first use (cuda/libraries.h says why).
#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "cuda/libraries.h"

#ifndef MOELAB_CUDA_LIBRARY_DIR
#define MOELAB_CUDA_LIBRARY_DIR ""
#endif
#define MOELAB_STRINGIFY_(x) #x
#define MOELAB_STRINGIFY(x) MOELAB_STRINGIFY_(x)

namespace moelab::cuda {
namespace {

// dlopen by name, then in the toolkit's folder; never closed (the handles live until exit).
void* open_library(const std::string& name) {
  if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = dlerror();
  const std::string folder = MOELAB_CUDA_LIBRARY_DIR;
  if (!folder.empty()) {
    if (void* handle = dlopen((folder + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  fail("cuda", "cannot load ", name, " (", first_error, "; also looked in ",
       folder.empty() ? std::string("no toolkit folder") : folder,
       "): install the CUDA toolkit's libraries of the version this build was compiled with, or add their "
       "folder to LD_LIBRARY_PATH");
}

template <class Function>
void find(void* library, const char* library_name, const char* symbol, Function& slot) {
  void* address = dlsym(library, symbol);
  if (address == nullptr) fail("cuda", library_name, " has no function ", symbol, " (a different version?)");
  slot = reinterpret_cast<Function>(address);
}

}  // namespace

const CublasLibrary& cublas_library() {
  static const CublasLibrary library = [] {
    const std::string name = "libcublas.so." MOELAB_STRINGIFY(CUBLAS_VER_MAJOR);
    void* handle = open_library(name);
    CublasLibrary l{};
    const char* n = name.c_str();
    find(handle, n, "cublasCreate_v2", l.create);
    find(handle, n, "cublasSetStream_v2", l.set_stream);
    find(handle, n, "cublasSetMathMode", l.set_math_mode);
    find(handle, n, "cublasSetPointerMode_v2", l.set_pointer_mode);
    find(handle, n, "cublasGetStatusString", l.status_string);
    find(handle, n, "cublasSgemm_v2", l.sgemm);
    find(handle, n, "cublasSgemmStridedBatched", l.sgemm_strided_batched);
    find(handle, n, "cublasDgemm_v2", l.dgemm);
    find(handle, n, "cublasDgemmStridedBatched", l.dgemm_strided_batched);
    find(handle, n, "cublasGemmEx", l.gemm_ex);
    find(handle, n, "cublasGemmStridedBatchedEx", l.gemm_strided_batched_ex);
    return l;
  }();
  return library;
}

const CurandLibrary& curand_library() {
  static const CurandLibrary library = [] {
    const std::string name = "libcurand.so." MOELAB_STRINGIFY(CURAND_VER_MAJOR);
    void* handle = open_library(name);
    CurandLibrary l{};
    find(handle, name.c_str(), "curandCreateGenerator", l.create_generator);
    find(handle, name.c_str(), "curandSetStream", l.set_stream);
    return l;
  }();
  return library;
}

}  // namespace moelab::cuda
