// core/dtype.h — element types a Tensor can hold.
//
// float32 is the model dtype; int32 holds indices (token ids, expert ids, top-k results);
// float64 exists on the CPU so that gradcheck can take finite differences in double precision.
// bfloat16 (core/bfloat16.h) is a storage dtype for mixed precision (autograd/precision.h): the
// bf16 copies that the matrix products read. Only casts, copies, printing, safetensors and the
// products (matmul, grouped_matmul: bf16 inputs, float32 accumulation and output) take it; every
// other op asks for float32 or float64 (is_floating) and names the dtype it got.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

#include "core/bfloat16.h"

namespace moelab {

enum class DType { Float32, Float64, Int32, BFloat16 };

inline std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::BFloat16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

// The dtypes ops compute in. bfloat16 is a float too, but only a storage one (see above).
inline bool is_floating(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

inline std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

// The DType that corresponds to a C++ type: dtype_of<float>() == DType::Float32.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::Float32; }
template <>
constexpr DType dtype_of<double>() { return DType::Float64; }
template <>
constexpr DType dtype_of<std::int32_t>() { return DType::Int32; }
template <>
constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }

}  // namespace moelab
