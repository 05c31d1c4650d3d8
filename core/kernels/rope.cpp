// core/kernels/rope.cpp — checks and dispatch for the rotary position embedding (RoPE).
//
//   rope  x: [B, T, H, hd] -> [B, T, H, hd]
// Token t of every sequence sits at absolute position p = position_offset + t (a KV-cached
// decoder passes the number of positions already cached). Within each head's vector the pairs
// (2i, 2i+1), i = 0 .. hd/2 - 1, are rotated by the angle a(p, i) = p * theta^(-2i / hd):
//   y[2i]   = x[2i] cos a - x[2i+1] sin a
//   y[2i+1] = x[2i] sin a + x[2i+1] cos a
// (RoFormer, Su et al. 2021, eq. 34; the interleaved pairing of Meta's and Mistral's reference
// code, not the "rotate half" pairing of some other implementations). A rotation's transpose is
// its inverse, so inverse = true (angle -a) undoes the forward and is also its backward:
// dx = rope(dy, position_offset, theta, !inverse).
//
// Layout choice: [B, T, H, hd] is what a projection x @ Wq^T: [B*T, d] gives when reshaped (a
// view), so RoPE runs before the one permute to attention's [B, H, T, hd] layout.
//
// Choices: x must be float32 or float64, rank 4, with hd even and >= 2; position_offset >= 0;
// theta finite and > 0. Empty tensors give empty results.
#include <cmath>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {

Tensor rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse) {
  check_floating(x, "rope", "x");
  MOELAB_CHECK(x.rank() == 4, "rope", "x must be [B, T, H, hd], got ", x.shape());
  MOELAB_CHECK(x.size(3) >= 2 && x.size(3) % 2 == 0, "rope", "the head size hd must be even and >= 2, got x ",
               x.shape());
  MOELAB_CHECK(position_offset >= 0, "rope", "position_offset must be >= 0, got ", position_offset);
  MOELAB_CHECK(std::isfinite(theta) && theta > 0.0, "rope", "theta must be finite and > 0, got ", theta);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  backend(x.device()).rope(x, position_offset, theta, inverse, out);
  return out;
}

}  // namespace moelab::kernels
