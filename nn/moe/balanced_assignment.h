// nn/moe/balanced_assignment.h — three ways to give every expert its share of a batch's tokens,
// used by the balanced router (nn/moe/balanced_router.h). All run on the host, in double.
//
// The problem (BASE layers, Lewis et al. 2021): T tokens, E experts, affinities a: [T, E]; each
// token takes k distinct experts, expert e exactly C_e tokens (C_e = floor(T*k / E), the first
// (T*k mod E) experts one more, so sum C_e = T*k); maximise the summed affinity of the chosen
// pairs. A linear assignment (transportation) problem.
//
//   greedy_balanced_assignment   walk the pairs by decreasing affinity, take a pair while its
//                                token and expert have room (then a repair for k > 1). Balanced
//                                exactly, not optimal: on 64 random tokens and 8 experts it gives
//                                some tokens another expert and a few percent less affinity than
//                                the optimum (tests/test_balanced_assignment.cpp measures it).
//   exact_balanced_assignment    the optimum, k = 1 (BASE's setting): start from the greedy
//                                assignment and cancel improving cycles. Moving token t from
//                                expert e1 to e2 costs a_t,e1 - a_t,e2; on the graph of experts
//                                with edge e1 -> e2 weighted by the cheapest such move, a cycle
//                                of negative weight moves one token along each edge, keeps every
//                                load, and raises the total affinity. Bellman-Ford finds one; when
//                                none is left (beyond a tolerance of 1e-12 x the affinities'
//                                range), no exchange of tokens can improve the total: optimal
//                                (the cycle criterion of min-cost flow). BASE itself uses an
//                                auction algorithm (Bertsekas), which reaches the optimum only
//                                to within its bidding increment; both give the same experts
//                                wherever the optimum is unique.
//   sinkhorn_assignment          S-BASE (Clark et al. 2022) as Megatron-LM's `sinkhorn`: scale
//                                the rows and columns of exp(a) alternately until the column
//                                factors move by less than tol = 1e-4 (mean absolute change),
//                                then each token takes its k best experts of the scaled matrix.
//                                Balanced only approximately (the matrix is, the top-k of it
//                                need not be); cheap.
//
// All three are deterministic (fixed walk orders, ties to the lower token, then the lower expert).
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

// scores: [T, E] row-major; each returns [T, k] row-major expert ids. Need T >= 1 and
// 1 <= k <= E (exact: k == 1); throw moelab::Error otherwise.
std::vector<std::int32_t> greedy_balanced_assignment(const std::vector<double>& scores, std::int64_t T,
                                                     std::int64_t E, std::int64_t k);
std::vector<std::int32_t> exact_balanced_assignment(const std::vector<double>& scores, std::int64_t T,
                                                    std::int64_t E, std::int64_t k);
std::vector<std::int32_t> sinkhorn_assignment(const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                                              std::int64_t k);

// The capacities above: C_e = floor(T*k / E), plus one for e < (T*k mod E).
std::vector<std::int64_t> balanced_capacities(std::int64_t T, std::int64_t E, std::int64_t k);

// The summed affinity of an assignment (ids: [T, k]), to compare them.
double assignment_affinity(const std::vector<double>& scores, std::int64_t E, const std::vector<std::int32_t>& ids);

}  // namespace moelab
