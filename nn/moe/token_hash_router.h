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
// The paper's "balanced" hash (ids assigned by their training frequency so that the experts' loads
// are close to equal; the greedy rule below is this engine's reading of it), given the frequencies (option frequencies = FILE, or
// set_frequencies): the ids in order of decreasing frequency (ties: the smaller id), each put on
// the expert with the least frequency so far (ties: the one with fewer ids, then the smaller
// index; k > 1: its k least loaded distinct experts, each taking f / k), the greedy
// longest-processing-time rule. Ids never seen (frequency 0) go to the experts with the fewest ids
// (ties: the smaller index), so they spread evenly.
//
// Options: buckets (how many token ids the table covers, default 65536: ids in [0, buckets));
// frequencies (a text file of non-negative numbers separated by white space, the v-th the count
// of id v in the training data, at most `buckets` of them; the ids past the last count 0): the
// balanced table instead of the random one (the random one is still drawn, so the generator
// moves the same either way).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/moe/router.h"

namespace moelab {

class TokenHashRouter : public Router {
 public:
  TokenHashRouter(std::int64_t d, std::int64_t experts, std::int64_t k, std::int64_t buckets, Generator& gen,
                  DType dtype = DType::Float32);
  RoutingPlan route(const Variable& x) override;
  std::string why_no_replay() const override {
    return "token-hash's experts are a fixed table of the token ids: replaying them gives the same routing";
  }
  GateSum gate_sum() const override { return GateSum::One; }
  // The id -> experts table, int32 [buckets, k] (a buffer: saved in checkpoints, moved by to()).
  const Tensor& table() const { return table_; }
  // Rebuilds the table as the balanced hash of these frequencies (frequency[v]: id v's count,
  // finite and >= 0; at most buckets of them, the rest count 0), in place on the table's device.
  void set_frequencies(const std::vector<double>& frequency);

 private:
  DType dtype_;
  Tensor table_;
};

// The balanced hash's table (see above), int32 [buckets * k] row-major, for frequencies of ids
// 0 .. frequency.size() - 1 (<= buckets; the rest 0). moelab::Error for a negative or non-finite
// frequency, or more frequencies than buckets.
std::vector<std::int32_t> balanced_hash_table(const std::vector<double>& frequency, std::int64_t buckets,
                                              std::int64_t experts, std::int64_t k);
// Reads a frequencies file (see the options above); moelab::Error naming the file and the entry.
std::vector<double> read_token_frequencies(const std::string& path);

// The registry's factory for "token-hash".
std::shared_ptr<Router> make_token_hash_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
