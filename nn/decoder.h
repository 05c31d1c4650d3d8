// nn/decoder.h — the Mistral-style dense decoder-only language model of the papers.
//
//   ids: [B, T] int32 in [0, V)
//   x = embed(ids)                                   [B, T, d]   embed.weight: [V, d]
//   for i in 0 .. L-1: x = layers.i(x)               [B, T, d]   pre-norm blocks (nn/decoder_block.h)
//   h = norm(x)                                      [B, T, d]   final RMSNorm
//   logits = h @ head.weight^T                       [B, T, V]   untied LM head, head.weight: [V, d]
// No biases anywhere. Parameter names, in this order (fixed; checkpoints and the PyTorch reference
// fixtures rely on them):
//   embed.weight,
//   layers.{i}.attn_norm.weight, layers.{i}.attn.{q,k,v,o}.weight,
//   layers.{i}.ffn_norm.weight,  layers.{i}.ffn.{up,down}.weight      (for the default MLP FFN)
//   norm.weight, head.weight
// Counting: total = 2 V d + L (4 d^2 + 2 d f + 2 d) + d; the non-embedding count the papers use
// leaves out embed.weight and head.weight: L (4 d^2 + 2 d f + 2 d) + d (3 d f in place of 2 d f
// with ffn_activation = swiglu).
//
// With a KVCache (nn/kv_cache.h, made by make_cache()) forward continues a sequence: ids are the
// next T tokens at positions cache.length() .. cache.length() + T - 1, and their keys and values are
// appended to the cache (nn/generate.h uses this for greedy decoding).
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/decoder_block.h"
#include "nn/decoder_config.h"
#include "nn/embedding.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/module_list.h"
#include "nn/rmsnorm.h"

namespace moelab {

class Decoder : public Module {
 public:
  // Validates config; initialises embed, then each block in order, then head, from gen.
  Decoder(const DecoderConfig& config, Generator& gen, const FeedForwardFactory& make_ffn = dense_feed_forward());

  // ids: [B, T] int32 -> logits [B, T, V]
  Variable forward(const Tensor& ids, KVCache* cache = nullptr);
  // The same for training: every layer's auxiliary losses (a MoE router's load balancing, named
  // "layers.{i}.<name>") are appended to aux; add aux.total() to the task loss.
  Variable forward(const Tensor& ids, AuxLosses& aux);
  // The two halves of forward: ids -> final-normed hidden states [B, T, d], and those -> logits
  // [..., V] (generation applies the head to the last position only).
  Variable hidden(const Tensor& ids, KVCache* cache = nullptr, AuxLosses* aux = nullptr);
  Variable logits(const Variable& hidden) const;

  // An empty cache for this model (config.layers layers, config.max_seq positions).
  KVCache make_cache() const { return KVCache(config_.layers, config_.max_seq); }

  const DecoderConfig& config() const { return config_; }
  DecoderBlock& layer(std::int64_t i) const { return (*layers_)[i]; }
  // Every parameter except embed.weight and head.weight (Module::num_parameters() counts all).
  std::int64_t num_non_embedding_parameters() const;

 private:
  DecoderConfig config_;
  std::shared_ptr<Embedding> embed_;
  std::shared_ptr<ModuleList<DecoderBlock>> layers_;
  std::shared_ptr<RMSNorm> norm_;
  std::shared_ptr<Linear> head_;
};

}  // namespace moelab
