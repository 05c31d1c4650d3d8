// nn/kv_cache.h — the keys and values a decoder has already computed, for incremental decoding.
//
// Autoregressive generation feeds one new token per step. Self-attention at step s needs the keys
// and values of every earlier position, and those never change (causal attention: position p
// only sees positions <= p, and RoPE rotates by the absolute position), so each layer keeps them:
//   k, v: [B, H, S, hd]   S positions cached so far, heads split, keys already rotated by RoPE
// and a step computes only the new position's q, k, v, appends k and v along S and attends over
// all S + 1. Each step then costs one position's forward instead of the whole prefix's.
//
// Appending copies the cache once per step (a concat along S), the same order of work as the
// attention over it. max_seq bounds the positions a cache accepts (the decoder checks it).
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace moelab {

// One attention layer's cache.
struct LayerKV {
  Tensor k, v;  // [B, H, S, hd]; undefined while empty
  std::int64_t length() const { return k.defined() ? k.size(2) : 0; }
};

class KVCache {
 public:
  KVCache(std::int64_t num_layers, std::int64_t max_seq) : layers_(static_cast<std::size_t>(num_layers)), max_seq_(max_seq) {
    MOELAB_CHECK(num_layers >= 1 && max_seq >= 1, "KVCache", "needs num_layers >= 1 and max_seq >= 1, got ",
                 num_layers, " and ", max_seq);
  }

  LayerKV& layer(std::int64_t i) {
    MOELAB_CHECK(i >= 0 && i < num_layers(), "KVCache", "layer ", i, " out of range [0, ", num_layers(), ")");
    return layers_[static_cast<std::size_t>(i)];
  }
  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers_.size()); }
  // Positions cached (every layer holds the same number between decoder calls).
  std::int64_t length() const { return layers_.front().length(); }
  std::int64_t max_seq() const { return max_seq_; }
  void clear() {
    for (LayerKV& l : layers_) l = LayerKV{};
  }

 private:
  std::vector<LayerKV> layers_;
  std::int64_t max_seq_;
};

}  // namespace moelab
