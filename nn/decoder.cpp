// nn/decoder.cpp — embedding, L pre-norm blocks, final RMSNorm, LM head (shapes in nn/decoder.h).
#include "nn/decoder.h"

#include "autograd/ops.h"

namespace moelab {

Decoder::Decoder(const DecoderConfig& config, Generator& gen, const FeedForwardFactory& make_ffn) : config_(config) {
  config_.validate();
  const DecoderConfig& c = config_;
  embed_ = register_module("embed", std::make_shared<Embedding>(c.vocab, c.d, gen, c.dtype));
  layers_ = register_module("layers", std::make_shared<ModuleList<DecoderBlock>>());
  for (std::int64_t i = 0; i < c.layers; ++i) layers_->push_back(std::make_shared<DecoderBlock>(c, i, make_ffn, gen));
  norm_ = register_module("norm", std::make_shared<RMSNorm>(c.d, c.norm_eps, c.dtype));
  head_ = register_module("head", std::make_shared<Linear>(c.d, c.vocab, gen, /*bias=*/false, c.dtype));
}

// ids: [B, T] -> [B, T, d]
Variable Decoder::hidden(const Tensor& ids, KVCache* cache, AuxLosses* aux) {
  check_dtype(ids, DType::Int32, "Decoder", "ids");
  MOELAB_CHECK(ids.rank() == 2 && ids.size(0) >= 1 && ids.size(1) >= 1, "Decoder",
               "ids must be [B, T] with B, T >= 1, got ", ids.shape());
  const std::int64_t offset = cache ? cache->length() : 0, T = ids.size(1);
  if (cache) {
    MOELAB_CHECK(cache->num_layers() == config_.layers, "Decoder", "the cache has ", cache->num_layers(),
                 " layers but the model has ", config_.layers);
    MOELAB_CHECK(offset + T <= cache->max_seq(), "Decoder", "the cache holds ", offset, " positions; ", T,
                 " more exceed its max_seq ", cache->max_seq());
  }
  MOELAB_CHECK(offset + T <= config_.max_seq, "Decoder", "positions up to ", offset + T, " exceed max_seq ",
               config_.max_seq);
  Variable x = embed_->forward(ids);  // [B, T, d]
  for (std::int64_t i = 0; i < config_.layers; ++i) {
    (*layers_)[i].ffn().set_token_ids(ids);  // for FFNs that route on the token ids (token-hash)
    x = (*layers_)[i].forward(x, offset, cache ? &cache->layer(i) : nullptr, aux);
  }
  return norm_->forward(x);
}

// hidden: [..., d] -> [..., V]
Variable Decoder::logits(const Variable& hidden) const { return head_->forward(hidden); }

// ids: [B, T] -> [B, T, V]
Variable Decoder::forward(const Tensor& ids, KVCache* cache) { return logits(hidden(ids, cache)); }
Variable Decoder::forward(const Tensor& ids, AuxLosses& aux) { return logits(hidden(ids, nullptr, &aux)); }

std::int64_t Decoder::num_non_embedding_parameters() const {
  return num_parameters() - embed_->weight().numel() - head_->weight().numel();
}

}  // namespace moelab
