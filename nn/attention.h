// nn/attention.h — multi-head causal self-attention with rotary position embeddings (RoPE).
//
//   x: [B, T, d] -> [B, T, d],  H heads of hd = d / H,  children q, k, v, o: Linear(d, d), no bias
//
//   q, k, v = x @ Wq^T, x @ Wk^T, x @ Wv^T                  [B, T, d] -> view [B, T, H, hd]
//   q       = q / sqrt(hd)                                  the score scale, on q (no bigger than the scores)
//   q, k    = rope(q), rope(k)                              token t at position offset + t: pair
//                                                           (2i, 2i+1) rotated by pos * theta^(-2i/hd)
//   q, k, v -> permute once to [B, H, T, hd] -> view [B*H, T, hd]
//   (cache: k, v = cached [B, H, S0, hd] ++ new, S = S0 + T; otherwise S = T)
//   att     = softmax(causal_mask(q @ k^T))                 [B*H, T, S], query t sees keys <= S0 + t
//   y       = att @ v                                       [B*H, T, hd] -> [B, T, H, hd] -> [B, T, d]
//   out     = y @ Wo^T                                      [B, T, d]
// att and y are one fused op over the B*H (sequence, head) pairs (autograd/ops_attention.h), which
// never computes the masked scores (core/cpu/attention.cpp). RoPE runs on the
// projection's own layout [B, T, H, hd] (core/kernels.h rope), before the one permute per tensor.
// Because RoPE uses absolute positions, a key rotated once stays valid in a cache forever.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace moelab {

class Attention : public Module {
 public:
  // Registers children "q", "k", "v", "o" (in that order), each Linear(dim, dim) without bias.
  Attention(std::int64_t dim, std::int64_t heads, Generator& gen, double rope_theta = 10000.0,
            DType dtype = DType::Float32);

  // x: [B, T, d] -> [B, T, d]; query t sits at absolute position position_offset + t.
  // Without a cache the keys are x's own T positions. With one, cache holds the S0 earlier
  // positions' keys and values (S0 must equal position_offset); this call appends its T new ones
  // to it and attends over all S0 + T.
  Variable forward(const Variable& x, std::int64_t position_offset = 0, LayerKV* cache = nullptr) const;

  std::int64_t dim() const { return dim_; }
  std::int64_t heads() const { return heads_; }
  std::int64_t head_dim() const { return dim_ / heads_; }
  double rope_theta() const { return theta_; }

 private:
  std::int64_t dim_, heads_;
  double theta_;
  std::shared_ptr<Linear> q_, k_, v_, o_;
};

}  // namespace moelab
