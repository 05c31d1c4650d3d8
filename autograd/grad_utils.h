// autograd/grad_utils.h — Tensor helpers that backward functions share (internal to autograd/).
//
// Forward ops broadcast, reduce and slice; their backward functions do the reverse:
//   reduce_to_shape   undo kernels::binary broadcasting: sum a gradient back to an operand's shape
//   expand_axis       undo a reduction over one axis: repeat a gradient along that axis
//   pad_axis          undo a slice along one axis: place a gradient inside zeros of the full shape
// plus short names for the Tensor arithmetic backward functions are written in. Everything goes
// through core/kernels.h, so it runs on whatever device the tensors live on.
#pragma once

#include <cstdint>

#include "core/kernels.h"
#include "core/tensor.h"

namespace moelab::detail {

// Tensor arithmetic (broadcasting the NumPy way, as kernels::binary).
Tensor add_t(const Tensor& a, const Tensor& b);
Tensor sub_t(const Tensor& a, const Tensor& b);
Tensor mul_t(const Tensor& a, const Tensor& b);
Tensor div_t(const Tensor& a, const Tensor& b);
Tensor scale_t(const Tensor& a, double s);  // a * s
Tensor neg_t(const Tensor& a);

// A new tensor of `shape` filled with `value`, with like's dtype and device.
Tensor filled(const Shape& shape, double value, const Tensor& like);
// The value of a one-element float tensor, on the host, as a double.
double scalar_value(const Tensor& x);

// grad: the shape of a broadcast result; shape: an operand's shape that broadcast to it. Sums grad
// over the axes along which the operand was repeated (its size-1 axes and the leading axes it
// lacks) -> [shape], e.g. grad [B, T, d] to [B, 1, d]: sum over T; to [T, 1]: over d, then B.
// The sums use kernels::sum (fixed order) in a fixed sequence, so the result is deterministic; an
// operand of one element, or of grad's trailing axes, takes a single reduction.
Tensor reduce_to_shape(const Tensor& grad, const Shape& shape);
// grad: `shape` with axis removed (or kept as size 1) -> [shape], each value repeated along axis.
Tensor expand_axis(const Tensor& grad, const Shape& shape, int axis);
// grad: `shape` except grad.size(axis) <= shape[axis] -> [shape], zeros except grad placed at
// [start, start + grad.size(axis)) along axis.
Tensor pad_axis(const Tensor& grad, const Shape& shape, int axis, std::int64_t start);

}  // namespace moelab::detail
