// core/kernels/slot_mix.cpp — checks and dispatch for Soft MoE's mixing in token order.
//
// A Soft MoE layer (nn/moe/soft_moe.h) with B examples of m tokens and n experts of p slots each
// can run its experts in token order (nn/moe/expert_bank.h, forward_mixed): the first expert
// layer on every (token, expert) pair, u = X @ W_in (all experts side by side) viewed
// [B, m, f, n], then the dispatch weights D mix u into the slots' hidden values, and the combine
// weights C spread the slots' activations back over the tokens before the second expert layer.
// These three loops are that mixing:
//
//   w [B, m, n, p]  (D or C viewed per expert and slot)
//   u [B, m, f, n]  (per token: f features of each of the n experts)
//   v [B, f, n, p]  (per example: f features of each slot)
//   reduce  out[b, c, e, j] = sum_i w[b, i, e, j] u[b, i, c, e]      -> [B, f, n, p]
//   expand  out[b, i, c, e] = sum_j w[b, i, e, j] v[b, c, e, j]      -> [B, m, f, n]
//   dot     out[b, i, e, j] = sum_c u[b, i, c, e] v[b, c, e, j]      -> [B, m, n, p]
//
// They are each other's adjoints: reduce is linear in u with adjoint expand (du = expand(w, g)),
// and both are bilinear with the weight gradient dot (dw = dot(u, g) for reduce, dot(g, v) for
// expand); autograd/ops_slot_mix.cpp builds the two differentiable ops from them.
//
// Layout choice: the expert (and slot) axis is the innermost, features outside it. Token order
// pays where the experts are many and narrow (n large, f small: nn/moe/soft_moe.h), so the long
// contiguous runs the loops vectorise over are the n experts, and w[b, i] ([n, p]) lines up with
// them element for element when p = 1. The expert layers' weights are permuted to match (a few
// hundred KB, against the [B, m, f, n] activations).
//
// Slot order (the layer as written, ExpertOrder::Slots) has its own trio, with the slots
// expert-major so that the experts read their rows in place (no permute of [B, S, d]):
//   w [B, m, S], x [B, m, d] (tokens), y [S, B, d] (slot rows, slot s = e*p + j)
//   dispatch  out[s, b, :] = sum_i w[b, i, s] x[b, i, :]       -> [S, B, d]
//   combine   out[b, i, :] = sum_s w[b, i, s] y[s, b, :]       -> [B, m, d]
//   dot       out[b, i, s] = sum_c x[b, i, c] y[s, b, c]       -> [B, m, S]
// adjoint in the same way (dispatch's dx = combine(w, g), combine's dy = dispatch(w, g), both
// weight gradients a dot).
//
// Choices: float32 or float64; w, u, v rank 4 with matching B, m, n, p, f; one dtype and device.
// A sum over an empty axis (m, p or f = 0) gives zeros; an empty result gives an empty tensor.
#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"

