// nn/moe/balanced_assignment.cpp — greedy, exact and Sinkhorn balanced assignments (see the header).
#include "nn/moe/balanced_assignment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace moelab {

namespace {

void check_problem(const char* op, const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                   std::int64_t k) {
  MOELAB_CHECK(T >= 1 && E >= 1 && k >= 1 && k <= E, op, "need T >= 1 and 1 <= k <= E, got T ", T, ", E ", E, ", k ", k);
  MOELAB_CHECK(static_cast<std::int64_t>(scores.size()) == T * E, op, "scores must hold T*E = ", T * E, " values, got ",
               scores.size());
}

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

}  // namespace

std::vector<std::int64_t> balanced_capacities(std::int64_t T, std::int64_t E, std::int64_t k) {
  std::vector<std::int64_t> cap(at(E), (T * k) / E);
  for (std::int64_t e = 0; e < (T * k) % E; ++e) ++cap[at(e)];
  return cap;
}

double assignment_affinity(const std::vector<double>& scores, std::int64_t E, const std::vector<std::int32_t>& ids) {
  const std::int64_t T = std::max<std::int64_t>(1, static_cast<std::int64_t>(scores.size()) / E);
  const std::int64_t k = static_cast<std::int64_t>(ids.size()) / T;
  double total = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) total += scores[at(static_cast<std::int64_t>(i) / k * E + ids[i])];
  return total;
}

// ---------------------------------------------------------------- greedy

std::vector<std::int32_t> greedy_balanced_assignment(const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                                                     std::int64_t k) {
  const char* op = "balanced_assignment";
  check_problem(op, scores, T, E, k);
  const std::vector<std::int64_t> cap = balanced_capacities(T, E, k);
  std::vector<std::int64_t> load(at(E), 0);
  std::vector<std::vector<std::int32_t>> held(at(T));
  const auto holds = [&](std::int64_t t, std::int64_t e) {
    const auto& h = held[at(t)];
    return std::find(h.begin(), h.end(), static_cast<std::int32_t>(e)) != h.end();
  };
  const auto give = [&](std::int64_t t, std::int64_t e) {
    held[at(t)].push_back(static_cast<std::int32_t>(e));
    ++load[at(e)];
  };

  // The greedy walk by decreasing score; stable, so ties keep pair order (lower t, then lower e).
  std::vector<std::int64_t> order(at(T * E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return scores[at(a)] > scores[at(b)]; });
  for (std::int64_t pair : order) {
    const std::int64_t t = pair / E, e = pair % E;
    if (static_cast<std::int64_t>(held[at(t)].size()) < k && load[at(e)] < cap[at(e)] && !holds(t, e)) give(t, e);
  }

  // Repair (k > 1 only): the room left is in experts the short token already holds. Move another
  // token u from an expert e2 that t lacks to the roomy expert r (u must lack r); t takes e2.
  for (std::int64_t t = 0; t < T; ++t) {
    while (static_cast<std::int64_t>(held[at(t)].size()) < k) {
      std::int64_t r = -1;
      for (std::int64_t e = 0; e < E && r < 0; ++e)
        if (load[at(e)] < cap[at(e)]) r = e;
      MOELAB_CHECK(r >= 0, op, "no room left for token ", t, " (internal error)");
      if (!holds(t, r)) {
        give(t, r);
        continue;
      }
      bool moved = false;
      for (std::int64_t u = 0; u < T && !moved; ++u) {
        if (u == t || holds(u, r)) continue;
        for (std::int32_t& e2 : held[at(u)]) {
          if (holds(t, e2)) continue;
          const std::int64_t taken = e2;
          e2 = static_cast<std::int32_t>(r);  // u moves from e2 to r
          ++load[at(r)];
          held[at(t)].push_back(static_cast<std::int32_t>(taken));  // t takes e2's place
          moved = true;
          break;
        }
      }
      MOELAB_CHECK(moved, op, "could not balance token ", t, " (internal error)");
    }
  }
  std::vector<std::int32_t> ids;
  ids.reserve(at(T * k));
  for (const auto& h : held) ids.insert(ids.end(), h.begin(), h.end());
  return ids;
}

