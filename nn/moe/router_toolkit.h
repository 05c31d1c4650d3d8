// nn/moe/router_toolkit.h — the pieces every routing scheme needs, public so that a router written
// outside nn/ (examples/custom_router.cpp) uses the same ones as the built-ins.
//
// A router (nn/moe/router.h) computes scores from x: [T, d], selects expert ids as constants,
// builds differentiable gates, and hands back a RoutingPlan. Apart from the scores and the
// selection rule, which are the scheme, the rest is the same every time:
//
//   renormalize_rows(g)          [T, k] -> [T, k]   g_tj / sum_i g_ti (Mixtral's gates; top-p's option)
//   repeat_column(c, k)          [T, 1] -> [T, k]   c_t in every column, by broadcasting (the
//                                                   gradient is summed back over the k columns)
//   positive_mask(x)             [...] -> [...]     1 where x > 0 else 0 (x's dtype), a constant
//                                                   built from float ops, so it runs on every device
//   slot_mask(ids, dtype)        int32 [T, k] -> [T, k]  1 where ids >= 0 (an expert), else 0
//   select_ids(ids, keep, s)     int32 [T, k]       ids where keep is 1, the sentinel s where 0
//   ids_for_grouping(ids)        int32 [T, k]       kUnusedSlot -> kDroppedSlot, the ids that
//                                                   kernels::group_by_expert accepts
//   exclusive_prefix_sums(v)     [T, k] -> [T, k]   sum_{i < j} v_ti (one matmul with a constant
//                                                   strictly upper-triangular [k, k])
//   make_routing_plan(parts, E)  the RoutingPlan: ids after an optional keep mask and capacity,
//                                gates zeroed in every sentinel slot (and optionally
//                                renormalised over the kept ones), tokens per expert, the
//                                expert groups the MoE layer reuses, slots per token for a
//                                variable-k scheme, and the common metrics below.
//
// Which assignments an expert keeps when more than `capacity` chose it (CapacityOrder):
//   Tokens       the first in token order: (t, j) before (t, j + 1) before (t + 1, 0) (Switch
//                Transformer's top-1; Megatron-LM's drop policy "position")
//   Choices      every token's first choice before any token's second, then token order within a
//                choice (GShard's Algorithm 1, DeepSpeed's top2gating, flaxformer's routers: all
//                first choices are queued before the second ones)
//   Probability  the largest scores first (PlanParts::capacity_scores, the gates' values when not
//                given; the top-k router ranks by its gates), ties in token order (Megatron-LM's
//                default drop policy "probs", which ranks by its top-k gates: renormalised, or
//                the raw probabilities with --moe-router-pre-softmax)
// and renormalize_kept divides each token's gates by the sum of its kept ones, as GShard and
// DeepSpeed do after dropping (a token whose second choice was dropped gets its first with gate 1;
// a token with nothing kept keeps gates 0).
//
// Metrics every plan made here reports (computed only when asked, reading the device then):
//   dropped_fraction    kDroppedSlot entries / the slots the scheme used (unused ones excluded)
//   load_max_over_mean  max_e / mean_e of the kept assignments per expert (1 = perfectly balanced)
//   load_cv             their coefficient of variation, std / mean (population std; 0 = balanced)
//   max_violation       DeepSeek's MaxVio, max / mean - 1 (nn/moe/routing_analysis.h)
//   router_entropy      mean_t of -sum_e p log p in nats, when PlanParts::probs is given
//   mean_slots          used slots per token, for a variable-k scheme
//   capacity            the capacity, when one was applied
// plus whatever PlanParts::extra returns (a scheme's own: raw aux-loss values, ...).
//
// Nothing here reads the device during routing: ids, masks, sorting and counts stay on x's device
// (kernels::group_by_expert is the counting sort). Selection values are constants (no graph);
// only gates are Variables.
//
//   PlanParts parts;
//   parts.chosen = kernels::topk(logits.data(), k).indices;   // int32 [T, k]
//   parts.gates = renormalize_rows(gather_last(probs, parts.chosen));
//   parts.probs = probs.data();
//   RoutingPlan plan = make_routing_plan(parts, E);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/moe/router.h"

namespace moelab {

// g: [T, k] -> g / sum(g, 1): rows sum to 1 (differentiable).
Variable renormalize_rows(const Variable& g);
// The Switch Transformer's balance loss (Fedus et al. 2022, eq. 4), the one every router here
// that offers load_balance uses: coefficient * E * sum_e f_e P_e, where f (constant) is each
// expert's share of the routing decisions and P = the mean over tokens of the probabilities.
//   probs: [T, E] (differentiable); f: [E] for the whole batch, or [B, E] for B sequences of T / B
//   consecutive tokens, each with its own f and P, the loss then averaged over the B sequences
//   (balance_scope = sequence). -> [] (0-d)
Variable switch_balance_loss(const Variable& probs, const Tensor& f, double coefficient);
// The running counts of Megatron-LM's global_aux_loss (its router's global_tokens_per_expert and
// ga_steps): with gradient accumulation a step's batch comes as several micro-batches, each its own
// forward and backward, and the balance loss of each would otherwise see only its own f. add(f, n)
// adds this micro-batch's counts (f_e n, n its routing decisions) to those of the micro-batches
// before it in the step and returns the shares over all of them, [E]: the first micro-batch's f is
// its own, the last one's the whole step's. P stays the micro-batch's own (only P carries a
// gradient). reset() after the optimizer step (TopKRouter::after_optimizer_step). Equal-sized
// micro-batches give Megatron's global_tokens_per_expert / ga_steps / tokens exactly.
class BalanceCounts {
 public:
  // f: [E] this micro-batch's shares of its `decisions` routing decisions -> [E] the shares over every
  // micro-batch added since the last reset, this one included (constant; on f's device).
  Tensor add(const Tensor& f, std::int64_t decisions);
  void reset();
  std::int64_t micro_batches() const { return micro_batches_; }

