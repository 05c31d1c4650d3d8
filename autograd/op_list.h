// autograd/op_list.h — the registry of differentiable ops: one line per op, in one place.
//
// MOELAB_DIFFERENTIABLE_OPS is an X-macro: X(name) for every differentiable op, where `name` is
// both the public function's name (moelab::name) and the name its graph Nodes carry. Two things
// read it:
//   - record() (autograd/record.cpp) refuses to create a Node whose op is not listed, so a new op
//     cannot join the graph without being listed here;
//   - tests/test_gradcheck.cpp walks differentiable_ops() and fails for any listed op that has no
//     gradcheck case, so a listed op cannot go unchecked.
// Ops composed from other differentiable ops (mse_loss, max over all elements) create no Node of
// their own but are listed too, so they are gradchecked like the rest.
//
// The elementwise unary ops are not repeated here: every op of MOELAB_UNARY_OPS (core/kernels/
// elementwise_ops.h) is a differentiable op of the same name (moelab::exp, moelab::sigmoid, ...),
// registered by differentiable_ops() and gradchecked on its domain by tests/test_gradcheck.cpp.
//
// Adding an op: write it in the autograd/ops_*.cpp of its concept, add X(name) below, add a case
// to the table in tests/test_gradcheck.cpp (a unary elementwise op: see elementwise_ops.h instead).
#pragma once

#include <string>
#include <vector>

// clang-format off
#define MOELAB_DIFFERENTIABLE_OPS(X)                                                              \
  /* elementwise binary (ops_elementwise); the unary ones: see above */                          \
  X(add) X(sub) X(mul) X(div) X(maximum) X(minimum) X(pow)                                        \
  /* matrix products (ops_matmul) */                                                              \
  X(matmul)                                                                                       \
  /* grouped matrix products, MoE experts (ops_grouped_matmul) */                                 \
  X(grouped_matmul)                                                                               \
  /* reductions (ops_reduce) */                                                                   \
  X(sum) X(mean) X(max)                                                                           \
  /* softmax (ops_softmax) */                                                                     \
  X(softmax) X(log_softmax)                                                                       \
  /* losses (ops_loss) */                                                                         \
  X(cross_entropy) X(mse_loss)                                                                    \
  /* gathering, scattering, selection (ops_index) */                                              \
  X(index_select) X(scatter_add_rows) X(scatter_add_rows_scaled) X(gather_last) X(scatter_add_last)  \
  X(embedding) X(topk)                                                                            \
  /* shapes (ops_shape) and masking (ops_mask) */                                                 \
  X(concat) X(split) X(narrow) X(reshape) X(transpose) X(permute)                                 \
  X(causal_mask)                                                                                  \
  /* fused attention (ops_attention) */                                                           \
  X(causal_attention) X(bidirectional_attention)                                                  \
  /* normalisation (ops_norm) */                                                                  \
  X(rmsnorm) X(layernorm)                                                                         \
  /* rotary position embedding (ops_rope) */                                                      \
  X(rope)                                                                                         \
  /* Soft MoE token-order mixing (ops_slot_mix) */                                                \
  X(slot_mix_reduce) X(slot_mix_expand) X(slot_dispatch) X(slot_combine)
// clang-format on

namespace moelab {

// Every name in MOELAB_DIFFERENTIABLE_OPS, in the order listed, then every unary elementwise op.
const std::vector<std::string>& differentiable_ops();
// Whether `name` is listed.
bool is_differentiable_op(const std::string& name);

}  // namespace moelab
