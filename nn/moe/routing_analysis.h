// nn/moe/routing_analysis.h — what a router did, in the figures MoE papers report: load
// violation, per-token-id specialisation and routing drift. Host functions on a plan's experts.
//
//   max_violation(counts)    DeepSeek's MaxVio (Wang et al. 2024, "Auxiliary-Loss-Free Load
//                            Balancing Strategy for Mixture-of-Experts", eq. 7, used by DeepSeek-V3):
//                              max_e load_e / mean_e load_e - 1
//                            0 when perfectly balanced; E - 1 when one expert takes everything.
//                            (the toolkit's load_max_over_mean is 1 + this; nn/moe/router_toolkit.h)
//   token_specialisation     how much a token id decides its experts (OLMoE's token-id
//                            specialisation, Muennighoff et al. 2024, section 5): for each id seen
//                            at least min_count times, the share of its kept assignments that go to
//                            its k most used experts, averaged over those ids weighted by their
//                            assignments. 1: each id always goes to the same experts (a hash
//                            router); about k/E for routing that ignores the id. Ids seen fewer
//                            times are left out (one occurrence is trivially 1). Dropped (-1) and
//                            unused (-2) slots count for no expert.
//   routing_drift(a, b)      the share of tokens whose set of experts differs between two plans of
//                            the same tokens (e.g. one probe batch routed by two checkpoints of a
//                            model): 0 = the same routing, 1 = every token moved. Slots are compared
//                            as sets, so a token whose two experts swap places has not moved.
//
//   const std::vector<std::int32_t> ids = ...;            // [T] token ids
//   const std::vector<std::int32_t> experts = ...;        // [T * k] a plan's experts, row-major
//   double s = token_specialisation(ids, experts, k, E);
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

// counts: [E] assignments per expert -> max / mean - 1 (0 for no assignments at all).
double max_violation(const std::vector<double>& counts);

// ids: [T] token ids; experts: [T * k] each token's experts (row-major, -1/-2 for none) -> the
// specialisation above. Returns -1 when no id was seen min_count times.
double token_specialisation(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& experts,
                            std::int64_t k, std::int64_t num_experts, std::int64_t min_count = 2);

// a, b: [T * k] the experts of the same T tokens under two routings -> the share of tokens whose
// expert sets differ (moelab::Error for sizes that are not T * k).
double routing_drift(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b, std::int64_t k);

}  // namespace moelab
