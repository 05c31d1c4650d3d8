// nn/attention.h — multi-head causal self-attention with rotary position embeddings (RoPE).
//
//   x: [B, T, d] -> [B, T, d],  H heads of hd = d / H,  children q, k, v, o: Linear(d, d), no bias
//
//   q, k, v = x @ Wq^T, x @ Wk^T, x @ Wv^T                  [B, T, d] -> view [B, T, H, hd]
//   q, k    = rope(q), rope(k)                              token t at position offset + t: pair
//                                                           (2i, 2i+1) rotated by pos * theta^(-2i/hd)
//   (cache: k, v = cached [B, H, S0, hd] ++ new, S = S0 + T; otherwise S = T)
//   att     = softmax(causal_mask(q @ k^T / sqrt(hd)))      [B, H, T, S], query t sees keys <= S0 + t
//   y       = att @ v                                       [B, T, H, hd] -> [B, T, d]
//   out     = y @ Wo^T                                      [B, T, d]
// att and y are one fused op (autograd/ops_attention.h) that reads each head in place in the
// projections' [B, T, H, hd] layout, so the heads are never permuted out and back, and never
// computes the masked scores (core/cpu/attention.cpp). RoPE runs on that same layout
// (core/kernels.h rope). The score scale 1/sqrt(hd) is applied inside the op, to the scores.
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
