// core/kernels/mask.cpp — checks and dispatch for the causal attention mask.
//
//   causal_mask  scores: [..., T, S] -> [..., T, S], a copy with entry (i, j) := fill where
//                j > i + (S - T)
// Query i of T is the last T of S key positions, i.e. it sits at key position i + (S - T): it may
// see keys up to and including that one. With T == S (self-attention) row i sees columns 0..i;
// with S > T (queries appended to a longer cache) every row sees S - T more columns. S < T is
// allowed: the first T - S rows are then fully masked (a softmax over them gives NaN, which is
// the caller's concern). The backward is causal_mask(dy, 0): masked entries get no gradient.
//
// Choices: scores must be float32 or float64 with at least two axes; empty scores give an empty
// copy. fill may be +-infinity (the usual -inf before a softmax) or NaN, but a finite fill must
// fit the dtype (a float32 cannot hold -1e300; converting it would be undefined behaviour).
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {

Tensor causal_mask(const Tensor& scores, double fill) {
  check_floating(scores, "causal_mask", "scores");
  MOELAB_CHECK(scores.rank() >= 2, "causal_mask", "scores must be [..., T, S] with at least two axes, got ",
               scores.shape());
  MOELAB_CHECK(scores.dtype() != DType::Float32 || !std::isfinite(fill) ||
                   std::abs(fill) <= static_cast<double>(std::numeric_limits<float>::max()),
               "causal_mask", "fill ", fill, " does not fit in float32");
  Tensor out = Tensor::empty(scores.shape(), scores.dtype(), scores.device());
  if (out.numel() == 0) return out;
  backend(scores.device()).causal_mask(scores, fill, out);
  return out;
}

}  // namespace moelab::kernels
