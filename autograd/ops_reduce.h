// autograd/ops_reduce.h — differentiable sums, means and maxima.
#pragma once

#include "autograd/variable.h"

namespace moelab {

// x: [...] -> [] (0-d)
Variable sum(const Variable& x);
Variable mean(const Variable& x);
Variable max(const Variable& x);  // gradient to the first maximum
// x: [..., n, ...] -> the same with axis removed (keepdim: kept as size 1)
Variable sum(const Variable& x, int axis, bool keepdim = false);
Variable mean(const Variable& x, int axis, bool keepdim = false);
// The maxima only (kernels::max gives the argmax too, if you need it as a Tensor);
// the gradient goes to the first maximum of each slice.
Variable max(const Variable& x, int axis, bool keepdim = false);

}  // namespace moelab
