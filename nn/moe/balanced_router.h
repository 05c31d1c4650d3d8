// nn/moe/balanced_router.h — balanced assignment: in training, every expert gets exactly its share
// of the batch's T*k assignments, so the load is balanced by construction, with no aux loss.
//
// Lewis, M., Bhosale, S., Dettmers, T., Goyal, N., Zettlemoyer, L. "BASE Layers: Simplifying
// Training of Large, Sparse Models", arXiv 2103.16716 (2021). BASE solves a linear assignment
// problem (tokens to experts, each expert T/E tokens, maximising the summed token-expert scores)
// with an auction algorithm; this router uses the greedy assignment instead, which meets the
// same balance constraint exactly and keeps the highest-scoring pairs first (it is not the
// optimum of the assignment problem):
//
//   x: [T, d], weight W: [E, d];  a = x W^T  [T, E] (affinities)
//   capacities: C_e = floor(T*k / E), the first (T*k mod E) experts one more (sum C_e = T*k)
//   walk every pair (t, e) by decreasing a_te (ties: lower t, then lower e) and assign it when
//   token t holds fewer than k experts, does not hold e yet, and e holds fewer than C_e tokens;
//   a token left short at the end (possible only for k > 1) takes the room left by swapping with
//   a token that can move (each swap keeps every other constraint).
//   gates g_tj = sigmoid(a_t,e_tj)   (BASE's gate, sigma(h_t . w_e); differentiable through a)
// In evaluation mode each token takes its k best experts (BASE's test-time rule: a batch at test
// time need not be balanced, and a lone decoding step cannot be); option balance_eval = true
// balances there too.
//
// HOST READ BACK. The greedy walk runs on the host: the affinities [T, E] are read back once per
// forward in training mode (a GPU waits for it). The plan is then uploaded and everything after it
// stays on the device. (A Sinkhorn relaxation, Clark et al. arXiv 2202.01169, would stay on the
// device but balances only approximately.)
//
// CAUSALITY CAVEAT (decoders), as for expert choice: in training, token t's expert depends on the
// scores of every token of the batch, later positions included; evaluation (top-k) is causal.
//
// Options: balance_eval ("false" by default). Metrics: the toolkit's; load_cv is 0 and
// load_max_over_mean 1 in training whenever E divides T*k.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/moe/router.h"

namespace moelab {

// The greedy balanced assignment on the host. scores: [T, E] row-major; returns [T, k] row-major
// expert ids (each token k distinct experts, expert e exactly C_e tokens as above). Needs
// 1 <= k <= E; throws moelab::Error otherwise.
std::vector<std::int32_t> balanced_assignment(const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                                              std::int64_t k);

class BalancedRouter : public Router {
 public:
  BalancedRouter(std::int64_t d, std::int64_t experts, std::int64_t k, bool balance_eval, Generator& gen,
                 DType dtype = DType::Float32);
  RoutingPlan route(const Variable& x) override;
  const Variable& weight() const { return weight_; }

 private:
  bool balance_eval_;
  Variable weight_;
};

// The registry's factory for "balanced".
std::shared_ptr<Router> make_balanced_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
