// tests/test_balanced_assignment.cpp — the balanced router's three assignments
// (nn/moe/balanced_assignment.h): the exact one against brute force, the greedy one's gap to it,
// Sinkhorn against an independent implementation of Megatron-LM's loop, and the router's option.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "nn/moe/balanced_assignment.h"
#include "nn/moe/balanced_router.h"
#include "nn/moe/router.h"

using namespace moelab;

namespace {

std::vector<double> random_scores(std::int64_t T, std::int64_t E, Generator& gen) {
  return normal({T, E}, 0.0, 1.0, gen, DType::Float64).to_vector<double>();
}

// Every token k distinct experts, expert e exactly its capacity.
void check_balanced(const std::vector<std::int32_t>& ids, std::int64_t T, std::int64_t E, std::int64_t k) {
  REQUIRE(static_cast<std::int64_t>(ids.size()) == T * k);
  std::vector<std::int64_t> load(static_cast<std::size_t>(E), 0);
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<std::int32_t> row(ids.begin() + t * k, ids.begin() + (t + 1) * k);
    std::sort(row.begin(), row.end());
    CHECK(std::adjacent_find(row.begin(), row.end()) == row.end());
    for (std::int32_t e : row) {
      REQUIRE((e >= 0 && e < E));
      ++load[static_cast<std::size_t>(e)];
    }
  }
  CHECK(load == balanced_capacities(T, E, k));
}

// The best summed affinity over every balanced assignment (each token one of the C(E, k) expert
// sets), by enumeration: small T only.
double brute_force_optimum(const std::vector<double>& scores, std::int64_t T, std::int64_t E, std::int64_t k) {
  std::vector<std::vector<std::int32_t>> sets;
  for (std::int32_t mask = 0; mask < (1 << E); ++mask) {
    if (__builtin_popcount(static_cast<unsigned>(mask)) != k) continue;
    std::vector<std::int32_t> set;
    for (std::int32_t e = 0; e < E; ++e)
      if (mask & (1 << e)) set.push_back(e);
    sets.push_back(set);
  }
  const std::vector<std::int64_t> cap = balanced_capacities(T, E, k);
  std::vector<std::int64_t> load(static_cast<std::size_t>(E), 0);
  double best = -1e300;
  std::function<void(std::int64_t, double)> walk = [&](std::int64_t t, double total) {
    if (t == T) {
      best = std::max(best, total);
      return;
    }
    for (const auto& set : sets) {
      bool fits = true;
      for (std::int32_t e : set) fits = fits && load[static_cast<std::size_t>(e)] < cap[static_cast<std::size_t>(e)];
      if (!fits) continue;
      double gain = 0;
      for (std::int32_t e : set) {
        ++load[static_cast<std::size_t>(e)];
        gain += scores[static_cast<std::size_t>(t * E + e)];
      }
      walk(t + 1, total + gain);
      for (std::int32_t e : set) --load[static_cast<std::size_t>(e)];
    }
  };
  walk(0, 0.0);
  return best;
}

}  // namespace

TEST_CASE("exact balanced assignment: the brute-force optimum, where greedy falls short") {
  Generator gen(11);
  int greedy_short = 0;
  for (const auto& [T, E, k] : std::vector<std::array<std::int64_t, 3>>{{6, 3, 1}, {7, 3, 1}, {8, 4, 1}, {5, 4, 2},
                                                                         {6, 4, 2}, {6, 3, 2}, {4, 4, 3}}) {
    for (int trial = 0; trial < 6; ++trial) {
      INFO("T ", T, " E ", E, " k ", k, " trial ", trial);
      const std::vector<double> scores = random_scores(T, E, gen);
      const std::vector<std::int32_t> exact = exact_balanced_assignment(scores, T, E, k);
      const std::vector<std::int32_t> greedy = greedy_balanced_assignment(scores, T, E, k);
      check_balanced(exact, T, E, k);
      check_balanced(greedy, T, E, k);
      const double best = brute_force_optimum(scores, T, E, k);
      CHECK(assignment_affinity(scores, E, exact) == doctest::Approx(best).epsilon(1e-12));
      CHECK(assignment_affinity(scores, E, greedy) <= best + 1e-12);
      if (assignment_affinity(scores, E, greedy) < best - 1e-9) ++greedy_short;
    }
  }
  CHECK(greedy_short > 0);  // the instances include some the greedy walk does not solve
}

