// autograd/ops_shape.h — differentiable reshaping, slicing, joining and axis reordering.
//
// reshape is a view (it shares the input's storage); every other op here copies, as in
// core/kernels.h. Gradients only move values around: they are the inverse rearrangement of g.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/variable.h"

namespace moelab {

// xs[i]: equal shapes except along axis -> sizes summed along axis.
Variable concat(const std::vector<Variable>& xs, int axis);
// x: [..., n, ...] -> pieces with sizes[i] along axis (the sizes sum to n).
std::vector<Variable> split(const Variable& x, const std::vector<std::int64_t>& sizes, int axis);
// x: [..., n, ...] -> [..., length, ...], entries [start, start + length) along axis.
Variable narrow(const Variable& x, int axis, std::int64_t start, std::int64_t length);
// x -> the same elements in `shape` (one size may be -1); a view of x's data.
Variable reshape(const Variable& x, const Shape& shape);
// x: swaps axis0 and axis1 (default: the last two).
Variable transpose(const Variable& x, int axis0 = -2, int axis1 = -1);
// x -> out with out axis i = x axis order[i].
Variable permute(const Variable& x, const std::vector<int>& order);

}  // namespace moelab
