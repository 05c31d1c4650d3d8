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

  // [B, T, d] -> [B, T, H, hd] (a view), RoPE when asked, then the one permute to [B, H, T, hd].
  auto split_heads = [&](const Variable& y, bool rotate) {
    Variable h = reshape(y, {B, T, H, hd});
    if (rotate) h = rope(h, position_offset, theta_);
    return permute(h, {0, 2, 1, 3});
  };
  Variable q = split_heads(q_->forward(x) * (1.0 / std::sqrt(static_cast<double>(hd))), true);
  Variable k = split_heads(k_->forward(x), true);
  Variable v = split_heads(v_->forward(x), false);
  if (cache) {
    if (cache->k.defined()) {  // [B, H, S0, hd] ++ [B, H, T, hd] -> [B, H, S0 + T, hd]
      k = concat({Variable(cache->k), k}, 2);
      v = concat({Variable(cache->v), v}, 2);
    }
    cache->k = k.data();
    cache->v = v.data();
  }
  const std::int64_t S = k.size(2);

  // softmax(causal_mask(q @ k^T)) @ v over the B*H (sequence, head) pairs, in one fused op that
  // skips the masked half: [B*H, T, hd], [B*H, S, hd] x 2 -> [B*H, T, hd]; query t sees keys
  // 0 .. S - T + t (with T == 1, every key).
  Variable y = causal_attention(reshape(q, {B * H, T, hd}), reshape(k, {B * H, S, hd}), reshape(v, {B * H, S, hd}));
  y = permute(reshape(y, {B, H, T, hd}), {0, 2, 1, 3});             // [B, T, H, hd]
  return o_->forward(reshape(y, {B, T, dim_}));
}

}  // namespace moelab
