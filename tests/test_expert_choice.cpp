// tests/test_expert_choice.cpp — the expert-choice router (nn/moe/expert_choice_router.h):
//
//   - every expert takes exactly C = ceil(capacity_factor * T * k / E) tokens (clamped to [1, T]),
//     the top-C of its softmax column computed by hand in float64; gates equal the softmax
//     probabilities where chosen and 0 elsewhere; metrics against hand counts
//   - ties go to the lower token index (scores checked to be bitwise equal first)
//   - the MoE layer with router "expert-choice" equals a per-expert loop in float64 (1e-12)
//   - float64 gradcheck of the gates w.r.t. x, W, b, and of the MoE layer w.r.t. x and every
//     parameter, with inputs whose C-th and (C+1)-th scores of every expert are clearly apart
//   - the registry builds it by name; bad options are rejected with a message naming the key
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/expert_choice_router.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/router.h"
#include "tests/parameter_gradcheck.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::check_parameters;
using moelab::testing::max_error;
using moelab::testing::to_doubles;
using moelab::testing::error_of;
using V = std::vector<Variable>;

namespace {

constexpr double kTol = 1e-12;

RouterConfig config(std::int64_t d, std::int64_t E, std::int64_t k, std::map<std::string, std::string> options = {}) {
  return RouterConfig{d, E, k, DType::Float64, std::move(options)};
}

void set_values(Variable p, const Tensor& v) { kernels::copy(p.data(), v); }

// Host scores S = softmax(x W^T + b) over the experts, float64: [T, E] row-major.
std::vector<double> host_scores(const Tensor& x, const Tensor& w, const Tensor& b = Tensor()) {
  const auto xv = to_doubles(x), wv = to_doubles(w);
  const std::int64_t T = x.size(0), d = x.size(1), E = w.size(0);
  const std::vector<double> bv = b.defined() ? to_doubles(b) : std::vector<double>(static_cast<std::size_t>(E), 0.0);
  std::vector<double> S(static_cast<std::size_t>(T * E));
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> l(bv);
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t i = 0; i < d; ++i)
        l[static_cast<std::size_t>(e)] += xv[static_cast<std::size_t>(t * d + i)] * wv[static_cast<std::size_t>(e * d + i)];
    const double m = *std::max_element(l.begin(), l.end());
    double s = 0;
    for (double& v : l) s += (v = std::exp(v - m));
    for (std::int64_t e = 0; e < E; ++e) S[static_cast<std::size_t>(t * E + e)] = l[static_cast<std::size_t>(e)] / s;
  }
  return S;
}

// Tokens of column e of S: [T, E] ordered by score, largest first, ties by the lower token index.
std::vector<std::int64_t> ranked_tokens(const std::vector<double>& S, std::int64_t T, std::int64_t E, std::int64_t e) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(T));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return S[static_cast<std::size_t>(a * E + e)] > S[static_cast<std::size_t>(b * E + e)];
  });
  return order;
}

// Hand selection: chosen[t * E + e] is true when expert e's top-C holds token t.
std::vector<bool> hand_choice(const std::vector<double>& S, std::int64_t T, std::int64_t E, std::int64_t C) {
  std::vector<bool> chosen(static_cast<std::size_t>(T * E), false);
  for (std::int64_t e = 0; e < E; ++e) {
    const auto order = ranked_tokens(S, T, E, e);
    for (std::int64_t c = 0; c < C; ++c) chosen[static_cast<std::size_t>(order[static_cast<std::size_t>(c)] * E + e)] = true;
  }
  return chosen;
}

// Smallest gap, over experts, between the C-th and (C+1)-th largest score of the expert's column
// (infinite when C = T: nothing can swap in).
double min_capacity_gap(const std::vector<double>& S, std::int64_t T, std::int64_t E, std::int64_t C) {
  double gap = 1e300;
  if (C >= T) return gap;
  for (std::int64_t e = 0; e < E; ++e) {
    const auto order = ranked_tokens(S, T, E, e);
    gap = std::min(gap, S[static_cast<std::size_t>(order[static_cast<std::size_t>(C - 1)] * E + e)] -
                            S[static_cast<std::size_t>(order[static_cast<std::size_t>(C)] * E + e)]);
  }
  return gap;
}

MoEConfig f64_config(std::int64_t d, std::int64_t E, std::int64_t k, std::int64_t f, bool bias = false) {
  MoEConfig c;
  c.d = d;
  c.experts = E;
  c.k = k;
  c.ffn = f;
  c.bias = bias;
  c.dtype = DType::Float64;
  c.router = "expert-choice";
  return c;
}

}  // namespace

