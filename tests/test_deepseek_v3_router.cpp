// tests/test_deepseek_v3_router.cpp — DeepSeek-V3's router in full, as options of aux-free
// (nn/moe/aux_free_router.h): group-limited top-k (groups, topk_groups), the routed scaling
// factor (scale) and the sequence-wise balance loss (seq_aux), each against a reference written
// here on host numbers, in float64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <map>
#include <set>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "nn/moe/aux_free_router.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/router.h"

using namespace moelab;

namespace {

RouterConfig config(std::int64_t d, std::int64_t E, std::int64_t k, std::map<std::string, std::string> options) {
  return RouterConfig{d, E, k, DType::Float64, std::move(options)};
}

std::shared_ptr<AuxFreeRouter> make(const RouterConfig& c, Generator& gen) {
  return std::dynamic_pointer_cast<AuxFreeRouter>(make_router("aux-free", c, gen));
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// s = sigmoid(x W^T) on the host: [T, E], row-major.
std::vector<double> host_scores(const Tensor& x, const Tensor& w) {
  const std::int64_t T = x.size(0), d = x.size(1), E = w.size(0);
  const std::vector<double> xv = values(x), wv = values(w);
  std::vector<double> s(static_cast<std::size_t>(T * E));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t e = 0; e < E; ++e) {
      double z = 0;
      for (std::int64_t i = 0; i < d; ++i) z += xv[t * d + i] * wv[e * d + i];
      s[t * E + e] = 1.0 / (1.0 + std::exp(-z));
    }
  return s;
}

// The indices of the n largest of v (ties: the lower index), largest first.
std::vector<std::int64_t> top(const std::vector<double>& v, std::int64_t n) {
  std::vector<std::int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return v[a] > v[b]; });
  order.resize(static_cast<std::size_t>(n));
  return order;
}

}  // namespace

// The experts the host picks for token t with group-limited top-k: groups scored by the sum of
// their `summed` best biased scores, the M best groups, the k best experts inside them.
static std::set<std::int64_t> host_group_limited(const std::vector<double>& biased_row, std::int64_t G, std::int64_t M,
                                          std::int64_t k, std::int64_t summed) {
  const std::int64_t E = static_cast<std::int64_t>(biased_row.size()), per = E / G;
  std::vector<double> group(static_cast<std::size_t>(G), 0.0);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::vector<double> members(biased_row.begin() + g * per, biased_row.begin() + (g + 1) * per);
    for (std::int64_t i : top(members, summed)) group[g] += members[i];
  }
  const std::vector<std::int64_t> groups = top(group, M);
  std::vector<double> masked = biased_row;
  for (std::int64_t e = 0; e < E; ++e)
    if (std::find(groups.begin(), groups.end(), e / per) == groups.end()) masked[e] = -1e30;
  const std::vector<std::int64_t> want = top(masked, k);
  return std::set<std::int64_t>(want.begin(), want.end());
}

TEST_CASE("deepseek-v3: group_score=k-per-group sums each group's k / M best (Megatron-LM), top2 its 2 best") {
  // k = 8 of 32 experts in 4 groups, one group per token: Megatron sums each group's 8 best,
  // DeepSeek-V3's Gate its 2 best, and the chosen groups differ for some tokens.
  Generator gen(9);
  const std::int64_t d = 6, E = 32, G = 4, M = 1, k = 8, T = 64;
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  std::map<std::string, std::vector<std::set<std::int64_t>>> picks;
  for (const char* rule : {"top2", "k-per-group"}) {
    Generator g(11);  // the same weight for both rules
    auto r = make(config(d, E, k, {{"groups", "4"}, {"topk_groups", "1"}, {"group_score", rule}}), g);
    const std::vector<double> s = host_scores(x, r->weight().data());
    const std::vector<std::int32_t> got = r->route(Variable(x)).experts.to_vector<std::int32_t>();
    const std::int64_t summed = std::string(rule) == "top2" ? 2 : k / M;
    for (std::int64_t t = 0; t < T; ++t) {
      const std::set<std::int64_t> want =
          host_group_limited(std::vector<double>(s.begin() + t * E, s.begin() + (t + 1) * E), G, M, k, summed);
      std::set<std::int64_t> got_set;
      for (std::int64_t j = 0; j < k; ++j) got_set.insert(got[t * k + j]);
      INFO(rule, " token ", t);
      CHECK(got_set == want);
      picks[rule].push_back(got_set);
    }
  }
  int differ = 0;
  for (std::int64_t t = 0; t < T; ++t) differ += picks["top2"][t] != picks["k-per-group"][t];
  CHECK(differ > 0);  // the two rules are not the same rule here
  Generator g(1);
  CHECK_THROWS_WITH_AS(make(config(d, 8, 2, {{"groups", "4"}, {"topk_groups", "4"}, {"group_score", "median"}}), g),
                       doctest::Contains("group_score"), Error);
  // k / M = 0: nothing to sum.
  CHECK_THROWS_WITH_AS(make(config(d, 8, 1, {{"groups", "4"}, {"topk_groups", "2"}, {"group_score", "k-per-group"}}), g),
                       doctest::Contains("k-per-group"), Error);
}

