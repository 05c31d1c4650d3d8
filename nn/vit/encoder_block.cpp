// nn/vit/encoder_block.cpp — a pre-norm encoder block; see the header.
#include "nn/vit/encoder_block.h"

#include "autograd/ops.h"

namespace moelab {

void EncoderBlock::build_attention(std::int64_t dim, std::int64_t heads, double norm_eps, Generator& gen,
                                   DType dtype) {
  attn_norm_ = register_module("attn_norm", std::make_shared<LayerNorm>(dim, norm_eps, dtype));
  attn_ = register_module("attn", std::make_shared<EncoderAttention>(dim, heads, gen, dtype));
  ffn_norm_ = register_module("ffn_norm", std::make_shared<LayerNorm>(dim, norm_eps, dtype));
}

EncoderBlock::EncoderBlock(std::int64_t dim, std::int64_t heads, std::int64_t hidden, double norm_eps,
                           Generator& gen, DType dtype, Activation activation) {
  MOELAB_CHECK(hidden >= 1, "EncoderBlock", "the MLP's hidden width must be >= 1, got ", hidden);
  build_attention(dim, heads, norm_eps, gen, dtype);
  mlp_ = register_module("mlp", std::make_shared<MLP>(dim, hidden, gen, /*bias=*/true, dtype, activation));
}

EncoderBlock::EncoderBlock(std::int64_t dim, std::int64_t heads, const SoftMoEConfig& moe, double norm_eps,
                           Generator& gen, bool moe_residual)
    : moe_residual_(moe_residual) {
  MOELAB_CHECK(moe.d == dim, "EncoderBlock", "the Soft MoE layer's width ", moe.d, " is not the block's ", dim);
  build_attention(dim, heads, norm_eps, gen, moe.dtype);
  moe_ = register_module("moe", std::make_shared<SoftMoE>(moe, gen));
}

SoftMoE& EncoderBlock::moe() const {
  MOELAB_CHECK(moe_ != nullptr, "EncoderBlock", "this block is dense: it has no Soft MoE layer");
  return *moe_;
}

// x: [B, T, d] -> [B, T, d]
Variable EncoderBlock::forward(const Variable& x, const ExpertSubset* subset) {
  Variable h = x + attn_->forward(attn_norm_->forward(x));
  Variable normed = ffn_norm_->forward(h);
  if (mlp_) return h + mlp_->forward(normed);
  Variable y = subset ? moe_->forward(normed, *subset) : moe_->forward(normed);
  return moe_residual_ ? h + y : y;
}

}  // namespace moelab