TEST_CASE("exact balanced assignment: the greedy walk's gap at 64 tokens, and determinism") {
  Generator gen(12);
  for (std::int64_t k : {1, 2}) {
    const std::int64_t T = 64, E = 8;
    const std::vector<double> scores = random_scores(T, E, gen);
    const std::vector<std::int32_t> exact = exact_balanced_assignment(scores, T, E, k);
    const std::vector<std::int32_t> greedy = greedy_balanced_assignment(scores, T, E, k);
    check_balanced(exact, T, E, k);
    CHECK(exact == exact_balanced_assignment(scores, T, E, k));
    const double gain = assignment_affinity(scores, E, exact) - assignment_affinity(scores, E, greedy);
    std::int64_t moved = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<std::int32_t> a(exact.begin() + t * k, exact.begin() + (t + 1) * k);
      std::vector<std::int32_t> b(greedy.begin() + t * k, greedy.begin() + (t + 1) * k);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      moved += a != b;
    }
    MESSAGE("k = ", k, ": the exact assignment gives ", moved, " of 64 tokens other experts than greedy, affinity +",
            gain, " (", 100.0 * gain / assignment_affinity(scores, E, exact), "% of the optimum)");
    CHECK(gain >= 0.0);
    CHECK(moved > 0);
    // No single exchange of two tokens between two experts improves the exact one (a 2-cycle).
    if (k == 1) {
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t u = t + 1; u < T; ++u) {
          const std::int32_t et = exact[static_cast<std::size_t>(t)], eu = exact[static_cast<std::size_t>(u)];
          const auto s = [&](std::int64_t i, std::int32_t e) { return scores[static_cast<std::size_t>(i * E + e)]; };
          CHECK(s(t, eu) + s(u, et) <= s(t, et) + s(u, eu) + 1e-12);
        }
    }
  }
  CHECK_THROWS_AS(exact_balanced_assignment({1.0, 2.0}, 1, 2, 3), Error);
}

TEST_CASE("sinkhorn assignment: Megatron-LM's loop, and the balance it buys") {
  // Every token prefers expert 0; the expected experts come from an independent implementation of
  // Megatron-LM's sinkhorn(cost, tol=1e-4) in plain Python floats, then top-k with ties to the
  // lower expert.
  const std::vector<double> scores = {2.0, 1.0, 0.5, 0.0, 2.1, 0.2, 1.1, 0.3, 1.9, 0.4, 0.1, 1.2, 2.2, 1.3, 0.0, 0.2,
                                      1.8, 0.1, 1.4, 0.5, 2.0, 0.3, 0.2, 1.5, 2.4, 0.9, 0.8, 0.7, 1.7, 1.6, 0.3, 0.1};
  CHECK(sinkhorn_assignment(scores, 8, 4, 1) == std::vector<std::int32_t>{1, 2, 3, 1, 2, 3, 0, 1});
  CHECK(sinkhorn_assignment(scores, 8, 4, 2) ==
        std::vector<std::int32_t>{1, 0, 2, 0, 3, 0, 1, 0, 2, 3, 3, 0, 0, 2, 1, 0});
  // On skewed random scores: far more even than each token's own best expert.
  Generator gen(13);
  const std::int64_t T = 256, E = 8;
  std::vector<double> skewed = random_scores(T, E, gen);
  for (std::int64_t t = 0; t < T; ++t) skewed[static_cast<std::size_t>(t * E)] += 1.5;
  std::vector<std::int64_t> load(E, 0), own(E, 0);
  for (std::int32_t e : sinkhorn_assignment(skewed, T, E, 1)) ++load[static_cast<std::size_t>(e)];
  for (std::int64_t t = 0; t < T; ++t)
    ++own[static_cast<std::size_t>(std::max_element(skewed.begin() + t * E, skewed.begin() + (t + 1) * E) -
                                   (skewed.begin() + t * E))];
  CHECK(*std::max_element(own.begin(), own.end()) > 100);  // half the tokens' own best is expert 0
  CHECK(*std::max_element(load.begin(), load.end()) < 64);  // at most 2x the mean of 32
  CHECK(*std::min_element(load.begin(), load.end()) > 12);
}

TEST_CASE("balanced router: option assignment picks the assignment used in training") {
  Generator gen(14);
  const std::int64_t T = 24, E = 4, d = 5;
  const Tensor x = kernels::add(normal({T, d}, 0, 1, gen, DType::Float64), 0.5);
  for (const char* name : {"greedy", "exact", "sinkhorn"}) {
    INFO(name);
    RouterConfig config;
    config.d = d, config.experts = E, config.k = 2, config.dtype = DType::Float64;
    config.options = {{"assignment", name}};
    Generator init(3);
    auto router = make_router("balanced", config, init);
    const Tensor weight = dynamic_cast<BalancedRouter*>(router.get())->weight().data();
    const std::vector<double> scores = kernels::matmul(x, weight, false, true).to_vector<double>();
    const std::string which(name);
    const std::vector<std::int32_t> want = which == "exact"      ? exact_balanced_assignment(scores, T, E, 2)
                                           : which == "sinkhorn" ? sinkhorn_assignment(scores, T, E, 2)
                                                                 : greedy_balanced_assignment(scores, T, E, 2);
    CHECK(router->route(Variable(x)).experts.to_vector<std::int32_t>() == want);
  }
  RouterConfig config;
  config.d = d, config.experts = E, config.k = 1;
  config.options = {{"assignment", "auction"}};
  CHECK_THROWS_WITH_AS(make_router("balanced", config, gen), doctest::Contains("greedy, exact or sinkhorn"), Error);
}