TEST_CASE("deepseek-v3: group-limited top-k picks k experts inside each token's best groups") {
  Generator gen(5);
  const std::int64_t d = 6, E = 12, G = 4, M = 2, k = 3, T = 40, per = E / G;
  auto r = make(config(d, E, k, {{"groups", "4"}, {"topk_groups", "2"}}), gen);
  // A bias that matters: it enters the group scores and the selection, never the gates.
  kernels::copy(const_cast<Tensor&>(r->expert_bias()), normal({E}, 0.0, 0.3, gen, DType::Float64));
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  const RoutingPlan plan = r->route(Variable(x));
  const std::vector<double> s = host_scores(x, r->weight().data()), b = values(r->expert_bias());
  const std::vector<std::int32_t> got = plan.experts.to_vector<std::int32_t>();
  int outside_best_groups = 0;  // tokens whose global top-k would have left their groups
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> biased(static_cast<std::size_t>(E)), group(static_cast<std::size_t>(G));
    for (std::int64_t e = 0; e < E; ++e) biased[e] = s[t * E + e] + b[e];
    for (std::int64_t g = 0; g < G; ++g) {
      const std::vector<double> members(biased.begin() + g * per, biased.begin() + (g + 1) * per);
      const std::vector<std::int64_t> best = top(members, 2);
      group[g] = members[best[0]] + members[best[1]];
    }
    const std::vector<std::int64_t> groups = top(group, M);
    std::vector<double> masked = biased;
    for (std::int64_t e = 0; e < E; ++e)
      if (std::find(groups.begin(), groups.end(), e / per) == groups.end()) masked[e] = -1e30;
    const std::vector<std::int64_t> want = top(masked, k);
    const std::set<std::int64_t> want_set(want.begin(), want.end());
    std::set<std::int64_t> got_set;
    for (std::int64_t j = 0; j < k; ++j) got_set.insert(got[t * k + j]);
    INFO("token ", t);
    CHECK(got_set == want_set);
    const std::vector<std::int64_t> global = top(biased, k);
    for (std::int64_t e : global) outside_best_groups += want_set.count(e) == 0 ? 1 : 0;
  }
  CHECK(outside_best_groups > 0);  // the limit changed some choices: the case tests something

  // The gates are the unbiased scores of the chosen experts, renormalised (k > 1).
  const std::vector<double> gates = values(plan.gates.data());
  for (std::int64_t t = 0; t < T; ++t) {
    double total = 0;
    for (std::int64_t j = 0; j < k; ++j) total += s[t * E + got[t * k + j]];
    for (std::int64_t j = 0; j < k; ++j) CHECK(gates[t * k + j] == doctest::Approx(s[t * E + got[t * k + j]] / total));
  }
}

TEST_CASE("deepseek-v3: the routed scaling factor multiplies the renormalised gates") {
  Generator gen(6), gen2(6);
  const std::int64_t d = 5, E = 8, k = 2, T = 16;
  auto plain = make(config(d, E, k, {}), gen);
  auto scaled = make(config(d, E, k, {{"scale", "2.5"}}), gen2);
  CHECK(scaled->gate_sum() == GateSum::Free);
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  const RoutingPlan a = plain->route(Variable(x)), b = scaled->route(Variable(x));
  CHECK(a.experts.to_vector<std::int32_t>() == b.experts.to_vector<std::int32_t>());
  const std::vector<double> ga = values(a.gates.data()), gb = values(b.gates.data());
  for (std::size_t i = 0; i < ga.size(); ++i) CHECK(gb[i] == doctest::Approx(2.5 * ga[i]));
  // Each token's gates sum to the scale.
  for (std::int64_t t = 0; t < T; ++t) CHECK(gb[t * k] + gb[t * k + 1] == doctest::Approx(2.5));
}

