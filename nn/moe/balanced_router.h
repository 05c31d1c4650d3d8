// nn/moe/balanced_router.h — balanced assignment: in training, every expert gets exactly its share
// of the batch's T*k assignments, so the load is balanced by construction, with no aux loss.
//
// Lewis, M., Bhosale, S., Dettmers, T., Goyal, N., Zettlemoyer, L. "BASE Layers: Simplifying
// Training of Large, Sparse Models", arXiv 2103.16716 (2021). BASE solves a linear assignment
// problem (tokens to experts, each expert T/E tokens, maximising the summed token-expert scores)
// with an auction algorithm. Option assignment picks how (nn/moe/balanced_assignment.h):
//   greedy    (the default, and what the recorded results used) walk every pair (t, e) by
//             decreasing a_te and take it while token and expert have room: the same balance
//             exactly, the highest-scoring pairs first, not the optimum;
//   exact     the optimum of the assignment problem (cycle cancelling from the greedy start);
//   sinkhorn  S-BASE (Clark et al. 2022, Megatron-LM's sinkhorn routing): top-k of the
//             Sinkhorn-balanced exp(a); balanced only approximately. Megatron's sinkhorn router
//             gates top-2 with softmax(a); here the gate stays BASE's sigmoid for every k.
//
//   x: [T, d], weight W: [E, d];  a = x W^T  [T, E] (affinities)
//   capacities: C_e = floor(T*k / E), the first (T*k mod E) experts one more (sum C_e = T*k)
//   gates g_tj = sigmoid(a_t,e_tj)   (BASE's gate, sigma(h_t . w_e); differentiable through a)
// In evaluation mode each token takes its k best experts (BASE's test-time rule: a batch at test
// time need not be balanced, and a lone decoding step cannot be); option balance_eval = true
// balances there too.
//
// HOST READ BACK. Every assignment runs on the host, in double: the affinities [T, E] are read
// back once per forward in training mode (a GPU waits for it). The plan is then uploaded and
// everything after it stays on the device. (Sinkhorn's row and column scalings could run on the
// device; here they share the host path so that all three are deterministic the same way.)
//
// CAUSALITY CAVEAT (decoders), as for expert choice: in training, token t's expert depends on the
// scores of every token of the batch, later positions included; evaluation (top-k) is causal.
//
// Options: balance_eval ("false" by default), assignment (greedy, exact or sinkhorn; greedy by
// default). Metrics: the toolkit's; with greedy and exact, load_cv is 0 and load_max_over_mean 1
// in training whenever E divides T*k.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/moe/router.h"

namespace moelab {

enum class BalancedAssignment { Greedy, Exact, Sinkhorn };

class BalancedRouter : public Router {
 public:
  BalancedRouter(std::int64_t d, std::int64_t experts, std::int64_t k, bool balance_eval, Generator& gen,
                 DType dtype = DType::Float32, BalancedAssignment assignment = BalancedAssignment::Greedy);
  RoutingPlan route(const Variable& x) override;
  std::string why_no_replay() const override {
    return "the balanced assignment is solved per batch in training; replaying it is not implemented";
  }
  const Variable& weight() const { return weight_; }

 private:
  bool balance_eval_;
  BalancedAssignment assignment_;
  Variable weight_;
};

// The registry's factory for "balanced".
std::shared_ptr<Router> make_balanced_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
