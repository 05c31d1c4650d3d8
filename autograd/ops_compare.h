// autograd/ops_compare.h — comparisons and where(): masks computed on the device, and a selection
// that gradients flow through.
//
// A comparison has no gradient (it is a step function), so eq, ne, lt, le, gt and ge take
// Variables (or a Variable and a number) and return a constant Tensor: 1 where the relation holds,
// 0 elsewhere, in the operands' dtype, broadcast as every binary op is (core/kernels.h). NaN
// compares false except under ne, as in IEEE and PyTorch. No host round trip: a mask built here
// stays on the device, where computing it on the host used to read the values back.
//
// where(cond, a, b) picks a where cond != 0 and b elsewhere, element by element (cond, a and b of
// one shape). It selects, it does not blend: the value is exactly a's or b's, so an inf or NaN in
// the branch not taken does not leak into the result (c * a + (1 - c) * b would make 0 * inf =
// NaN); the gradient goes to a where cond holds and to b elsewhere, exact zeros in the other.
// It is built from differentiable ops (the two operands side by side, concat, then gather_last),
// so it runs on every device and has their gradients.
//
//   Tensor big = gt(x, 3.0);                          // [N, d] 0/1, no gradient
//   Variable clipped = where(big, full_like(x, 3), x);  // x where x <= 3, else 3
//   Variable y = where(lt(a, b), a, b);               // elementwise min; ties go to b
#pragma once

#include "autograd/variable.h"

namespace moelab {

// a op b by broadcasting -> 1 where it holds, else 0 (a constant: no gradient).
Tensor eq(const Variable& a, const Variable& b);
Tensor ne(const Variable& a, const Variable& b);
Tensor lt(const Variable& a, const Variable& b);
Tensor le(const Variable& a, const Variable& b);
Tensor gt(const Variable& a, const Variable& b);
Tensor ge(const Variable& a, const Variable& b);
// a op s, elementwise against the number s.
Tensor eq(const Variable& a, double s);
Tensor ne(const Variable& a, double s);
Tensor lt(const Variable& a, double s);
Tensor le(const Variable& a, double s);
Tensor gt(const Variable& a, double s);
Tensor ge(const Variable& a, double s);

// cond, a, b broadcast the NumPy way to one shape (moelab::Error otherwise; a and b of one dtype
// and device; cond any dtype, nonzero meaning "take a") -> that shape. A broadcast operand's
// gradient is summed back over the axes it was repeated along. Either branch may be a number
// (a constant, no gradient): where(mask, x, 0.0), where(mask, -1e9, scores).
Variable where(const Tensor& cond, const Variable& a, const Variable& b);
Variable where(const Tensor& cond, const Variable& a, double b);
Variable where(const Tensor& cond, double a, const Variable& b);

}  // namespace moelab
