// core/kernels/attention.cpp — checks and dispatch for fused causal attention.
//
//   causal_attention(q, k, v)                       q: [N, T, hd], k, v: [N, S, hd] -> y: [N, T, hd], p: [N, T, S]
//   causal_attention_backward(q, k, v, p, dy)       -> dq: [N, T, hd], dk, dv: [N, S, hd]
// Query t sees keys 0 .. t + S - T (core/kernels/mask.cpp's convention), so S >= T: every query
// sees at least one key and every softmax row is defined. hd >= 1, T >= 1; float32 or float64,
// one dtype and one device for all. The maths is in core/cpu/attention.cpp.
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  check_floating(q, op, "q");
  check_floating(k, op, "k");
  check_floating(v, op, "v");
  check_same_device(q, k, op);
  check_same_device(q, v, op);
  MOELAB_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op, "q, k, v must share a dtype, got ", q.dtype(),
               ", ", k.dtype(), ", ", v.dtype());
  MOELAB_CHECK(q.rank() == 3 && k.rank() == 3 && k.shape() == v.shape() && k.size(0) == q.size(0) &&
                   k.size(2) == q.size(2),
               op, "needs q: [N, T, hd], k, v: [N, S, hd], got q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  MOELAB_CHECK(q.size(1) >= 1 && q.size(2) >= 1 && k.size(1) >= q.size(1), op,
               "needs T >= 1, hd >= 1 and S >= T (every query sees a key), got q ", q.shape(), ", k ", k.shape());
}

}  // namespace

AttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_qkv(q, k, v, "causal_attention");
  AttentionResult r{Tensor::empty(q.shape(), q.dtype(), q.device()),
                    Tensor::empty({q.size(0), q.size(1), k.size(1)}, q.dtype(), q.device())};
  if (q.size(0) > 0) backend(q.device()).causal_attention(q, k, v, r.y, r.p);
  return r;
}

AttentionGrads causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& p,
                                         const Tensor& dy) {
  const char* op = "causal_attention_backward";
  check_qkv(q, k, v, op);
  check_floating(p, op, "p");
  check_floating(dy, op, "dy");
  check_same_device(q, p, op);
  check_same_device(q, dy, op);
  MOELAB_CHECK(p.dtype() == q.dtype() && dy.dtype() == q.dtype(), op, "p and dy must be ", q.dtype(), ", got ",
               p.dtype(), " and ", dy.dtype());
  MOELAB_CHECK(p.shape() == Shape({q.size(0), q.size(1), k.size(1)}) && dy.shape() == q.shape(), op,
               "needs p: [N, T, S] and dy: [N, T, hd] for q ", q.shape(), ", k ", k.shape(), ", got p ", p.shape(),
               ", dy ", dy.shape());
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()), Tensor::empty(k.shape(), k.dtype(), k.device()),
                   Tensor::empty(v.shape(), v.dtype(), v.device())};
  if (q.size(0) > 0) backend(q.device()).causal_attention_backward(q, k, v, p, dy, g.dq, g.dk, g.dv);
  return g;
}

}  // namespace moelab::kernels
