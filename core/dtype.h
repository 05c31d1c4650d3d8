// core/dtype.h — element types a Tensor can hold.
//
// float32 is the model dtype; int32 holds indices (token ids, expert ids, top-k results);
// float64 exists on the CPU so that gradcheck can take finite differences in double precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

namespace moelab {

enum class DType { Float32, Float64, Int32 };

inline std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
  }
  return "?";
}

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

}  // namespace moelab