TEST_CASE("expert choice: capacity formula, clamped to [1, T]") {
  CHECK(expert_choice_capacity(10, 4, 1, 1.0) == 3);    // ceil(2.5)
  CHECK(expert_choice_capacity(10, 4, 2, 1.0) == 5);    // 20 / 4
  CHECK(expert_choice_capacity(16, 4, 1, 2.0) == 8);    // EC-CF2
  CHECK(expert_choice_capacity(10, 4, 1, 0.01) == 1);   // ceil(0.025) = 1
  CHECK(expert_choice_capacity(10, 4, 2, 10.0) == 10);  // 50 -> T
  CHECK(expert_choice_capacity(1, 8, 2, 1.0) == 1);
}

TEST_CASE("expert choice: each expert takes exactly its top-C tokens; gates are the softmax probabilities") {
  struct Case {
    std::int64_t T, E, k;
    double cf;
    bool bias;
  };
  for (const Case c : {Case{10, 4, 1, 1.0, false}, Case{10, 4, 2, 1.0, true}, Case{12, 3, 1, 0.5, false},
                       Case{7, 5, 3, 1.0, true}, Case{9, 4, 2, 3.0, false}, Case{6, 6, 1, 0.1, true}}) {
    CAPTURE(c.T);
    CAPTURE(c.E);
    CAPTURE(c.k);
    CAPTURE(c.cf);
    CAPTURE(c.bias);
    const std::int64_t d = 5, T = c.T, E = c.E;
    Generator gen(static_cast<std::uint64_t>(100 + T * E + c.k));
    auto r = std::dynamic_pointer_cast<ExpertChoiceRouter>(make_router(
        "expert-choice",
        config(d, E, c.k, {{"capacity_factor", std::to_string(c.cf)}, {"bias", c.bias ? "true" : "false"}}), gen));
    REQUIRE(r != nullptr);
    if (c.bias) set_values(r->bias(), normal({E}, 0, 0.5, gen, DType::Float64));
    const Tensor x = normal({T, d}, 0, 1.5, gen, DType::Float64);
    const RoutingPlan plan = r->route(Variable(x));

    const std::int64_t C = expert_choice_capacity(T, E, c.k, c.cf);
    CHECK(C == std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(c.cf * T * c.k / E)), 1, T));
    REQUIRE(plan.experts.shape() == Shape({T, E}));
    REQUIRE(plan.gates.shape() == Shape({T, E}));
    CHECK(plan.aux_losses.empty());
    CHECK(plan.tokens_per_expert.to_vector<std::int32_t>() ==
          std::vector<std::int32_t>(static_cast<std::size_t>(E), static_cast<std::int32_t>(C)));

    const auto S = host_scores(x, r->weight().data(), c.bias ? r->bias().data() : Tensor());
    const auto want = hand_choice(S, T, E, C);
    const auto ex = plan.experts.to_vector<std::int32_t>();
    const auto g = to_doubles(plan.gates.data());
    std::vector<std::int64_t> per_expert(static_cast<std::size_t>(E), 0);
    std::int64_t unrouted = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      bool routed = false;
      for (std::int64_t e = 0; e < E; ++e) {
        const std::size_t a = static_cast<std::size_t>(t * E + e);
        CHECK(ex[a] == (want[a] ? e : kUnusedSlot));
        CHECK(std::abs(g[a] - (want[a] ? S[a] : 0.0)) < kTol);
        if (ex[a] >= 0) ++per_expert[static_cast<std::size_t>(e)];
        routed = routed || want[a];
      }
      unrouted += routed ? 0 : 1;
    }
    for (std::int64_t e = 0; e < E; ++e) CHECK(per_expert[static_cast<std::size_t>(e)] == C);

    double H = 0;
    for (double p : S) H -= p * std::log(p) / static_cast<double>(T);
    CHECK(plan.metrics().at("capacity") == static_cast<double>(C));
    CHECK(std::abs(plan.metrics().at("router_entropy") - H) < kTol);
    CHECK(plan.metrics().at("unrouted_fraction") == doctest::Approx(static_cast<double>(unrouted) / T).epsilon(1e-15));
    CHECK(plan.metrics().at("mean_experts_per_token") ==
          doctest::Approx(static_cast<double>(E * C) / T).epsilon(1e-15));
  }
}

