// core/dtype_dispatch.h — run a templated lambda with the C++ type of a tensor's dtype.
//
//   dispatch_float(x.dtype(), [&]<class T>() { ... x.data<T>() ... });
// calls the lambda with T = float or double (anything else is a moelab::Error); dispatch_all also
// covers int32. Both backends use it: core/cpu/ around Eigen and loops, cuda/ around kernel
// launches (it is host code, so nvcc compiles it too).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace moelab {

template <class Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn.template operator()<float>(); return;
    case DType::Float64: fn.template operator()<double>(); return;
    default: fail("dispatch_float", "dtype ", dtype, " is not a floating type");
  }
}

template <class Fn>
void dispatch_all(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn.template operator()<float>(); return;
    case DType::Float64: fn.template operator()<double>(); return;
    case DType::Int32: fn.template operator()<std::int32_t>(); return;
    case DType::BFloat16: break;
  }
  // bfloat16 is a storage dtype (core/dtype.h): the few kernels that take it handle it by name.
  fail("dispatch_all", "this operation does not take dtype ", dtype, " (convert to float32 first)");
}

}  // namespace moelab
