// nn/moe/moe_decoder.h — the MoE decoder: the dense decoder (nn/decoder.h) with MoELayer FFNs.
//
//   Decoder model(config, gen, moe_feed_forward(MoEConfig{.experts = 8, .k = 2}));
// Every block's "ffn" is a MoELayer, so its parameters are named
//   layers.{i}.ffn.router.weight [E, d] (+ .bias [E]),
//   layers.{i}.ffn.experts.w_in [E, d, f], layers.{i}.ffn.experts.w_out [E, f, d] (+ b_in, b_out).
// The factory takes d and dtype from the DecoderConfig (the MoEConfig's are ignored) and
// f = moe.ffn, or the decoder's ffn_width() when moe.ffn is 0.
//
// Parameter counts as the Mixture of Parrots paper counts them (embed.weight and head.weight left out):
//   non_embedding  = L (4 d^2 + 2 d + d E + E 2 d f) + d          (no biases, topk router)
//   active         = non_embedding - L (E - k) 2 d f               (attention + norms + router + k experts)
// (3 d f in place of 2 d f with expert_activation = swiglu).
// moe_parameter_counts walks the layers, so it also holds for expert biases or a router bias.
//
// The routers' aux losses come back from the forward itself: model.forward(ids, aux) appends
// every layer's as "layers.{i}.<name>" (nn/feed_forward.h, AuxLosses); add aux.total() to the task
// loss. After a forward, moe_metrics(model) computes each layer's router metrics as
// "layers.{i}.<name>" (this reads the device: call it when logging, not every step).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nn/decoder.h"
#include "nn/moe/moe_layer.h"

namespace moelab {

// A FeedForwardFactory making a MoELayer per block (d, dtype from the DecoderConfig).
FeedForwardFactory moe_feed_forward(const MoEConfig& moe);

struct MoECounts {
  std::int64_t total = 0;          // every parameter
  std::int64_t non_embedding = 0;  // total - embed.weight - head.weight
  std::int64_t active = 0;         // non_embedding with only k of the E experts per MoE layer
};

// Counts for a decoder; FFNs that are not MoELayers count fully as active.
MoECounts moe_parameter_counts(const Decoder& model);

// Every MoE layer's last metrics, keyed "layers.{i}.<metric>".
std::map<std::string, double> moe_metrics(const Decoder& model);

}  // namespace moelab
