// autograd/ops_mask.h — the differentiable causal mask of decoder self-attention.
#pragma once

#include "autograd/variable.h"

namespace moelab {

// scores: [..., T, S] -> a copy with entries where column > row + (S - T) set to `fill`
// (typically -infinity, before a softmax). Masked entries get zero gradient.
Variable causal_mask(const Variable& scores, double fill);

}  // namespace moelab
