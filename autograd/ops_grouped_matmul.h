// autograd/ops_grouped_matmul.h — the differentiable grouped matrix product (MoE expert layers).
#pragma once

#include "autograd/variable.h"
#include "core/tensor.h"

namespace moelab {

// x: [N, in] with rows sorted by group, w: [E, in, out] (stored [E, out, in] when trans_w),
// offsets: int32 [E + 1] (0 = offsets[0] <= ... <= offsets[E] = N; not differentiated)
//   -> [N, out], rows offsets[e] .. offsets[e+1]-1 of x multiplied by w[e] (kernels::grouped_matmul).
// Gradients for x and w.
Variable grouped_matmul(const Variable& x, const Variable& w, const Tensor& offsets, bool trans_w = false);

}  // namespace moelab
