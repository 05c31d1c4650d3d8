// nn/vit/encoder_block.h — one pre-norm block of a vision transformer, with a dense MLP or a
// Soft MoE layer as its feed-forward sublayer.
//
//   x: [B, T, d] -> [B, T, d]
//   x = x + attn(attn_norm(x))     unmasked multi-head self-attention (nn/vit/encoder_attention.h)
//   x = x + ffn(ffn_norm(x))       an MLP d -> f -> d with biases, ReLU or GELU (nn/mlp.h), or a Soft MoE
//                                  layer over the block's T tokens (nn/moe/soft_moe.h)
//   x = moe(ffn_norm(x))           a Soft MoE block built with moe_residual = false: no residual
//                                  around the Soft MoE layer. The implicit-bias paper's Astroformer
//                                  (its Appendix E.2) drops that residual because with it the
//                                  network learned to ignore the experts' outputs, and then
//                                  keeping k of n experts tells nothing; the ViT keeps it.
// Both norms are LayerNorms (the ViT's; the decoder uses RMSNorm). The Soft MoE layer mixes the
// T tokens of one image into its slots, so every token, the class token included, is a token it
// dispatches; a subset of its experts (ExpertSubset: Algorithm 1, random, a mask) can be kept for
// one forward, as the implicit-bias paper evaluates its ViT.
// Children, in registration (and initialisation) order: attn_norm, attn, ffn_norm, then "mlp" or
// "moe", whichever the block has.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/layernorm.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/moe/soft_moe.h"
#include "nn/vit/encoder_attention.h"

namespace moelab {

class EncoderBlock : public Module {
 public:
  // A dense block: MLP(dim, hidden) with biases and the given activation.
  EncoderBlock(std::int64_t dim, std::int64_t heads, std::int64_t hidden, double norm_eps, Generator& gen,
               DType dtype = DType::Float32, Activation activation = Activation::Relu);
  // A Soft MoE block: moe.d must equal dim; moe_residual as above.
  EncoderBlock(std::int64_t dim, std::int64_t heads, const SoftMoEConfig& moe, double norm_eps, Generator& gen,
               bool moe_residual = true);

  // x: [B, T, d] -> [B, T, d]; a Soft MoE block keeps `subset`'s experts (nullptr: all of them; a
  // dense block ignores it).
  Variable forward(const Variable& x, const ExpertSubset* subset = nullptr);

  bool is_moe() const { return moe_ != nullptr; }
  SoftMoE& moe() const;  // a Soft MoE block's layer (moelab::Error on a dense block)
  const EncoderAttention& attn() const { return *attn_; }

 private:
  void build_attention(std::int64_t dim, std::int64_t heads, double norm_eps, Generator& gen, DType dtype);
  std::shared_ptr<LayerNorm> attn_norm_, ffn_norm_;
  std::shared_ptr<EncoderAttention> attn_;
  std::shared_ptr<MLP> mlp_;
  std::shared_ptr<SoftMoE> moe_;
  bool moe_residual_ = true;
};

}  // namespace moelab
