// autograd/ops_rope.cpp — RoPE and its gradient.
//
// y = R x with R a block-diagonal matrix of 2x2 rotations (one per pair, per token, per head), so
// dL/dx = R^T dL/dy, and R^T is the rotation by the opposite angle: the same kernel with
// `inverse` flipped. Nothing is saved from the forward.
#include "autograd/ops_rope.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

// x: [B, T, H, hd] -> [B, T, H, hd]
Variable rope(const Variable& x, std::int64_t position_offset, double theta, bool inverse) {
  return record("rope", kernels::rope(x.data(), position_offset, theta, inverse), {x},
                [position_offset, theta, inverse](const std::vector<Variable>&, const Tensor& g) {
                  return std::vector<Tensor>{kernels::rope(g, position_offset, theta, !inverse)};
                });
}

}  // namespace moelab
