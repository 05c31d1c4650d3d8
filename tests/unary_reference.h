// tests/unary_reference.h — every unary op of the op list (core/kernels/elementwise_ops.h) in
// plain C++, in any floating type: the reference the kernels are checked against.
//
// One switch with a case per op and no default: the build's -Werror=switch makes a missing case
// a compile error, so a new op must get its reference here (step 6 of the list's recipe), and
// then every test that walks the op table covers it with no further line: the values on random
// inputs (tests/test_elementwise.cpp, in double) and the extremes (tests/test_extremes.cpp, in
// long double against float32 and float64 kernels). Written for accuracy, not speed: sigmoid as
// 1 / (1 + exp(-x)), which in long double is right to the last bit of a float or double result
// over the whole range (exp(-x) overflows to inf exactly where the result is 0).
#pragma once

#include <cmath>

#include "core/kernels.h"
#include "core/kernels/elementwise_ops.h"

namespace moelab::testing {

template <class T>
T unary_reference(kernels::UnaryOp op, T x) {
  using kernels::UnaryOp;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Abs: return std::abs(x);
    case UnaryOp::Square: return x * x;
    case UnaryOp::Relu: return x < T(0) ? T(0) : x;  // NaN < 0 is false: NaN in, NaN out; relu(-0) = -0
    case UnaryOp::Sigmoid: return T(1) / (T(1) + std::exp(-x));
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Erf: return std::erf(x);
    case UnaryOp::Sin: return std::sin(x);
    case UnaryOp::Cos: return std::cos(x);
    case UnaryOp::Reciprocal: return T(1) / x;
  }
  return T(0);
}

}  // namespace moelab::testing