TEST_CASE("expert choice: ties go to the lower token index") {
  SUBCASE("designed ties between rows") {
    // W = I (d = E = 2), so the logits are the rows of x. Tokens 1, 2 and 4 tie at the top of
    // expert 0's column; tokens 3 and 5 at the top of expert 1's. C = ceil(0.5 * 6 / 2) = 2.
    Generator gen(0);
    auto r = std::dynamic_pointer_cast<ExpertChoiceRouter>(
        make_router("expert-choice", config(2, 2, 1, {{"capacity_factor", "0.5"}}), gen));
    set_values(r->weight(), from_vector(std::vector<double>{1, 0, 0, 1}, {2, 2}));
    const Tensor x = from_vector(std::vector<double>{0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1}, {6, 2});
    const RoutingPlan plan = r->route(Variable(x));
    // The test relies on bitwise-equal scores for equal rows; check that first (with C = T every
    // gate is its score).
    ExpertChoiceOptions all;
    all.capacity_factor = 100;
    const auto g_all = to_doubles(expert_choice_route(Variable(x), r->weight(), Variable(), 1, all).gates.data());
    REQUIRE(g_all[2] == g_all[4]);
    REQUIRE(g_all[2] == g_all[8]);
    REQUIRE(g_all[7] == g_all[11]);
    // expert 0 takes tokens 1, 2 (not 4); expert 1 takes tokens 3, 5.
    CHECK(plan.experts.to_vector<std::int32_t>() ==
          std::vector<std::int32_t>{-2, -2, 0, -2, 0, -2, -2, 1, -2, -2, -2, 1});
    CHECK(plan.metrics().at("unrouted_fraction") == doctest::Approx(2.0 / 6));  // tokens 0 and 4
  }
  SUBCASE("all scores equal (x = 0): every expert takes tokens 0 .. C-1") {
    Generator gen(1);
    auto r = make_router("expert-choice", config(3, 4, 2), gen);  // C = ceil(5 * 2 / 4) = 3
    const RoutingPlan plan = r->route(Variable(zeros({5, 3}, DType::Float64)));
    const auto ex = plan.experts.to_vector<std::int32_t>();
    for (std::int64_t t = 0; t < 5; ++t)
      for (std::int64_t e = 0; e < 4; ++e) CHECK(ex[static_cast<std::size_t>(t * 4 + e)] == (t < 3 ? e : kUnusedSlot));
    const auto g = to_doubles(plan.gates.data());
    for (std::int64_t a = 0; a < 20; ++a) CHECK(g[static_cast<std::size_t>(a)] == (a < 12 ? 0.25 : 0.0));
    CHECK(plan.metrics().at("unrouted_fraction") == doctest::Approx(2.0 / 5));
  }
}