TEST_CASE("deepseek-v3: the sequence-wise balance loss, per sequence, and the router learns from it") {
  Generator gen(7);
  const std::int64_t d = 4, E = 6, k = 2, B = 3, S = 5, T = B * S;
  const double alpha = 0.01;
  auto r = make(config(d, E, k, {{"seq_aux", "0.01"}}), gen);
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  const std::vector<double> s = host_scores(x, r->weight().data());

  // The reference: L = alpha * mean_b sum_e f_be P_be, f_be = E / (k S) * count, P_be = mean of s'.
  const auto reference = [&](const std::vector<std::int32_t>& chosen, std::int64_t sequences) {
    const std::int64_t len = T / sequences;
    double total = 0;
    for (std::int64_t q = 0; q < sequences; ++q) {
      std::vector<double> f(static_cast<std::size_t>(E), 0.0), P(static_cast<std::size_t>(E), 0.0);
      for (std::int64_t t = q * len; t < (q + 1) * len; ++t) {
        double row = 0;
        for (std::int64_t e = 0; e < E; ++e) row += s[t * E + e];
        for (std::int64_t e = 0; e < E; ++e) P[e] += s[t * E + e] / row / static_cast<double>(len);
        for (std::int64_t j = 0; j < k; ++j) f[chosen[t * k + j]] += static_cast<double>(E) / static_cast<double>(k * len);
      }
      for (std::int64_t e = 0; e < E; ++e) total += f[e] * P[e];
    }
    return alpha * total / static_cast<double>(sequences);
  };

  const RoutingPlan by_sequence = r->route_sequences(Variable(x), S);
  REQUIRE(by_sequence.aux_losses.size() == 1);
  CHECK(by_sequence.aux_losses[0].first == "seq_aux");
  const std::vector<std::int32_t> chosen = by_sequence.experts.to_vector<std::int32_t>();
  CHECK(by_sequence.aux_losses[0].second.data().item<double>() == doctest::Approx(reference(chosen, B)));
  // route(x) is one sequence of T: another number.
  const RoutingPlan whole = r->route(Variable(x));
  CHECK(whole.aux_losses[0].second.data().item<double>() == doctest::Approx(reference(chosen, 1)));
  CHECK(reference(chosen, 1) != doctest::Approx(reference(chosen, B)));

  // The loss alone gives the router weight a gradient (through P; f is a count).
  by_sequence.aux_losses[0].second.backward();
  const std::vector<double> grad = values(r->weight().grad());
  CHECK(std::any_of(grad.begin(), grad.end(), [](double g) { return g != 0.0; }));

  // The MoE layer passes its [B, S, d] input's sequences to the router.
  Generator g2(9);
  MoEConfig c;
  c.d = d, c.experts = E, c.k = k, c.ffn = 3, c.router = "aux-free", c.dtype = DType::Float64;
  c.router_options = {{"seq_aux", "0.01"}};
  MoELayer moe(c, g2);
  const Tensor xs = normal({B, S, d}, 0.0, 1.0, g2, DType::Float64);
  AuxLosses per_sequence, flat;
  moe.forward_with_aux(Variable(xs), per_sequence);
  auto& router = dynamic_cast<AuxFreeRouter&>(moe.router());
  const RoutingPlan direct = router.route_sequences(Variable(xs.reshape({T, d})), S);
  CHECK(per_sequence.total().data().item<double>() == doctest::Approx(direct.aux_losses[0].second.data().item<double>()));
  moe.forward_with_aux(Variable(xs.reshape({T, d})), flat);  // [T, d]: one sequence
  CHECK(flat.total().data().item<double>() == doctest::Approx(router.route(Variable(xs.reshape({T, d})))
                                                                  .aux_losses[0].second.data().item<double>()));
}

