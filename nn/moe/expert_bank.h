// nn/moe/expert_bank.h — E MLP experts stored stacked, computed with grouped matrix products.
//
// Each expert is an MLP d -> f -> d whose hidden activation is relu (default), gelu or swiglu
// (nn/activation.h); with swiglu an expert's up-projection is F = 2f wide (Mixtral's w1, the gate,
// in its first f columns, w3 in the last f), otherwise F = f.
// Parameters (registered in this order, so they draw their initial values in this order):
//   w_in  [E, d, F]   expert e's up-projection, x_row @ w_in[e]    uniform +-1/sqrt(d) (nn.Linear)
//   b_in  [E, F]      optional (bias = true), uniform +-1/sqrt(d)
//   w_out [E, f, d]   expert e's down-projection, h_row @ w_out[e] uniform +-1/sqrt(f)
//   b_out [E, d]      optional, uniform +-1/sqrt(f)
// Note the layout: w_in[e] is [in, out] (the transpose of a Linear's [out, in] weight), so an MLP's
// up.weight^T is w_in[e] and its down.weight^T is w_out[e] (for swiglu: [w1.weight; w3.weight]^T).
//
// forward(x_sorted, offsets): the rows of x_sorted [N, d] are grouped by expert, rows
// offsets[e] .. offsets[e+1]-1 belonging to expert e (offsets int32 [E + 1] on x's device,
// offsets[0] = 0, offsets[E] <= N; the MoE layer sorts its assignments to get this). Rows past
// offsets[E] belong to no expert and come out 0. Then
//   u = grouped_matmul(x_sorted, w_in, offsets) (+ b_in[expert of row])        [N, F]
//   h = act(u)                                                                 [N, f]
//   y = grouped_matmul(h, w_out, offsets) (+ b_out[expert of row])             [N, d]
// The activation sits between the two grouped products and is elementwise (swiglu: two halves of
// a row), so the grouped kernels are the same for every activation, on both devices.
// forward_each(x) is the same when every expert has the same number of rows, laid out [E, R, d]:
//   h = act(x @ w_in (+ b_in[:, None, :]))  [E, R, d] @ [E, d, F] -> [E, R, F] -> [E, R, f] (batched)
//   y = h @ w_out (+ b_out[:, None, :])     [E, R, f] @ [E, f, d] -> [E, R, d]
// The biases are added per row: index_select([b; 0], kernels::row_groups(offsets)) gives one bias
// row per token row, the appended zero row for the rows in no group. Nothing is read back to the
// host. Every step is an autograd op, so gradients reach x_sorted, w_in, w_out (and the biases).
// forward_mixed(x, dispatch, combine) is Soft MoE's layer with the expert products in token order
// (nn/moe/soft_moe.h says when that is faster and why it is the same function): for B examples of
// m tokens, n = E experts of p slots,
//   u = x @ W_in, W_in[:, c*E + e] = w_in[e][:, c]                 [B*m, d] @ [d, F*E] -> [B, m, F, E]
//   h[b, :, e, j] = act(sum_i dispatch[b, i, e, j] u[b, i, :, e] (+ b_in[e]))  [B, F, E, p] -> [B, f, E, p]
//   z[b, i, :, e] = sum_j combine[b, i, e, j] h[b, :, e, j]                             [B, m, f, E]
//   y = z @ W_out, W_out[c*E + e, :] = w_out[e][c, :]           [B*m, f*E] @ [f*E, d] -> [B, m, d]
//       (+ sum_e (sum_j combine[b, i, e, j]) b_out[e])
// (the mixing: autograd/ops_slot_mix.h; features outside experts, as its kernels want; the mixing
// is linear, so mixing u and then activating is the slots' own up-projection and activation). W_in
// and W_out are permuted copies of the weights (d F E and f d E values); no [B, E*p, d] tensor is
// formed.
#pragma once

#include <cstdint>

#include "autograd/variable.h"
#include "core/random.h"
#include "nn/activation.h"
#include "nn/module.h"

namespace moelab {

class ExpertBank : public Module {
 public:
  ExpertBank(std::int64_t experts, std::int64_t d, std::int64_t ffn, Generator& gen, bool bias = false,
             DType dtype = DType::Float32, Activation activation = Activation::Relu);

  // x_sorted: [N, d] grouped by expert, offsets: int32 [E + 1] -> [N, d]
  Variable forward(const Variable& x_sorted, const Tensor& offsets) const;
  // Every expert on the same number R of rows: x: [E, R, d] -> [E, R, d], expert e on x[e]. Two
  // batched matmuls (no sorting, no offsets); Soft MoE uses it, where each expert gets B*p slots.
  Variable forward_each(const Variable& x) const;
  // Soft MoE in token order: x: [B, m, d], dispatch, combine: [B, m, E, p] -> [B, m, d] (above).
  Variable forward_mixed(const Variable& x, const Variable& dispatch, const Variable& combine) const;

  std::int64_t experts() const { return experts_; }
  std::int64_t d() const { return d_; }
  std::int64_t ffn() const { return ffn_; }  // f, the hidden width (after the activation)
  Activation activation() const { return activation_; }
  // Parameters of one expert: d F + f d (+ F + d with biases): 2 d f for relu and gelu, 3 d f for
  // swiglu.
  std::int64_t parameters_per_expert() const;

  const Variable& w_in() const { return w_in_; }
  const Variable& w_out() const { return w_out_; }
  const Variable& b_in() const { return b_in_; }    // undefined without biases
  const Variable& b_out() const { return b_out_; }  // undefined without biases

 private:
  std::int64_t experts_, d_, ffn_;
  Activation activation_;
  Variable w_in_, b_in_, w_out_, b_out_;
};

}  // namespace moelab