TEST_CASE("expert choice: the MoE layer equals a per-expert loop (float64, 1e-12)") {
  for (bool bias : {false, true}) {
    for (double cf : {1.0, 0.4, 2.0}) {
      CAPTURE(bias);  // the router's bias and the experts' biases
      CAPTURE(cf);
      Generator gen(21);
      const std::int64_t d = 5, E = 4, k = 2, f = 7;
      MoEConfig c = f64_config(d, E, k, f, bias);
      c.router_options = {{"capacity_factor", std::to_string(cf)}};
      if (bias) c.router_options["bias"] = "true";
      MoELayer moe(c, gen);
      if (bias) set_values(moe.router().parameter("bias"), normal({E}, 0, 0.3, gen, DType::Float64));
      const Tensor x = normal({2, 5, d}, 0, 1, gen, DType::Float64);
      const std::int64_t T = 10, C = expert_choice_capacity(T, E, k, cf);
      const Variable y = moe.forward(Variable(x));
      CHECK(y.shape() == x.shape());
      CHECK(moe.last_tokens_per_expert().to_vector<std::int32_t>() ==
            std::vector<std::int32_t>(static_cast<std::size_t>(E), static_cast<std::int32_t>(C)));

      // The loop: for every expert, for every token it chose (by hand), add S[t, e] * expert_e(x_t).
      const Tensor xf = x.reshape({T, d});
      const Tensor b = bias ? moe.router().parameter("bias").data() : Tensor();
      const auto S = host_scores(xf, moe.router().parameter("weight").data(), b);
      const auto chosen = hand_choice(S, T, E, C);
      const auto xv = to_doubles(xf), w_in = to_doubles(moe.experts().w_in().data()),
                 w_out = to_doubles(moe.experts().w_out().data());
      // Expert biases b_in: [E, f], b_out: [E, d] (with `bias`, besides the router's bias).
      const auto b_in = bias ? to_doubles(moe.experts().b_in().data()) : std::vector<double>(E * f, 0.0);
      const auto b_out = bias ? to_doubles(moe.experts().b_out().data()) : std::vector<double>(E * d, 0.0);
      std::vector<double> want(static_cast<std::size_t>(T * d), 0.0);
      std::vector<bool> routed(static_cast<std::size_t>(T), false);
      for (std::int64_t e = 0; e < E; ++e)
        for (std::int64_t t = 0; t < T; ++t) {
          if (!chosen[static_cast<std::size_t>(t * E + e)]) continue;
          routed[static_cast<std::size_t>(t)] = true;
          std::vector<double> h(static_cast<std::size_t>(f), 0.0);
          for (std::int64_t j = 0; j < f; ++j) {
            double s = b_in[static_cast<std::size_t>(e * f + j)];
            for (std::int64_t i = 0; i < d; ++i)
              s += xv[static_cast<std::size_t>(t * d + i)] * w_in[static_cast<std::size_t>((e * d + i) * f + j)];
            h[static_cast<std::size_t>(j)] = std::max(s, 0.0);
          }
          for (std::int64_t o = 0; o < d; ++o) {
            double s = b_out[static_cast<std::size_t>(e * d + o)];
            for (std::int64_t j = 0; j < f; ++j)
              s += h[static_cast<std::size_t>(j)] * w_out[static_cast<std::size_t>((e * f + j) * d + o)];
            want[static_cast<std::size_t>(t * d + o)] += S[static_cast<std::size_t>(t * E + e)] * s;
          }
        }
      CHECK(max_error(y.data(), want) <= 1e-12);
      // A token no expert chose contributes exactly 0 (cf 0.4: C = 2, 8 choices for 10 tokens).
      const auto yv = to_doubles(y.data());
      std::int64_t unrouted = 0;
      for (std::int64_t t = 0; t < T; ++t)
        if (!routed[static_cast<std::size_t>(t)]) {
          ++unrouted;
          for (std::int64_t o = 0; o < d; ++o) CHECK(yv[static_cast<std::size_t>(t * d + o)] == 0.0);
        }
      if (cf == 0.4) CHECK(unrouted >= 2);
      CHECK(moe.last_metrics().at("unrouted_fraction") == doctest::Approx(static_cast<double>(unrouted) / T));
    }
  }
}

TEST_CASE("expert choice: gradcheck of the gates w.r.t. x, weight and bias (float64)") {
  const std::int64_t T = 8, d = 4, E = 4;
  for (std::int64_t k : {1, 2}) {
    for (double cf : {1.0, 0.5}) {
      CAPTURE(k);
      CAPTURE(cf);
      const std::int64_t C = expert_choice_capacity(T, E, k, cf);
      REQUIRE(C < T);  // the selection matters
      Generator gen(static_cast<std::uint64_t>(31 + 10 * k + static_cast<int>(cf * 4)));
      Tensor x, w, b;
      // Draw until every expert's C-th and (C+1)-th scores are at least 1e-3 apart (far outside
      // the 1e-6 finite-difference step), so the selection is constant inside the check.
      for (int tries = 0; tries < 100; ++tries) {
        x = normal({T, d}, 0, 1, gen, DType::Float64);
        w = normal({E, d}, 0, 1, gen, DType::Float64);
        b = normal({E}, 0, 0.5, gen, DType::Float64);
        if (min_capacity_gap(host_scores(x, w, b), T, E, C) > 1e-3) break;
      }
      REQUIRE(min_capacity_gap(host_scores(x, w, b), T, E, C) > 1e-3);
      ExpertChoiceOptions o;
      o.capacity_factor = cf;
      const GradcheckResult with_bias = gradcheck(
          [&](const V& v) { return reshape(expert_choice_route(v[0], v[1], v[2], k, o).gates, {T * E}); }, {x, w, b});
      CHECK_MESSAGE(with_bias.ok, with_bias.report);
      const GradcheckResult no_bias = gradcheck(
          [&](const V& v) { return reshape(expert_choice_route(v[0], v[1], Variable(), k, o).gates, {T * E}); },
          {x, w});
      CHECK_MESSAGE(no_bias.ok, no_bias.report);
    }
  }
  // The gates carry a nonzero gradient to the weight.
  Generator gen(5);
  Variable wv(normal({E, d}, 0, 1, gen, DType::Float64), true);
  const Tensor x = normal({T, d}, 0, 1, gen, DType::Float64);
  sum(expert_choice_route(Variable(x), wv, Variable(), 1, ExpertChoiceOptions{}).gates *
      Variable(normal({T, E}, 0, 1, gen, DType::Float64)))
      .backward();
  REQUIRE(wv.grad().defined());
  const auto gw = to_doubles(wv.grad());
  CHECK(std::any_of(gw.begin(), gw.end(), [](double g) { return std::abs(g) > 1e-6; }));
}

