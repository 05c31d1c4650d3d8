// autograd/ops_elementwise.h — differentiable elementwise arithmetic (the unary functions, exp,
// relu and the rest, are in autograd/ops_unary.h).
//
// Binary ops broadcast the NumPy way, exactly as kernels::binary does (core/kernels.h): shapes
// aligned from the right, each pair of axes equal or one of them 1, e.g.
//   y [M, d] * g [M, 1] -> [M, d]      x [B, 1, d] + pos [T, d] -> [B, T, d]
// The result has the broadcast shape; each operand's gradient is summed back over the axes it was
// repeated along (g above gets the row sums of its gradient). Forms with a double operand treat it
// as a constant (no gradient). Every function here is in the registry: the binary ones are listed
// in autograd/op_list.h.
#pragma once

#include "autograd/variable.h"

namespace moelab {

// ---------------------------------------------------------------- binary (a, b: broadcastable -> the broadcast shape)
Variable add(const Variable& a, const Variable& b);
Variable add(const Variable& a, double b);
Variable add(double a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable sub(const Variable& a, double b);
Variable sub(double a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable mul(const Variable& a, double b);
Variable mul(double a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable div(const Variable& a, double b);
Variable div(double a, const Variable& b);
// Elementwise max / min; where a == b the gradient goes to b (maximum) or a (minimum).
Variable maximum(const Variable& a, const Variable& b);
Variable minimum(const Variable& a, const Variable& b);
// x ^ exponent (a constant exponent). d/dx = exponent * x^(exponent-1).
Variable pow(const Variable& x, double exponent);
// a ^ b elementwise. da = b * a^(b-1), db = a^b * log(a): b's gradient needs a > 0.
Variable pow(const Variable& a, const Variable& b);

Variable operator+(const Variable& a, const Variable& b);
Variable operator+(const Variable& a, double b);
Variable operator+(double a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, double b);
Variable operator-(double a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, double b);
Variable operator*(double a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, double b);
Variable operator/(double a, const Variable& b);
Variable operator-(const Variable& x);

// The unary math functions (exp, log, relu, ...) are in autograd/ops_unary.h.

}  // namespace moelab
