// nn/moe/top_p_router.h — dynamic-k routing: each token takes experts, most probable first, until
// their probability mass reaches p.
//
// Huang, Q., An, Z., Zhuang, N., Tao, M., Zhang, C., Jin, Y., Xu, K., Chen, L., Huang, S., Feng, Y.
// "Harder Tasks Need More Experts: Dynamic Routing in MoE Models", arXiv 2403.07652 (2024).
// Easy tokens (one confident expert) use one expert; hard ones (flat probabilities) use several.
//
//   x: [T, d], weight W: [E, d], optional bias b: [E]
//   logits = x W^T (+ b)                    [T, E]
//   p      = softmax(logits)                [T, E]
//   sorted = the K largest p_t, descending  [T, K] (ids: kernels::topk, ties to the lower id)
//   before_tj = sum_{i < j} sorted_ti       [T, K] (router_toolkit.h exclusive_prefix_sums)
//   slot j is used  <=>  before_tj < threshold   (the first always is: the smallest set of
//                                                  experts whose mass reaches the threshold)
//   gate g_tj = p_t,e_tj in used slots (the paper's: no renormalisation; option "renorm")
// K = RouterConfig::k is the most experts a token may take (K = E: no cap); the plan is K wide,
// its unused slots are kUnusedSlot and plan.slots (int32 [T]) says how many each token used.
//
// Options (unknown keys and bad values are errors):
//   threshold      p in (0, 1], default 0.4
//   gates          "softmax" (default) or "renorm" (the used gates divided by their sum)
//   entropy_loss   coefficient >= 0 of the paper's dynamic loss, mean_t -sum_e p log p, which
//                  keeps the router from flattening p to buy more experts
//   load_balance   coefficient >= 0 of a * E * sum_e f_e P_e, f_e = e's share of the used slots,
//                  P_e = mean_t p_t,e (Switch's loss over variable k, as the paper uses)
//   bias           "true": a trainable bias b: [E], initialised to 0
// Metrics: the toolkit's (mean_slots, dropped_fraction = 0, load_max_over_mean, load_cv,
// router_entropy). Everything runs on x's device: no read back.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/moe/router.h"

namespace moelab {

struct TopPRouterOptions {
  double threshold = 0.4;
  bool renorm = false;
  double entropy_loss = 0.0;
  double load_balance = 0.0;
  bool bias = false;
};

TopPRouterOptions parse_top_p_options(const RouterConfig& config);

// The routing computation for given parameters (tests differentiate through it). x: [T, d],
// weight: [E, d], bias: [E] or undefined, 1 <= max_k <= E.
RoutingPlan top_p_route(const Variable& x, const Variable& weight, const Variable& bias, std::int64_t max_k,
                        const TopPRouterOptions& options);

class TopPRouter : public Router {
 public:
  TopPRouter(std::int64_t d, std::int64_t experts, std::int64_t max_k, const TopPRouterOptions& options,
             Generator& gen, DType dtype = DType::Float32);
  RoutingPlan route(const Variable& x) override;
  std::string why_no_replay() const override {
    return "top-p uses a varying number of experts per token, which a replay of k experts a token cannot express";
  }
  GateSum gate_sum() const override { return options_.renorm ? GateSum::One : GateSum::AtMostOne; }
  const Variable& weight() const { return weight_; }

 private:
  TopPRouterOptions options_;
  Variable weight_, bias_;
};

// The registry's factory for "top-p".
std::shared_ptr<Router> make_top_p_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