TEST_CASE("expert choice: MoE layer gradcheck in float64, x and every parameter") {
  for (bool bias : {false, true}) {
    INFO("bias ", bias);
    Generator gen(41);
    const std::int64_t d = 4, E = 4, k = 1, T = 6;
    MoEConfig c = f64_config(d, E, k, 5, bias);
    if (bias) c.router_options = {{"bias", "true"}};
    MoELayer moe(c, gen);
    set_values(moe.router().parameter("weight"), normal({E, d}, 0, 2.0, gen, DType::Float64));
    if (bias) set_values(moe.router().parameter("bias"), normal({E}, 0, 0.1, gen, DType::Float64));
    const std::int64_t C = expert_choice_capacity(T, E, k, 1.0);  // 2 of 6 tokens per expert
    auto gap = [&](const Tensor& x) {
      const Tensor b = bias ? moe.router().parameter("bias").data() : Tensor();
      return min_capacity_gap(host_scores(x.reshape({T, d}), moe.router().parameter("weight").data(), b), T, E, C);
    };
    Tensor x = normal({2, 3, d}, 0, 1, gen, DType::Float64);
    for (int tries = 0; tries < 100 && gap(x) <= 1e-3; ++tries) x = normal({2, 3, d}, 0, 1, gen, DType::Float64);
    REQUIRE(gap(x) > 1e-3);
    const GradcheckResult r = gradcheck([&](const V& v) { return moe.forward(v[0]); }, {x});
    CHECK_MESSAGE(r.ok, r.report);
    std::int64_t checked = 0;
    const std::string report = check_parameters(moe, [&] { return moe.forward(Variable(x)); }, checked);
    CHECK_MESSAGE(report.empty(), report);
    CHECK(checked == moe.num_parameters());
  }
}

TEST_CASE("expert choice: the registry builds it by name; bad options name the key") {
  Generator gen(0);
  const auto names = router_names();
  CHECK(std::find(names.begin(), names.end(), "expert-choice") != names.end());
  auto r = make_router("expert-choice", config(4, 3, 2, {{"bias", "true"}, {"capacity_factor", "1.5"}}), gen);
  auto* ec = dynamic_cast<ExpertChoiceRouter*>(r.get());
  REQUIRE(ec != nullptr);
  CHECK(ec->options().capacity_factor == 1.5);
  CHECK(ec->options().bias);
  CHECK(r->k() == 2);
  CHECK(r->experts() == 3);
  const auto named = r->named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "weight");
  CHECK(named[0].second.shape() == Shape({3, 4}));
  CHECK(named[1].first == "bias");
  CHECK(named[1].second.shape() == Shape({3}));
  CHECK(make_router("expert-choice", config(4, 3, 1), gen)->named_parameters().size() == 1);

  const std::string unknown = error_of([&] { make_router("expert-choice", config(4, 4, 1, {{"capcity_factor", "2"}}), gen); });
  CHECK(unknown.find("capcity_factor") != std::string::npos);
  CHECK(unknown.find("'capacity_factor'") != std::string::npos);  // lists the known ones
  // A top-k option is not an expert-choice option.
  CHECK(error_of([&] { make_router("expert-choice", config(4, 4, 1, {{"load_balance", "0.01"}}), gen); })
            .find("load_balance") != std::string::npos);
  for (const std::string bad : {"0", "-1", "abc", "inf", ""}) {
    CAPTURE(bad);
    const std::string msg =
        error_of([&] { make_router("expert-choice", config(4, 4, 1, {{"capacity_factor", bad}}), gen); });
    CHECK(msg.find("capacity_factor") != std::string::npos);
  }
  const std::string bad_bias = error_of([&] { make_router("expert-choice", config(4, 4, 1, {{"bias", "yes"}}), gen); });
  CHECK(bad_bias.find("bias") != std::string::npos);
  CHECK(bad_bias.find("yes") != std::string::npos);
  CHECK(!error_of([&] { make_router("expert-choice", config(4, 4, 5), gen); }).empty());  // k > E
  CHECK(!error_of([&] { r->route(Variable(zeros({3, 5}, DType::Float64))); }).empty());   // wrong d
  // Through the MoE layer's config.
  MoEConfig c = f64_config(4, 4, 1, 4);
  c.router_options = {{"gates", "softmax-topk"}};
  CHECK(error_of([&] { MoELayer moe(c, gen); }).find("gates") != std::string::npos);
}
