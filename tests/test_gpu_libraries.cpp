// tests/test_gpu_libraries.cpp — cuBLAS and cuRAND are opened on first use, not at start-up
// (cuda/libraries.h), and every function moelab calls is found in them. Needs no GPU: opening a
// library and looking up its functions does not touch the device, so this runs wherever the
// build has the CUDA backend (a build without it has nothing to check and says so).
#include <doctest/doctest.h>

#ifdef MOELAB_HAVE_CUDA
#include <dlfcn.h>

#include <string>

#include "cuda/libraries.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

namespace {

// Whether the process has the library loaded already (RTLD_NOLOAD opens nothing new).
bool loaded(const std::string& name) {
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

}  // namespace

TEST_CASE("cuBLAS and cuRAND are not loaded at start-up, and load with every function on first use") {
  const std::string cublas = "libcublas.so." STRINGIFY(CUBLAS_VER_MAJOR);
  const std::string cublas_lt = "libcublasLt.so." STRINGIFY(CUBLAS_VER_MAJOR);
  const std::string curand = "libcurand.so." STRINGIFY(CURAND_VER_MAJOR);
  // Nothing in this program has asked for a GPU product yet.
  CHECK_FALSE(loaded(cublas));
  CHECK_FALSE(loaded(cublas_lt));
  CHECK_FALSE(loaded(curand));

  const moelab::cuda::CublasLibrary& blas = moelab::cuda::cublas_library();
  CHECK(bool(blas.create));
  CHECK(bool(blas.set_stream));
  CHECK(bool(blas.set_math_mode));
  CHECK(bool(blas.set_pointer_mode));
  CHECK(bool(blas.status_string));
  CHECK(bool(blas.sgemm));
  CHECK(bool(blas.sgemm_strided_batched));
  CHECK(bool(blas.dgemm));
  CHECK(bool(blas.dgemm_strided_batched));
  CHECK(std::string(blas.status_string(CUBLAS_STATUS_NOT_INITIALIZED)).size() > 0);  // a real call into cuBLAS
  CHECK(loaded(cublas));

  const moelab::cuda::CurandLibrary& rand = moelab::cuda::curand_library();
  CHECK(bool(rand.create_generator));
  CHECK(bool(rand.set_stream));
  CHECK(loaded(curand));
}
#else
TEST_CASE("cuBLAS and cuRAND loading: this build has no CUDA backend, nothing to check") { CHECK(true); }
#endif
