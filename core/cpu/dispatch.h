// core/cpu/dispatch.h — run a templated lambda with the C++ type of a tensor's dtype.
//
//   dispatch_float(x.dtype(), [&]<class T>() { ... x.data<T>() ... });
// calls the lambda with T = float or double. dispatch_all also covers int32.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace moelab::cpu {

template <class Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn.template operator()<float>(); return;
    case DType::Float64: fn.template operator()<double>(); return;
    default: fail("cpu", "dtype ", dtype, " is not a floating type");
  }
}

template <class Fn>
void dispatch_all(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn.template operator()<float>(); return;
    case DType::Float64: fn.template operator()<double>(); return;
    case DType::Int32: fn.template operator()<std::int32_t>(); return;
  }
}

}  // namespace moelab::cpu
