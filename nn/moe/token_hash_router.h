// nn/moe/token_hash_router.h — Hash Layers: every token goes to experts fixed by its token id, not
// by its representation.
//
// Roller, S., Sukhbaatar, S., Szlam, A., Weston, J. "Hash Layers For Large Sparse Models",
// NeurIPS 2021, arXiv 2106.04426. Their "random hash" assigns each vocabulary id to an expert at
// random, once, before training; nothing about the routing is learnt, and no load-balancing
// loss is needed (a token's frequency decides its expert's load).
//
//   table: int32 [buckets, k], drawn at construction from the layer's generator: row v holds k
//          distinct experts, uniformly at random (a random permutation's first k entries)
//   ids:   int32 [T], the token ids of x's rows (MoELayer::set_token_ids; a Decoder passes its
//          input ids to every layer's FFN before each forward)
//   chosen[t] = table[ids[t]]   (an index_select on x's device: no host read)
//   gates g_tj = 1 / k          (constant: k = 1 gives the paper's layer, gate 1; k > 1, the mean
//                                of k experts, is this engine's choice: the paper's MultiHash
//                                combines several hashes in its own way, not reproduced here)
// The router has no parameters (it declares it does not learn) and its gates sum to 1.
//
// Needs the ids: routing with none set, or with another count than x's rows, is an error that
// says how to give them. An id outside [0, buckets) is an index error (on a GPU, reported at the
// next synchronisation). The representation-hash variant (locality-sensitive hashing of the
// token's vector) is the example router examples/hash_router.h.
//
// Not implemented: the paper's "balanced" hash, which assigns ids to experts by their training
// frequency so that every expert gets the same share of tokens.
//
// Options: buckets (how many token ids the table covers, default 65536: ids in [0, buckets)).
#pragma once

#include <cstdint>
#include <memory>

#include "nn/moe/router.h"

namespace moelab {

class TokenHashRouter : public Router {
 public:
  TokenHashRouter(std::int64_t d, std::int64_t experts, std::int64_t k, std::int64_t buckets, Generator& gen,
                  DType dtype = DType::Float32);
  RoutingPlan route(const Variable& x) override;
  GateSum gate_sum() const override { return GateSum::One; }
  // The id -> experts table, int32 [buckets, k] (a buffer: saved in checkpoints, moved by to()).
  const Tensor& table() const { return table_; }

 private:
  DType dtype_;
  Tensor table_;
};

// The registry's factory for "token-hash".
std::shared_ptr<Router> make_token_hash_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
