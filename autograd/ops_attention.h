// autograd/ops_attention.h — differentiable fused causal attention (the core of nn/attention.cpp).
#pragma once

#include "autograd/variable.h"

namespace moelab {

// q: [N, T, hd], k, v: [N, S, hd], S >= T -> softmax(causal_mask(q @ k^T, -inf)) @ v: [N, T, hd],
// where query t sees keys 0 .. t + S - T. The same function as those ops composed, in one kernel
// that skips the masked half (core/kernels.h causal_attention); gradients for q, k and v.
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v);

}  // namespace moelab
