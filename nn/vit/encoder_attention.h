// nn/vit/encoder_attention.h — multi-head self-attention without a mask, as in BERT and the ViT.
//
//   x: [B, T, d] -> [B, T, d],  H heads of hd = d / H,  children q, k, v, o: Linear(d, d) with bias
//   q, k, v = x @ Wq^T + bq, ...                [B, T, d] -> view [B, T, H, hd]
//   y       = softmax(q @ k^T / sqrt(hd)) @ v   per head, every token sees every token
//   out     = y @ Wo^T + bo                     [B, T, d]
// The decoder's attention (nn/attention.h) differs in three ways: a causal mask, rotary positions
// (an encoder adds learned positions to its tokens once instead) and no biases (the ViT has them,
// like PyTorch's nn.MultiheadAttention). The attention itself is the same fused kernel with
// causal = false (autograd/ops_attention.h bidirectional_attention): the heads are read in place
// in the [B, T, H, hd] layout, never permuted out. PyTorch's nn.MultiheadAttention packs q, k and v
// into one in_proj of [3d, d]; ours are three Linears whose weights are its three row blocks.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace moelab {

class EncoderAttention : public Module {
 public:
  // Registers "q", "k", "v", "o" (in that order), each Linear(dim, dim) with a bias.
  EncoderAttention(std::int64_t dim, std::int64_t heads, Generator& gen, DType dtype = DType::Float32);

  // x: [B, T, d] -> [B, T, d]
  Variable forward(const Variable& x) const;

  std::int64_t dim() const { return dim_; }
  std::int64_t heads() const { return heads_; }

 private:
  std::int64_t dim_, heads_;
  std::shared_ptr<Linear> q_, k_, v_, o_;
};

}  // namespace moelab
