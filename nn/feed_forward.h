// nn/feed_forward.h — the interface of a transformer block's position-wise sublayer.
//
//   x: [..., d] -> [..., d]
// A DecoderBlock (nn/decoder_block.h) holds its FFN as std::shared_ptr<FeedForward>, registered as
// the child "ffn", so anything that maps token vectors to token vectors can take the dense MLP's
// place without touching the block or the decoder: the ReLU MLP (nn/mlp.h) by default, a routed
// mixture-of-experts or a Soft MoE layer later (nn/moe/). The decoder builds one per layer through
// a FeedForwardFactory (nn/decoder.h).
//
// forward is not const: an implementation may record statistics of its last call (an MoE layer's
// router load, its auxiliary losses) for the training loop to read.
#pragma once

#include "nn/module.h"

namespace moelab {

class FeedForward : public Module {
 public:
  // x: [..., d] -> [..., d]
  virtual Variable forward(const Variable& x) = 0;
};

}  // namespace moelab
