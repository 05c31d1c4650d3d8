// nn/decoder_block.h — one pre-norm transformer block of the decoder.
//
//   x: [B, T, d] -> [B, T, d]
//   x = x + attn(attn_norm(x))      causal self-attention with RoPE (nn/attention.h)
//   x = x + ffn(ffn_norm(x))        the FFN: a ReLU MLP, or any FeedForward (an MoE layer)
// Children, in registration (and initialisation) order: attn_norm (RMSNorm), attn (Attention),
// ffn_norm (RMSNorm), ffn (FeedForward, built by the factory). Pre-norm keeps the residual stream
// x itself unnormalised, so gradients reach early layers through the additions unchanged.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/attention.h"
#include "nn/decoder_config.h"
#include "nn/feed_forward.h"
#include "nn/kv_cache.h"
#include "nn/module.h"
#include "nn/rmsnorm.h"

namespace moelab {

class DecoderBlock : public Module {
 public:
  // Block number `layer` of a decoder with this (validated) config; make_ffn builds its FFN.
  DecoderBlock(const DecoderConfig& config, std::int64_t layer, const FeedForwardFactory& make_ffn, Generator& gen);

  // x: [B, T, d] -> [B, T, d]; position_offset and cache as in Attention::forward. With aux, the
  // FFN's auxiliary losses are appended to it as "layers.{layer}.<name>".
  Variable forward(const Variable& x, std::int64_t position_offset = 0, LayerKV* cache = nullptr,
                   AuxLosses* aux = nullptr);

  const RMSNorm& attn_norm() const { return *attn_norm_; }
  const Attention& attn() const { return *attn_; }
  const RMSNorm& ffn_norm() const { return *ffn_norm_; }
  FeedForward& ffn() const { return *ffn_; }

 private:
  std::shared_ptr<RMSNorm> attn_norm_, ffn_norm_;
  std::shared_ptr<Attention> attn_;
  std::shared_ptr<FeedForward> ffn_;
  std::int64_t layer_;
};

}  // namespace moelab
