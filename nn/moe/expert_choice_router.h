// nn/moe/expert_choice_router.h — expert-choice routing: each expert picks its top-C tokens.
//
// Zhou et al. 2022, "Mixture-of-Experts with Expert Choice Routing". Token-choice routers
// (nn/moe/top_k_router.h) let every token pick k experts, so popular experts overflow and need a
// capacity, a drop rule and a load-balancing loss. Expert choice turns the selection around: every
// expert takes exactly C tokens, so the load is perfectly balanced by construction (no aux loss);
// a token may be processed by several experts, by one, or by none.
//
//   x: [T, d], weight W: [E, d] (PyTorch nn.Linear layout), optional bias b: [E]
//   logits = x W^T (+ b)                                    [T, E]
//   S      = softmax(logits) over the experts               [T, E]   (the token-to-expert scores)
//   C      = ceil(capacity_factor * T * k / E), clamped to [1, T]    (tokens per expert)
//   for each expert e: chosen_e = the C tokens with the largest S[:, e]
//            (ties: the lower token index first; kernels::topk over S^T: [E, T])
//
// The RoutingPlan is E wide (the MoE layer reads its k from plan.experts.size(1)): column e of
// row t is expert e's decision about token t.
//   experts            int32 [T, E]  e where expert e chose token t, else kUnusedSlot (-2):
//                                    not a drop, the expert took other tokens
//   slots              int32 [T]     how many experts chose token t
//   gates              [T, E]        S[t, e] where chosen, else 0 — built as S * mask with a
//                                    constant 0/1 mask, so gradients reach x, W and b through S
//   tokens_per_expert  int32 [E]     C for every expert
//   aux_losses         none (the load is balanced by construction)
//   max_kept           E * C (the MoE layer processes exactly these rows, not T*E)
// The mask and the ids are made on x's device (a scatter of ones, a transpose, arange; the plan
// by make_routing_plan, nn/moe/router_toolkit.h), so the router reads nothing back to the host.
// The MoE layer then computes y_t = sum_{e chose t} S[t, e] * expert_e(x_t); a token no expert
// chose gets y_t = 0 and passes through the block's residual only. With capacity_factor 1 the
// experts make T*k choices in all, so a token is processed by k experts on average.
//
// Options (RouterConfig::options; unknown keys and bad values are errors):
//   capacity_factor  c > 0 (default 1): C = ceil(c * T * k / E), clamped to [1, T]. The paper's
//                    EC-CF2 is c = 2 with k = 1 in this notation (2 experts per token on average).
//   bias             "true": a trainable bias b: [E], initialised to 0; default "false"
// Metrics (computed when asked, from the last plan's device tensors; with the toolkit's common
// ones, nn/moe/router_toolkit.h: load_max_over_mean and load_cv are 1 and 0 by construction):
//   capacity                C
//   router_entropy          mean_t of -sum_e S[t, e] log S[t, e], in nats (as TopKRouter)
//   unrouted_fraction       the share of the T tokens that no expert chose
//   mean_experts_per_token  E * C / T (the average number of experts processing a token)
//
// CAUSALITY CAVEAT (decoders). Expert e's choice of token t depends on the scores of all T tokens
// in the batch: the later positions of the same sequence and the other sequences of the batch. A
// causal decoder trained with this router therefore leaks information from the future into
// position t (whether t is processed, and by which experts, depends on tokens after it), and its
// autoregressive generation cannot reproduce training: decoding one token at a time, the router
// sees a batch of one position, not the batch it was trained on. Use expert choice for encoders
// and non-causal experiments, or accept the leak knowingly (the paper trains decoders with it and
// names this limitation: its top-k selection takes in past and future tokens).
//
// Everything differentiable is built from autograd ops (matmul, softmax, mul); the selection (the
// top-C indices, the mask) is constant.
//
//   RouterConfig cfg{/*d=*/64, /*experts=*/8, /*k=*/2, DType::Float32, {{"capacity_factor", "1.0"}}};
//   std::shared_ptr<Router> r = make_router("expert-choice", cfg, gen);
//   RoutingPlan plan = r->route(x);   // x: [T, 64]; plan.experts: [T, 8]; each expert chose C = ceil(T/4)
#pragma once

#include <cstdint>
#include <memory>

#include "nn/moe/router.h"

namespace moelab {

struct ExpertChoiceOptions {
  double capacity_factor = 1.0;  // > 0
  bool bias = false;
};

// Parses config.options (throws moelab::Error naming an unknown key or a bad value).
ExpertChoiceOptions parse_expert_choice_options(const RouterConfig& config);

// C = ceil(capacity_factor * T * k / E), clamped to [1, T].
std::int64_t expert_choice_capacity(std::int64_t T, std::int64_t E, std::int64_t k, double capacity_factor);

// The routing computation for given parameters, so that tests can differentiate with respect to
// leaves of their own. x: [T, d], weight: [E, d], bias: [E] or undefined, 1 <= k <= E.
RoutingPlan expert_choice_route(const Variable& x, const Variable& weight, const Variable& bias, std::int64_t k,
                                const ExpertChoiceOptions& options);

class ExpertChoiceRouter : public Router {
 public:
  // Registers "weight" [E, d] (uniform in +-1/sqrt(d), as nn.Linear) and, with options.bias, "bias" [E].
  ExpertChoiceRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const ExpertChoiceOptions& options,
                     Generator& gen, DType dtype = DType::Float32);

  // x: [T, d] -> an E-wide plan (see above).
  RoutingPlan route(const Variable& x) override;
  std::string why_no_replay() const override {
    return "in expert choice the experts pick tokens, so a token's slots are not its own choice to replay";
  }
  // A token's gates are probabilities of one softmax over all experts, of the experts that chose it.
  GateSum gate_sum() const override { return GateSum::AtMostOne; }

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without options.bias
  const ExpertChoiceOptions& options() const { return options_; }

 private:
  ExpertChoiceOptions options_;
  Variable weight_, bias_;
};

// The registry's factory for "expert-choice".
std::shared_ptr<Router> make_expert_choice_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
