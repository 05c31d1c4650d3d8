// nn/feed_forward.h — the interface of a transformer block's position-wise sublayer.
//
//   x: [..., d] -> [..., d]
// A DecoderBlock (nn/decoder_block.h) holds its FFN as std::shared_ptr<FeedForward>, registered as
// the child "ffn", so anything that maps token vectors to token vectors can take the dense MLP's
// place without touching the block or the decoder: the ReLU MLP (nn/mlp.h) by default, or a routed
// mixture-of-experts layer (nn/moe/moe_layer.h). The decoder builds one per layer through a
// FeedForwardFactory (nn/decoder.h). (Soft MoE, nn/moe/soft_moe.h, is a Module of its own.)
//
// Auxiliary losses are returned, not kept: a layer with a training objective of its own (a MoE
// layer's load-balancing and z losses) appends it to the AuxLosses its caller passes to
// forward_with_aux, and the training loop adds them to the task loss:
//
//   AuxLosses aux;
//   Variable logits = model.forward(ids, aux);           // Decoder: every layer's terms
//   Variable loss = aux.added_to(nn::cross_entropy(logits, targets));  // the task loss alone if none
//
// forward is not const: an implementation may record statistics of its last call (an MoE layer's
// router load and metrics) for logging.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace moelab {

// Named 0-d losses, already multiplied by their coefficients ("layers.3.load_balance", ...).
struct AuxLosses {
  std::vector<std::pair<std::string, Variable>> terms;

  void add(std::string name, Variable loss) { terms.emplace_back(std::move(name), std::move(loss)); }
  // The sum of every term (0-d), or an undefined Variable when there is none.
  Variable total() const;
  // task_loss + every term; task_loss itself when there is none (nothing to test at the call).
  Variable added_to(const Variable& task_loss) const;
};

class FeedForward : public Module {
 public:
  // x: [..., d] -> [..., d]
  virtual Variable forward(const Variable& x) = 0;
  // The same, appending this layer's auxiliary losses to `aux`; the default has none.
  virtual Variable forward_with_aux(const Variable& x, AuxLosses& aux) {
    (void)aux;
    return forward(x);
  }
  // The token ids of the positions the following forwards see (int32 [...], x's shape without
  // its last axis), for sublayers that route on them (a MoE layer passes them to its router); a
  // Decoder calls it before every forward. The default ignores them.
  virtual void set_token_ids(const Tensor& ids) { (void)ids; }
};

}  // namespace moelab
