// nn/decoder_block.cpp — x + attn(norm(x)), then x + ffn(norm(x)).
#include "nn/decoder_block.h"

#include <string>

#include "autograd/ops.h"

namespace moelab {

DecoderBlock::DecoderBlock(const DecoderConfig& c, std::int64_t layer, const FeedForwardFactory& make_ffn,
                           Generator& gen)
    : layer_(layer) {
  MOELAB_CHECK(make_ffn != nullptr, "DecoderBlock", "no FFN factory given");
  attn_norm_ = register_module("attn_norm", std::make_shared<RMSNorm>(c.d, c.norm_eps, c.dtype));
  attn_ = register_module("attn", std::make_shared<Attention>(c.d, c.heads, gen, c.rope_theta, c.dtype));
  ffn_norm_ = register_module("ffn_norm", std::make_shared<RMSNorm>(c.d, c.norm_eps, c.dtype));
  std::shared_ptr<FeedForward> ffn = make_ffn(c, layer, gen);
  MOELAB_CHECK(ffn != nullptr, "DecoderBlock", "the FFN factory returned null for layer ", layer);
  ffn_ = register_module("ffn", std::move(ffn));
}

// x: [B, T, d] -> [B, T, d]
Variable DecoderBlock::forward(const Variable& x, std::int64_t position_offset, LayerKV* cache, AuxLosses* aux) {
  Variable h = x + attn_->forward(attn_norm_->forward(x), position_offset, cache);
  Variable f;
  if (aux == nullptr) {
    f = ffn_->forward(ffn_norm_->forward(h));
  } else {
    AuxLosses mine;
    f = ffn_->forward_with_aux(ffn_norm_->forward(h), mine);
    for (auto& [name, loss] : mine.terms) aux->add("layers." + std::to_string(layer_) + "." + name, std::move(loss));
  }
  MOELAB_CHECK(f.shape() == h.shape(), "DecoderBlock", "the FFN returned ", f.shape(), " for input ", h.shape());
  return h + f;
}

}  // namespace moelab