 private:
  Tensor counts_;          // [E]: sum of f * decisions, f's dtype and device
  double decisions_ = 0.0;
  std::int64_t micro_batches_ = 0;
};

// chosen: int32 [T, k] expert ids -> [B, E] of `dtype`: each expert's share of the k (T / B)
// choices of each of B sequences of consecutive tokens (constant; ids outside [0, E) count for
// no expert). B must divide T.
Tensor choice_shares(const Tensor& chosen, std::int64_t experts, std::int64_t sequences, DType dtype);
// col: [T, 1] -> [T, k] (differentiable; the product with a constant ones [1, k] broadcasts).
Variable repeat_column(const Variable& col, std::int64_t k);
Tensor repeat_column(const Tensor& col, std::int64_t k);
// 1 where x > 0 else 0, in x's dtype (float or int32 in; float out, Float64 for int32). Values of
// magnitude below 1e-300 count as 0.
Tensor positive_mask(const Tensor& x);
// ids: int32 [T, k] -> [T, k] of `dtype`: 1 where ids >= 0, 0 for either sentinel.
Tensor slot_mask(const Tensor& ids, DType dtype);
// ids: int32 [T, k], keep: [T, k] 0/1 (any float dtype) -> int32 [T, k]: ids where keep is 1,
// `sentinel` where keep is 0.
Tensor select_ids(const Tensor& ids, const Tensor& keep, std::int32_t sentinel);
// int32 [T, k]: kUnusedSlot entries become kDroppedSlot (for kernels::group_by_expert).
Tensor ids_for_grouping(const Tensor& ids);
// v: [T, k] float -> [T, k]: out_tj = sum_{i < j} v_ti (constant; no graph).
Tensor exclusive_prefix_sums(const Tensor& v);

// The order in which an expert over its capacity keeps assignments (see the header comment).
enum class CapacityOrder { Tokens, Choices, Probability };
// "tokens", "choices", "probability" (router options' spelling).
const char* capacity_order_name(CapacityOrder order);

struct PlanParts {
  Tensor chosen;       // int32 [T, k]: expert ids in [0, E), or kUnusedSlot (needs variable_slots)
  Variable gates;      // [T, k]: the gates before dropping (zeroed here in every sentinel slot)
  Tensor keep;         // optional [T, k] 0/1 in the gates' dtype: 0 drops the assignment
                       //   (kDroppedSlot) before any capacity; ignored in unused slots
  std::int64_t capacity = -1;  // >= 0: each expert keeps its first `capacity` assignments in
                               //   capacity_order; later ones drop
  CapacityOrder capacity_order = CapacityOrder::Tokens;
  Tensor capacity_scores;      // optional [T, k] float: Probability's order (default: the gates)
  bool renormalize_kept = false;  // gates / sum of the row's kept gates (see above)
  std::int64_t max_kept = -1;  // the scheme's bound on kept assignments (e.g. E*C), or -1
  bool variable_slots = false; // chosen may hold kUnusedSlot: the plan gets `slots`
  Tensor probs;        // optional [T, E] router probabilities: the router_entropy metric
  RouterMetrics extra; // optional: more metrics, merged into the plan's
};

// The plan for `experts` = E experts (see the header comment). Throws moelab::Error naming the
// shapes when chosen, gates and keep disagree.
RoutingPlan make_routing_plan(const PlanParts& parts, std::int64_t experts);

// Router replay's check of recorded experts (int32 [T, k] of a plan; read to the host once, when
// the replay is set): every id in [0, experts) and no token with an expert twice; moelab::Error
// naming `scheme` and the first bad assignment otherwise. Returns ids.
Tensor checked_replay_ids(const Tensor& ids, std::int64_t k, std::int64_t experts, const char* scheme);

// Host helpers for metric closures (they run on demand, never in a training step).
std::vector<double> host_doubles(const Tensor& t);
// counts: kept assignments per expert -> {load_max_over_mean, load_cv, max_violation}.
std::map<std::string, double> load_metrics(const std::vector<double>& counts);
// probs: [T, E] on the host, row-major -> mean_t of -sum_e p log p (nats).
double mean_entropy(const std::vector<double>& probs, std::int64_t T, std::int64_t E);

}  // namespace moelab
