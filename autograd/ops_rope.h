// autograd/ops_rope.h — the differentiable rotary position embedding (a kernel pair).
#pragma once

#include <cstdint>

#include "autograd/variable.h"

namespace moelab {

// x: [B, T, H, hd] (hd even) -> [B, T, H, hd]: each head's pairs (2i, 2i+1) of token t rotated by
// the angle (position_offset + t) * theta^(-2i / hd), or by its negative when inverse
// (see core/kernels/rope.cpp). The gradient is the opposite rotation of the output gradient.
Variable rope(const Variable& x, std::int64_t position_offset = 0, double theta = 10000.0, bool inverse = false);

}  // namespace moelab
