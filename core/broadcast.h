// core/broadcast.h — NumPy broadcasting of two shapes, and the strided loop plan kernels run.
//
// The rule, exactly NumPy's. Align the two shapes from the right; a missing leading axis counts
// as 1. Each aligned pair of axes must be equal, or one of them 1; the result takes the other
// size (so a size-0 axis pairs with 0 or 1 and gives an empty result):
//   a: [B, 1, d],  b: [T, d]     -> [B, T, d]
//   a: [N, 1],     b: [1, M]     -> [N, M]      (an outer product shape)
//   a: [N, d],     b: [N, 1]     -> [N, d]      (one value per row, repeated along it)
//   a: [],         b: [2, 3]     -> [2, 3]      (a 0-d scalar on either side)
//   a: [2, 3],     b: [3, 2]     -> no shape: axis -1 pairs 3 with 2
//
// BroadcastPlan is how a kernel walks the result. Axes of size 1 in the result are dropped, and
// neighbouring axes along which a and b broadcast alike (a repeated along both or neither, the
// same for b) are merged, since contiguous row-major data steps across them as one axis:
//   a: [B, 1, d] with b: [T, d] -> sizes [B, T, d]: a strides [d, 0, 1], b strides [0, d, 1]
//   a: [N, d]    with b: [N, 1] -> sizes [N, d]:    a strides [d, 1],    b strides [1, 0]
//   a: [4, 5, 6] with b: [6]    -> sizes [20, 6]:   a strides [6, 1],    b strides [0, 1]
// Element (i_0, ..., i_{r-1}) of the result (row-major over `sizes`) reads
//   a[sum_k i_k * a_strides[k]]  and  b[sum_k i_k * b_strides[k]],
// with stride 0 along the axes where that operand is repeated. Along the last axis each stride is
// 0 or 1 and never both 0 (such an axis would have size 1 and be dropped). An empty result has no
// plan (kernels never see it); a one-element result is the plan sizes [1], strides [0], [0].
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/shape.h"

namespace moelab {

// The broadcast shape of a and b, or nothing when some aligned pair differs with neither 1.
std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b);

struct BroadcastPlan {
  std::vector<std::int64_t> sizes;      // the merged axes of the result, outermost first (>= 1 axis)
  std::vector<std::int64_t> a_strides;  // a's element step along each merged axis; 0 where a repeats
  std::vector<std::int64_t> b_strides;  // the same for b
  int rank() const { return static_cast<int>(sizes.size()); }
};

// The plan for a op b; a and b must broadcast and their result must not be empty.
BroadcastPlan broadcast_plan(const Shape& a, const Shape& b);

}  // namespace moelab
