// nn/attention.cpp — causal multi-head self-attention with RoPE and an optional KV cache.
// The shapes and the math are in nn/attention.h.
#include "nn/attention.h"

#include <cmath>

#include "autograd/ops.h"

namespace moelab {

Attention::Attention(std::int64_t dim, std::int64_t heads, Generator& gen, double rope_theta, DType dtype)
    : dim_(dim), heads_(heads), theta_(rope_theta) {
  MOELAB_CHECK(dim >= 1 && heads >= 1 && dim % heads == 0, "Attention", "d must be a positive multiple of heads, got d ",
               dim, ", heads ", heads);
  MOELAB_CHECK((dim / heads) % 2 == 0, "Attention", "head_dim = d / heads must be even for RoPE, got ", dim / heads);
  MOELAB_CHECK(std::isfinite(rope_theta) && rope_theta > 0.0, "Attention", "rope_theta must be finite and > 0, got ",
               rope_theta);
  q_ = register_module("q", std::make_shared<Linear>(dim, dim, gen, false, dtype));
  k_ = register_module("k", std::make_shared<Linear>(dim, dim, gen, false, dtype));
  v_ = register_module("v", std::make_shared<Linear>(dim, dim, gen, false, dtype));
  o_ = register_module("o", std::make_shared<Linear>(dim, dim, gen, false, dtype));
}

// x: [B, T, d] -> [B, T, d]
Variable Attention::forward(const Variable& x, std::int64_t position_offset, LayerKV* cache) const {
  check_defined(x.data(), "Attention", "x");
  MOELAB_CHECK(x.rank() == 3 && x.size(2) == dim_ && x.size(0) >= 1 && x.size(1) >= 1, "Attention",
               "x must be [B, T, ", dim_, "] with B, T >= 1, got ", x.shape());
  MOELAB_CHECK(position_offset >= 0, "Attention", "position_offset must be >= 0, got ", position_offset);
  const std::int64_t B = x.size(0), T = x.size(1), H = heads_, hd = dim_ / heads_;
  if (cache) {
    MOELAB_CHECK(cache->length() == position_offset, "Attention", "the cache holds ", cache->length(),
                 " positions but position_offset is ", position_offset);
    MOELAB_CHECK(!cache->k.defined() || (cache->k.size(0) == B && cache->k.size(1) == H && cache->k.size(3) == hd &&
                                         cache->k.dtype() == x.dtype()),
                 "Attention", "the cache holds keys ", cache->k.str(), " which do not fit x ", x.data().str(), " with ",
                 H, " heads");
  }

  // [B, T, d] -> [B, T, H, hd] (a view), then RoPE on q and k. The heads stay in this layout: the
  // attention kernel reads each one in place (core/cpu/attention.cpp).
  Variable q = rope(reshape(q_->forward(x), {B, T, H, hd}), position_offset, theta_);
  Variable k = rope(reshape(k_->forward(x), {B, T, H, hd}), position_offset, theta_);
  Variable v = reshape(v_->forward(x), {B, T, H, hd});
  if (cache) {  // the cache keeps [B, H, S, hd] (nn/kv_cache.h): append there, attend in [B, S, H, hd]
    Variable kh = permute(k, {0, 2, 1, 3}), vh = permute(v, {0, 2, 1, 3});
    if (cache->k.defined()) {  // [B, H, S0, hd] ++ [B, H, T, hd] -> [B, H, S0 + T, hd]
      kh = concat({Variable(cache->k), kh}, 2);
      vh = concat({Variable(cache->v), vh}, 2);
    }
    cache->k = kh.data();
    cache->v = vh.data();
    k = permute(kh, {0, 2, 1, 3});
    v = permute(vh, {0, 2, 1, 3});
  }

  // Per head: softmax(causal_mask(q k^T / sqrt(hd))) v, query t seeing keys 0 .. S - T + t (with
  // T == 1, every key), in one fused op that skips the masked half: -> [B, T, H, hd] -> [B, T, d].
  Variable y = causal_attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(hd)));
  return o_->forward(reshape(y, {B, T, dim_}));
}

}  // namespace moelab
