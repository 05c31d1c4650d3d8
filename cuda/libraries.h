// cuda/libraries.h — cuBLAS and cuRAND, loaded when the first CUDA tensor needs them.
//
// Linked the usual way, cuBLAS (with cuBLASLt, 540 MB on disk) and cuRAND (130 MB) are mapped and
// relocated at program start: every process of a CUDA build paid about 220 MB of resident memory,
// `moelab --help` and CPU-only runs included, against 6 MB for a build without CUDA. So the
// engine does not link them: the first use of a cuBLAS or cuRAND handle (cuda/context.cu) opens
// the library with dlopen and looks up the few functions moelab calls, once, and a process that
// never touches a GPU never loads either. The CUDA runtime itself (libcudart, under 1 MB) stays
// linked.
//
// Where the libraries are looked for: by their versioned names (libcublas.so.13 for the cuBLAS
// the build was compiled against, libcurand.so.10) through the usual search (LD_LIBRARY_PATH, the
// program's run path, the system's library cache), then in the CUDA toolkit's library folder
// CMake found at configure time. If neither works the error says which file is missing and
// why (dlerror's words), at the first GPU product, not at start-up.
//
// The members have the types of the functions cublas_v2.h and curand.h declare, so calls read
// as before: cublas_library().sgemm(handle, ...) is cublasSgemm(handle, ...).
#pragma once

#include <cublas_v2.h>
#include <curand.h>

namespace moelab::cuda {

struct CublasLibrary {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode;
  decltype(&cublasGetStatusString) status_string;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasDgemm_v2) dgemm;
  decltype(&cublasDgemmStridedBatched) dgemm_strided_batched;
  // bfloat16 operands, float32 sums. The C functions (with cublasComputeType_t): C++ sees an
  // overload too (an inline wrapper taking cudaDataType), so decltype(&cublasGemmEx) is ambiguous.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t);
};

struct CurandLibrary {
  decltype(&curandCreateGenerator) create_generator;
  decltype(&curandSetStream) set_stream;
};

// Loaded on the first call (thread-safe); throws moelab::Error when the library cannot be opened
// or lacks a function.
const CublasLibrary& cublas_library();
const CurandLibrary& curand_library();

}  // namespace moelab::cuda
