// core/kernels/attention.cpp — checks and dispatch for fused attention, causal or bidirectional.
//
//   attention(q, k, v, scale, causal)              q: [B, T, H, hd], k, v: [B, S, H, hd]
//                                                  -> y: [B, T, H, hd], p: [B, H, T, S]
//   attention_backward(q, k, v, scale, causal, p, dy) -> dq: [B, T, H, hd], dk, dv: [B, S, H, hd]
//   causal_attention(...), causal_attention_backward(...): the same with causal = true
// Causal: query t sees keys 0 .. t + S - T (core/kernels/mask.cpp's convention), so S >= T: every
// query sees at least one key and every softmax row is defined. Bidirectional: every key, S >= 1. T, H, hd >= 1; scale finite and > 0;
// float32 or float64, one dtype and one device for all; or bfloat16 q, k, v (and dy), the bf16
// policy's operands (autograd/ops_attention.cpp), with float32 y, p (and p given, dq, dk, dv). The
// maths is in core/cpu/attention.cpp.
#include <cmath>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// The dtype of y, p and the gradients: q's, float32 for bfloat16 q.
DType result_dtype(const Tensor& q) { return q.dtype() == DType::BFloat16 ? DType::Float32 : q.dtype(); }

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, const char* op) {
  check_defined(q, op, "q");
  check_defined(k, op, "k");
  check_defined(v, op, "v");
  if (q.dtype() != DType::BFloat16) {
    check_floating(q, op, "q");
    check_floating(k, op, "k");
    check_floating(v, op, "v");
  }
  check_same_device(q, k, op);
  check_same_device(q, v, op);
  MOELAB_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op, "q, k, v must share a dtype, got ", q.dtype(),
               ", ", k.dtype(), ", ", v.dtype());
  MOELAB_CHECK(q.rank() == 4 && k.rank() == 4 && k.shape() == v.shape() && k.size(0) == q.size(0) &&
                   k.size(2) == q.size(2) && k.size(3) == q.size(3),
               op, "needs q: [B, T, H, hd], k, v: [B, S, H, hd], got q ", q.shape(), ", k ", k.shape(), ", v ",
               v.shape());
  MOELAB_CHECK(q.size(1) >= 1 && q.size(2) >= 1 && q.size(3) >= 1 && k.size(1) >= (causal ? q.size(1) : 1), op,
               causal ? "needs T, H, hd >= 1 and S >= T (every query sees a key), got q "
                      : "needs T, H, hd, S >= 1, got q ",
               q.shape(), ", k ", k.shape());
  MOELAB_CHECK(std::isfinite(scale) && scale > 0.0, op, "scale must be finite and > 0, got ", scale);
}

Shape weights_shape(const Tensor& q, const Tensor& k) { return {q.size(0), q.size(2), q.size(1), k.size(1)}; }

}  // namespace

AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
  check_qkv(q, k, v, scale, causal, causal ? "causal_attention" : "attention");
  AttentionResult r{Tensor::empty(q.shape(), result_dtype(q), q.device()),
                    Tensor::empty(weights_shape(q, k), result_dtype(q), q.device())};
  if (q.size(0) > 0) backend(q.device()).attention(q, k, v, scale, causal, r.y, r.p);
  return r;
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                  const Tensor& p, const Tensor& dy) {
  const char* op = causal ? "causal_attention_backward" : "attention_backward";
  check_qkv(q, k, v, scale, causal, op);
  check_floating(p, op, "p");
  check_defined(dy, op, "dy");
  check_same_device(q, p, op);
  check_same_device(q, dy, op);
  MOELAB_CHECK(p.dtype() == result_dtype(q) && dy.dtype() == q.dtype(), op, "p and dy must be ", result_dtype(q),
               " and ", q.dtype(), ", got ", p.dtype(), " and ", dy.dtype());
  MOELAB_CHECK(p.shape() == weights_shape(q, k) && dy.shape() == q.shape(), op,
               "needs p: [B, H, T, S] and dy: [B, T, H, hd] for q ", q.shape(), ", k ", k.shape(), ", got p ",
               p.shape(), ", dy ", dy.shape());
  AttentionGrads g{Tensor::empty(q.shape(), result_dtype(q), q.device()),
                   Tensor::empty(k.shape(), result_dtype(q), k.device()),
                   Tensor::empty(v.shape(), result_dtype(q), v.device())};
  if (q.size(0) > 0) backend(q.device()).attention_backward(q, k, v, scale, causal, p, dy, g.dq, g.dk, g.dv);
  return g;
}

AttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  return attention(q, k, v, scale, /*causal=*/true);
}

AttentionGrads causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                         const Tensor& p, const Tensor& dy) {
  return attention_backward(q, k, v, scale, /*causal=*/true, p, dy);
}

}  // namespace moelab::kernels
