// nn/decoder_config.h — the hyperparameters of the decoder (nn/decoder.h) and how its FFNs are made.
//
// Every size the Mistral-style dense decoder needs, with the papers' defaults:
//   vocab V, width d, layers L, heads H (head_dim = d / H, even for RoPE), ffn f (0 means f = d,
//   as in the papers), rope_theta 10000, norm_eps 1e-5 (RMSNorm), max_seq (the longest position
//   count a forward or a KV cache accepts), dtype (float32; float64 for gradcheck).
// A FeedForwardFactory builds block i's FFN: the ReLU MLP by default (dense_feed_forward), or an
// MoE layer (moe_feed_forward, nn/moe/moe_decoder.h), without any change to the decoder.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/dtype.h"
#include "core/random.h"
#include "nn/activation.h"
#include "nn/feed_forward.h"

namespace moelab {

struct DecoderConfig {
  std::int64_t vocab = 0;
  std::int64_t d = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t ffn = 0;        // the FFN width f; 0 means f = d
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  std::int64_t max_seq = 2048;
  DType dtype = DType::Float32;
  // The dense FFN's hidden activation (dense_feed_forward): relu as the papers, gelu or swiglu
  // (LLaMA's; its up-projection is 2f wide, nn/activation.h). A MoE layer's experts have their own
  // (MoEConfig::expert_activation).
  Activation ffn_activation = Activation::Relu;

  std::int64_t ffn_width() const { return ffn > 0 ? ffn : d; }
  std::int64_t head_dim() const { return heads > 0 ? d / heads : 0; }
  // Throws moelab::Error ("DecoderConfig: ...") naming the first bad field.
  void validate() const;
};

// Makes block `layer`'s FFN, drawing its initial values from gen. It must map [..., d] to [..., d].
using FeedForwardFactory =
    std::function<std::shared_ptr<FeedForward>(const DecoderConfig& config, std::int64_t layer, Generator& gen)>;

// The default: MLP(d, ffn_width(), no bias, ffn_activation) (nn/mlp.h), children "up" and "down".
FeedForwardFactory dense_feed_forward();

}  // namespace moelab