// ---------------------------------------------------------------- exact (cycle cancelling)

std::vector<std::int32_t> exact_balanced_assignment(const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                                                    std::int64_t k) {
  const char* op = "exact_balanced_assignment";
  check_problem(op, scores, T, E, k);
  std::vector<std::int32_t> ids = greedy_balanced_assignment(scores, T, E, k);  // [T, k], feasible
  const auto [lowest, highest] = std::minmax_element(scores.begin(), scores.end());
  const double tol = 1e-12 * std::max(1.0, *highest - *lowest);
  const double inf = std::numeric_limits<double>::infinity();
  const auto score = [&](std::int64_t t, std::int64_t e) { return scores[at(t * E + e)]; };
  std::vector<char> on(at(T * E), 0);  // on[t * E + e]: token t holds expert e
  for (std::int64_t i = 0; i < T * k; ++i) on[at(i / k * E + ids[at(i)])] = 1;

  // Each pass: the cheapest move on every edge e1 -> e2, then Bellman-Ford for a negative cycle.
  // Every cancelled cycle raises the total by more than tol, so the loop ends; the bound below
  // only guards against a bug.
  std::vector<double> w(at(E * E)), dist(at(E));
  std::vector<std::int64_t> who(at(E * E)), slot(at(E * E)), pred(at(E));
  const std::int64_t max_passes = 100 * T * k + 1000;
  for (std::int64_t pass = 0;; ++pass) {
    MOELAB_CHECK(pass < max_passes, op, "did not converge (internal error)");
    std::fill(w.begin(), w.end(), inf);
    std::fill(who.begin(), who.end(), -1);
    for (std::int64_t i = 0; i < T * k; ++i) {  // slot i: token t holds e1
      const std::int64_t t = i / k, e1 = ids[at(i)];
      for (std::int64_t e2 = 0; e2 < E; ++e2) {
        if (on[at(t * E + e2)]) continue;  // t holds e2 already (e2 == e1 included)
        const double cost = score(t, e1) - score(t, e2);
        if (cost < w[at(e1 * E + e2)]) {  // strict: the lower token wins a tie
          w[at(e1 * E + e2)] = cost;
          who[at(e1 * E + e2)] = t;
          slot[at(e1 * E + e2)] = i;
        }
      }
    }
    // Bellman-Ford from a virtual source joined to every expert by 0: E passes, the last one
    // relaxing only if a negative cycle exists.
    std::fill(dist.begin(), dist.end(), 0.0);
    std::fill(pred.begin(), pred.end(), -1);
    bool relaxed = false;
    for (std::int64_t round = 0; round < E; ++round) {
      relaxed = false;
      for (std::int64_t e1 = 0; e1 < E; ++e1)
        for (std::int64_t e2 = 0; e2 < E; ++e2) {
          if (who[at(e1 * E + e2)] < 0) continue;
          const double d = dist[at(e1)] + w[at(e1 * E + e2)];
          if (d < dist[at(e2)] - tol) {
            dist[at(e2)] = d;
            pred[at(e2)] = e1;
            relaxed = true;
          }
        }
      if (!relaxed) break;
    }
    if (!relaxed) break;  // no negative cycle: optimal
    // A cycle of the predecessor graph (there is one once the last round relaxed).
    std::vector<std::int64_t> cycle;
    std::vector<std::int64_t> seen(at(E), -1);
    for (std::int64_t start = 0; start < E && cycle.empty(); ++start) {
      std::int64_t v = start;
      while (v >= 0 && seen[at(v)] < 0) {
        seen[at(v)] = start;
        v = pred[at(v)];
      }
      if (v >= 0 && seen[at(v)] == start) {  // v is on a cycle found in this walk
        std::int64_t u = v;
        do {
          cycle.push_back(u);
          u = pred[at(u)];
        } while (u != v);
      }
    }
    if (cycle.empty()) break;
    double weight = 0;
    for (std::int64_t e2 : cycle) weight += w[at(pred[at(e2)] * E + e2)];
    if (!(weight < -tol)) break;  // rounding: nothing left worth moving
    // Move along the cycle, all at once: each edge's token leaves pred -> joins e2. The experts
    // of a cycle are distinct, so every condition checked above still holds for each move.
    std::vector<std::int64_t> moves;  // (slot, from, to)
    for (std::int64_t e2 : cycle) {
      const std::int64_t e1 = pred[at(e2)];
      moves.insert(moves.end(), {slot[at(e1 * E + e2)], e1, e2});
    }
    for (std::size_t m = 0; m < moves.size(); m += 3) {
      const std::int64_t i = moves[m], t = i / k;
      on[at(t * E + moves[m + 1])] = 0;
    }
    for (std::size_t m = 0; m < moves.size(); m += 3) {
      const std::int64_t i = moves[m], t = i / k;
      ids[at(i)] = static_cast<std::int32_t>(moves[m + 2]);
      on[at(t * E + moves[m + 2])] = 1;
    }
  }
  // Each token's experts by decreasing affinity (ties: the lower expert), as top-k lists them.
  for (std::int64_t t = 0; t < T; ++t)
    std::sort(ids.begin() + t * k, ids.begin() + (t + 1) * k, [&](std::int32_t a, std::int32_t b) {
      return score(t, a) > score(t, b) || (score(t, a) == score(t, b) && a < b);
    });
  return ids;
}

