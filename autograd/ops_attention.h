// autograd/ops_attention.h — differentiable fused attention: causal (the core of nn/attention.cpp,
// the decoder's) and bidirectional (an encoder's: every query sees every key).
#pragma once

#include "autograd/variable.h"

namespace moelab {

// Heads in the projections' layout: q: [B, T, H, hd], k, v: [B, S, H, hd], S >= T -> [B, T, H, hd],
// head h of sequence b being softmax(causal_mask(scale * q_h @ k_h^T, -inf)) @ v_h, where query t
// sees keys 0 .. t + S - T. The same function as permuting the heads out and composing those ops,
// in one kernel without the copies or the masked half (core/kernels.h causal_attention); gradients
// for q, k and v.
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, double scale);

// The same without the mask: q: [B, T, H, hd], k, v: [B, S, H, hd], any S >= 1 -> [B, T, H, hd],
// head h being softmax(scale * q_h @ k_h^T) @ v_h (core/kernels.h attention with causal = false).
Variable bidirectional_attention(const Variable& q, const Variable& k, const Variable& v, double scale);

}  // namespace moelab
