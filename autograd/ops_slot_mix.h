// autograd/ops_slot_mix.h — the differentiable halves of Soft MoE's token-order mixing (a kernel
// trio: core/kernels/slot_mix.cpp, which explains the feature-major layout).
//
// With B examples of m tokens, n experts of p slots and f features:
//   slot_mix_reduce(w, u)  w: [B, m, n, p], u: [B, m, f, n] -> [B, f, n, p]
//                          out[b, c, e, j] = sum_i w[b, i, e, j] u[b, i, c, e]
//                          (the dispatch: each slot mixes its expert's values of the m tokens)
//   slot_mix_expand(w, v)  w: [B, m, n, p], v: [B, f, n, p] -> [B, m, f, n]
//                          out[b, i, c, e] = sum_j w[b, i, e, j] v[b, c, e, j]
//                          (the combine: each token gets, per expert, its weighted slot values)
// Both are differentiable in both arguments. nn/moe/expert_bank.h (forward_mixed) uses them to
// run Soft MoE's experts without forming the [B, n*p, d] slot tensors.
#pragma once

#include "autograd/variable.h"

namespace moelab {

Variable slot_mix_reduce(const Variable& w, const Variable& u);
Variable slot_mix_expand(const Variable& w, const Variable& v);

// Slot order with expert-major slots (S = n*p, slot s = e*p + j):
//   slot_dispatch(w, x)  w: [B, m, S], x: [B, m, d] -> [S, B, d]   out[s, b] = sum_i w[b, i, s] x[b, i]
//   slot_combine(w, y)   w: [B, m, S], y: [S, B, d] -> [B, m, d]   out[b, i] = sum_s w[b, i, s] y[s, b]
// (Xs = D^T X and Y = C Ys of nn/moe/soft_moe.h, with Xs and Ys laid out [S, B, d] so that the
// experts take their rows without a permute.)
Variable slot_dispatch(const Variable& w, const Variable& x);
Variable slot_combine(const Variable& w, const Variable& y);

}  // namespace moelab