namespace moelab::kernels {

namespace {

// Rank-4 float tensors of one dtype and device; throws with the op and the shapes.
void check_pair(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name, const char* op) {
  check_floating(a, op, a_name);
  check_floating(b, op, b_name);
  check_same_device(a, b, op);
  MOELAB_CHECK(a.dtype() == b.dtype(), op, a_name, " is ", a.dtype(), " but ", b_name, " is ", b.dtype());
  MOELAB_CHECK(a.rank() == 4 && b.rank() == 4, op, a_name, " and ", b_name, " must be rank 4, got ", a.shape(),
               " and ", b.shape());
}

// The output, zero-filled when the summed axis is empty (the backends never see that case).
Tensor output(const Shape& shape, const Tensor& like, bool empty_sum) {
  return empty_sum ? zeros(shape, like.dtype(), like.device()) : Tensor::empty(shape, like.dtype(), like.device());
}

}  // namespace

// w: [B, m, n, p], u: [B, m, f, n] -> [B, f, n, p]
Tensor slot_mix_reduce(const Tensor& w, const Tensor& u) {
  check_pair(w, "w", u, "u", "slot_mix_reduce");
  MOELAB_CHECK(u.size(0) == w.size(0) && u.size(1) == w.size(1) && u.size(3) == w.size(2), "slot_mix_reduce",
               "w must be [B, m, n, p] and u [B, m, f, n], got w ", w.shape(), " and u ", u.shape());
  const bool empty_sum = w.size(1) == 0;
  Tensor out = output({w.size(0), u.size(2), w.size(2), w.size(3)}, w, empty_sum);
  if (out.numel() > 0 && !empty_sum) backend(w.device()).slot_mix_reduce(w, u, out);
  return out;
}

// w: [B, m, n, p], v: [B, f, n, p] -> [B, m, f, n]
Tensor slot_mix_expand(const Tensor& w, const Tensor& v) {
  check_pair(w, "w", v, "v", "slot_mix_expand");
  MOELAB_CHECK(v.size(0) == w.size(0) && v.size(2) == w.size(2) && v.size(3) == w.size(3), "slot_mix_expand",
               "w must be [B, m, n, p] and v [B, f, n, p], got w ", w.shape(), " and v ", v.shape());
  const bool empty_sum = w.size(3) == 0;
  Tensor out = output({w.size(0), w.size(1), v.size(1), w.size(2)}, w, empty_sum);
  if (out.numel() > 0 && !empty_sum) backend(w.device()).slot_mix_expand(w, v, out);
  return out;
}

// u: [B, m, f, n], v: [B, f, n, p] -> [B, m, n, p]
Tensor slot_mix_dot(const Tensor& u, const Tensor& v) {
  check_pair(u, "u", v, "v", "slot_mix_dot");
  MOELAB_CHECK(v.size(0) == u.size(0) && v.size(1) == u.size(2) && v.size(2) == u.size(3), "slot_mix_dot",
               "u must be [B, m, f, n] and v [B, f, n, p], got u ", u.shape(), " and v ", v.shape());
  const bool empty_sum = u.size(2) == 0;
  Tensor out = output({u.size(0), u.size(1), u.size(3), v.size(3)}, u, empty_sum);
  if (out.numel() > 0 && !empty_sum) backend(u.device()).slot_mix_dot(u, v, out);
  return out;
}

// ---- slot order, expert-major slots: w [B, m, S], x [B, m, d], y [S, B, d]

namespace {

void check_same(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name, const char* op) {
  check_floating(a, op, a_name);
  check_floating(b, op, b_name);
  check_same_device(a, b, op);
  MOELAB_CHECK(a.dtype() == b.dtype(), op, a_name, " is ", a.dtype(), " but ", b_name, " is ", b.dtype());
  MOELAB_CHECK(a.rank() == 3 && b.rank() == 3, op, a_name, " and ", b_name, " must be rank 3, got ", a.shape(),
               " and ", b.shape());
}

}  // namespace

// w: [B, m, S], x: [B, m, d] -> [S, B, d]
Tensor slot_dispatch(const Tensor& w, const Tensor& x) {
  check_same(w, "w", x, "x", "slot_dispatch");
  MOELAB_CHECK(x.size(0) == w.size(0) && x.size(1) == w.size(1), "slot_dispatch",
               "w must be [B, m, S] and x [B, m, d], got w ", w.shape(), " and x ", x.shape());
  const bool empty_sum = w.size(1) == 0;
  Tensor out = output({w.size(2), w.size(0), x.size(2)}, w, empty_sum);
  if (out.numel() > 0 && !empty_sum) backend(w.device()).slot_dispatch(w, x, out);
  return out;
}

// w: [B, m, S], y: [S, B, d] -> [B, m, d]
Tensor slot_combine(const Tensor& w, const Tensor& y) {
  check_same(w, "w", y, "y", "slot_combine");
  MOELAB_CHECK(y.size(0) == w.size(2) && y.size(1) == w.size(0), "slot_combine",
               "w must be [B, m, S] and y [S, B, d], got w ", w.shape(), " and y ", y.shape());
  const bool empty_sum = w.size(2) == 0;
  Tensor out = output({w.size(0), w.size(1), y.size(2)}, w, empty_sum);
  if (out.numel() > 0 && !empty_sum) backend(w.device()).slot_combine(w, y, out);
  return out;
}

// x: [B, m, d], y: [S, B, d] -> [B, m, S]
Tensor slot_dot(const Tensor& x, const Tensor& y) {
  check_same(x, "x", y, "y", "slot_dot");
  MOELAB_CHECK(y.size(1) == x.size(0) && y.size(2) == x.size(2), "slot_dot",
               "x must be [B, m, d] and y [S, B, d], got x ", x.shape(), " and y ", y.shape());
  const bool empty_sum = x.size(2) == 0;
  Tensor out = output({x.size(0), x.size(1), y.size(0)}, x, empty_sum);
  if (out.numel() > 0 && !empty_sum) backend(x.device()).slot_dot(x, y, out);
  return out;
}

}  // namespace moelab::kernels