TEST_CASE("deepseek-v3: options that cannot work are refused with the reason") {
  Generator gen(1);
  const auto refused = [&](std::int64_t E, std::int64_t k, std::map<std::string, std::string> options,
                           const char* says) {
    INFO(says);
    CHECK_THROWS_WITH_AS(make(config(4, E, k, std::move(options)), gen), doctest::Contains(says), Error);
  };
  refused(8, 2, {{"groups", "3"}}, "divide the 8 experts");
  refused(8, 2, {{"groups", "4"}, {"topk_groups", "5"}}, "topk_groups must be in [1, groups = 4]");
  refused(8, 2, {{"groups", "8"}}, "too small");
  refused(8, 5, {{"groups", "4"}, {"topk_groups", "2"}}, "do not fit");
  refused(8, 2, {{"groups", "2.5"}}, "whole number");
  refused(8, 2, {{"scale", "0"}}, "scale must be");
  auto r = make(config(4, 8, 2, {{"seq_aux", "0.1"}}), gen);
  CHECK_THROWS_WITH_AS(r->route_sequences(Variable(zeros({6, 4}, DType::Float64)), 4), doctest::Contains("divide"),
                       Error);
}

TEST_CASE("aux-free replay: the recorded experts, gates from the current weights, whatever the bias says") {
  Generator gen(41);
  const std::int64_t d = 6, E = 8, k = 2, T = 12;
  auto r = std::dynamic_pointer_cast<AuxFreeRouter>(
      make_router("aux-free", config(d, E, k, {{"groups", "4"}, {"topk_groups", "2"}, {"scale", "2.5"}}), gen));
  REQUIRE(r);
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  const Tensor recorded = r->route(Variable(x)).experts;
  // New weights and a new selection bias: the router's own choice changes, the replayed one does not.
  Tensor w = r->weight().data();
  kernels::copy(w, normal({E, d}, 0.0, 1.0, gen, DType::Float64));
  Tensor b = r->expert_bias();
  kernels::copy(b, normal({E}, 0.0, 1.0, gen, DType::Float64));
  const Tensor own = r->route(Variable(x)).experts;
  CHECK(own.to_vector<std::int32_t>() != recorded.to_vector<std::int32_t>());
  r->replay(recorded);
  CHECK(r->replaying());
  const RoutingPlan replayed = r->route(Variable(x));
  CHECK(replayed.experts.to_vector<std::int32_t>() == recorded.to_vector<std::int32_t>());
  // Gates: sigmoid(x W^T) under the new weights at the recorded experts, renormalised, times 2.5.
  const std::vector<double> s = kernels::sigmoid(matmul(Variable(x), r->weight(), false, true).data()).to_vector<double>();
  const std::vector<std::int32_t> ids = recorded.to_vector<std::int32_t>();
  const std::vector<double> g = replayed.gates.data().to_vector<double>();
  for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
    const double a = s[t * E + static_cast<std::size_t>(ids[2 * t])], c = s[t * E + static_cast<std::size_t>(ids[2 * t + 1])];
    CHECK(g[2 * t] == doctest::Approx(2.5 * a / (a + c)).epsilon(1e-12));
    CHECK(g[2 * t + 1] == doctest::Approx(2.5 * c / (a + c)).epsilon(1e-12));
  }
  // The router still learns while replaying: its weight gets a gradient through the gates.
  sum(replayed.gates).backward();
  const std::vector<double> grad = r->weight().grad().to_vector<double>();
  CHECK(std::any_of(grad.begin(), grad.end(), [](double v) { return v != 0.0; }));
  CHECK_THROWS_AS(r->route(Variable(normal({4, d}, 0.0, 1.0, gen, DType::Float64))), Error);  // another T
  CHECK_THROWS_AS(r->replay(from_vector(std::vector<std::int32_t>{0, 8}, {1, 2})), Error);     // outside [0, E)
  CHECK_THROWS_AS(r->replay(from_vector(std::vector<std::int32_t>{3, 3}, {1, 2})), Error);     // twice
  r->stop_replay();
  CHECK(r->route(Variable(x)).experts.to_vector<std::int32_t>() == own.to_vector<std::int32_t>());
}