// ---------------------------------------------------------------- Sinkhorn (S-BASE)

std::vector<std::int32_t> sinkhorn_assignment(const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                                              std::int64_t k) {
  const char* op = "sinkhorn_assignment";
  check_problem(op, scores, T, E, k);
  // Megatron-LM's sinkhorn(cost, tol=1e-4) in double: cost = exp(a); d0 (rows) and d1 (columns)
  // start at 1; d0 = (1/T) / (cost @ d1 + eps), d1 = (1/E) / (d0 @ cost + eps), eps = 1e-8, until
  // mean |d1 - d1_old| <= tol. (Megatron loops without a bound; here at most 10,000 rounds.)
  constexpr double kTol = 1e-4, kEps = 1e-8;
  constexpr int kMaxRounds = 10000;
  std::vector<double> cost(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) cost[i] = std::exp(scores[i]);
  std::vector<double> d0(at(T), 1.0), d1(at(E), 1.0), d1_old(at(E), 1.0);
  double error = 1e9;
  for (int round = 0; error > kTol && round < kMaxRounds; ++round) {
    for (std::int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (std::int64_t e = 0; e < E; ++e) s += d1[at(e)] * cost[at(t * E + e)];
      d0[at(t)] = (1.0 / static_cast<double>(T)) * 1.0 / (s + kEps);
    }
    for (std::int64_t e = 0; e < E; ++e) {
      double s = 0;
      for (std::int64_t t = 0; t < T; ++t) s += d0[at(t)] * cost[at(t * E + e)];
      d1[at(e)] = (1.0 / static_cast<double>(E)) * 1.0 / (s + kEps);
    }
    error = 0;
    for (std::int64_t e = 0; e < E; ++e) error += std::abs(d1_old[at(e)] - d1[at(e)]);
    error /= static_cast<double>(E);
    d1_old = d1;
  }
  // Each token's k best experts of d1 * cost * d0 (ties: the lower expert).
  std::vector<std::int32_t> ids;
  ids.reserve(at(T * k));
  std::vector<std::int32_t> order(at(E));
  for (std::int64_t t = 0; t < T; ++t) {
    const auto balanced = [&](std::int32_t e) { return d1[at(e)] * cost[at(t * E + e)] * d0[at(t)]; };
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return balanced(a) > balanced(b); });
    ids.insert(ids.end(), order.begin(), order.begin() + k);
  }
  return ids;
}

}  // namespace moelab
