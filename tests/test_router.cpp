// tests/test_router.cpp — the Router registry and the token-choice top-k router: gate modes
// against hand computation, tie-breaking, counting, capacity and token-order dropping, the
// load-balance and z-losses, option errors, a router registered from outside nn/, and gradcheck
// in float64 of gates and aux losses with respect to x, the weight and the bias.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/router.h"
#include "nn/moe/top_k_router.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::to_doubles;
using moelab::testing::error_of;

namespace {

constexpr double kTol = 1e-12;

// Host logits x W^T for float64 x: [T, d], W: [E, d].
std::vector<double> host_logits(const Tensor& x, const Tensor& w) {
  const auto xv = to_doubles(x), wv = to_doubles(w);
  const std::int64_t T = x.size(0), d = x.size(1), E = w.size(0);
  std::vector<double> l(T * E, 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t i = 0; i < d; ++i) l[t * E + e] += xv[t * d + i] * wv[e * d + i];
  return l;
}

std::vector<double> softmax_row(const std::vector<double>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  std::vector<double> out(v.size());
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += (out[i] = std::exp(v[i] - m));
  for (double& o : out) o /= s;
  return out;
}

RouterConfig config(std::int64_t d, std::int64_t E, std::int64_t k, std::map<std::string, std::string> options = {}) {
  return RouterConfig{d, E, k, DType::Float64, std::move(options)};
}

// Overwrites the router's weight in place (the parameter's storage is shared with the module).
void set_weight(const TopKRouter& r, const Tensor& values) {
  Variable w = r.weight();
  kernels::copy(w.data(), values);
}

// A tiny scheme registered from the test file: token t goes to expert t mod E with gate 1.
class FixedRouter : public Router {
 public:
  FixedRouter(const RouterConfig& c) : Router(c.d, c.experts, 1, "FixedRouter") {}
  RoutingPlan route(const Variable& x) override {
    check_input(x, "FixedRouter");
    const std::int64_t T = x.size(0);
    std::vector<std::int32_t> ids(T), counts(experts(), 0);
    for (std::int64_t t = 0; t < T; ++t) ++counts[ids[t] = static_cast<std::int32_t>(t % experts())];
    RoutingPlan plan;
    plan.experts = from_vector(ids, {T, 1});
    plan.gates = Variable(ones({T, 1}, x.dtype()));
    plan.tokens_per_expert = from_vector(counts, {experts()});
    plan.metrics = [] { return std::map<std::string, double>{{"dropped_fraction", 0.0}}; };
    return plan;
  }
};

}  // namespace

TEST_CASE("topk router: renormalised gates sum to 1 and counts sum to T*k") {
  Generator gen(3);
  auto r = make_router("topk", config(6, 8, 3), gen);
  Tensor x = normal({10, 6}, 0, 1, gen, DType::Float64);
  RoutingPlan plan = r->route(Variable(x));
  CHECK(plan.gates.shape() == Shape({10, 3}));
  const auto g = to_doubles(plan.gates.data());
  for (int t = 0; t < 10; ++t) CHECK(std::abs(g[t * 3] + g[t * 3 + 1] + g[t * 3 + 2] - 1.0) < kTol);
  const auto counts = plan.tokens_per_expert.to_vector<std::int32_t>();
  CHECK(counts.size() == 8);
  CHECK(std::accumulate(counts.begin(), counts.end(), 0) == 30);
  const auto ids = plan.experts.to_vector<std::int32_t>();
  CHECK(std::all_of(ids.begin(), ids.end(), [](int e) { return e >= 0 && e < 8; }));
  CHECK(plan.metrics().at("dropped_fraction") == 0.0);
  CHECK(plan.aux_losses.empty());  // both coefficients default to 0
  // Router entropy against the host softmax.
  auto* tk = dynamic_cast<TopKRouter*>(r.get());
  REQUIRE(tk != nullptr);
  const auto l = host_logits(x, tk->weight().data());
  double H = 0;
  for (int t = 0; t < 10; ++t) {
    const auto p = softmax_row(std::vector<double>(l.begin() + t * 8, l.begin() + t * 8 + 8));
    for (double pe : p) H -= pe * std::log(pe) / 10;
  }
  CHECK(std::abs(plan.metrics().at("router_entropy") - H) < 1e-12);
}

TEST_CASE("topk router: gate modes against hand computation") {
  Generator gen(5);
  const std::int64_t T = 7, d = 5, E = 6, k = 2;
  Tensor x = normal({T, d}, 0, 1, gen, DType::Float64);
  for (std::string mode : {"softmax-topk", "topk-softmax", "softmax-topk-renorm", "equal"}) {
    CAPTURE(mode);
    Generator g2(11);
    auto r = std::dynamic_pointer_cast<TopKRouter>(make_router("topk", config(d, E, k, {{"gates", mode}}), g2));
    RoutingPlan plan = r->route(Variable(x));
    const auto l = host_logits(x, r->weight().data());
    const auto ids = plan.experts.to_vector<std::int32_t>();
    const auto g = to_doubles(plan.gates.data());
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> row(l.begin() + t * E, l.begin() + (t + 1) * E);
      const auto p = softmax_row(row);
      // the chosen experts are the two largest logits, largest first
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
      CHECK(ids[t * k] == order[0]);
      CHECK(ids[t * k + 1] == order[1]);
      const auto sel = softmax_row({row[order[0]], row[order[1]]});
      for (int j = 0; j < k; ++j) {
        double want = 0;
        if (mode == "softmax-topk") want = p[order[j]];
        if (mode == "topk-softmax") want = sel[j];
        if (mode == "softmax-topk-renorm") want = p[order[j]] / (p[order[0]] + p[order[1]]);
        if (mode == "equal") want = 0.5;
        CHECK(std::abs(g[t * k + j] - want) < kTol);
      }
    }
  }
}

TEST_CASE("topk router: ties go to the lower expert id") {
  Generator gen(1);
  auto r = std::dynamic_pointer_cast<TopKRouter>(make_router("topk", config(2, 5, 2), gen));
  // Experts 1 and 3 share the largest row, 2 and 4 the next: logits tie pairwise.
  std::vector<double> w = {0, 0, 2, 1, 1, 1, 2, 1, 1, 1};
  set_weight(*r, from_vector(w, {5, 2}));
  RoutingPlan plan = r->route(Variable(from_vector(std::vector<double>{1, 1, 2, 3}, {2, 2})));
  CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 3, 1, 3});
  // All logits equal (x = 0): experts 0 and 1.
  RoutingPlan zero = r->route(Variable(zeros({3, 2}, DType::Float64)));
  CHECK(zero.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, 1, 0, 1});
}

TEST_CASE("topk router: capacity is respected and drops happen in token order") {
  // Every token prefers expert 0, then expert 1 (logits 5 x0, x0, 0, -x0 with x0 > 0).
  const std::int64_t T = 8, E = 4;
  std::vector<double> xv;
  for (int t = 0; t < T; ++t) xv.insert(xv.end(), {1.0 + 0.1 * t, 0.0});
  const Variable x(from_vector(xv, {T, 2}));
  const std::vector<double> w = {5, 0, 1, 0, 0, 0, -1, 0};
  SUBCASE("k = 1: C = ceil(1.0 * 8 / 4) = 2, tokens 0 and 1 keep expert 0") {
    Generator gen(0);
    auto r = std::dynamic_pointer_cast<TopKRouter>(make_router("topk", config(2, E, 1, {{"capacity_factor", "1"}, {"gates", "softmax-topk-renorm"}, {"allow_constant_gates", "true"}}), gen));
    set_weight(*r, from_vector(w, {E, 2}));
    RoutingPlan plan = r->route(x);
    CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0, -1, -1, -1, -1, -1, -1});
    const auto g = to_doubles(plan.gates.data());
    CHECK(g[0] == 1.0);  // k = 1 renormalised
    for (int t = 2; t < T; ++t) CHECK(g[t] == 0.0);
    CHECK(plan.tokens_per_expert.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 0, 0, 0});
    CHECK(plan.metrics().at("dropped_fraction") == doctest::Approx(6.0 / 8));
    CHECK(plan.metrics().at("capacity") == 2.0);
  }
  SUBCASE("k = 2: C = ceil(1.0 * 16 / 4) = 4, tokens 0-3 keep both, tokens 4-7 lose both") {
    Generator gen(0);
    auto r = std::dynamic_pointer_cast<TopKRouter>(
        make_router("topk", config(2, E, 2, {{"capacity_factor", "1.0"}, {"gates", "softmax-topk"}}), gen));
    set_weight(*r, from_vector(w, {E, 2}));
    RoutingPlan plan = r->route(x);
    std::vector<std::int32_t> want;
    for (int t = 0; t < T; ++t) {
      want.push_back(t < 4 ? 0 : -1);
      want.push_back(t < 4 ? 1 : -1);
    }
    CHECK(plan.experts.to_vector<std::int32_t>() == want);
    const auto counts = plan.tokens_per_expert.to_vector<std::int32_t>();
    CHECK(counts == std::vector<std::int32_t>{4, 4, 0, 0});
    const auto g = to_doubles(plan.gates.data());
    for (int a = 8; a < 16; ++a) CHECK(g[a] == 0.0);
    for (int a = 0; a < 8; ++a) CHECK(g[a] > 0.0);
  }
  SUBCASE("a large capacity factor drops nothing") {
    Generator gen(0);
    auto r = std::dynamic_pointer_cast<TopKRouter>(make_router("topk", config(2, E, 1, {{"capacity_factor", "4"}, {"gates", "softmax-topk"}}), gen));
    set_weight(*r, from_vector(w, {E, 2}));
    RoutingPlan plan = r->route(x);
    CHECK(plan.tokens_per_expert.to_vector<std::int32_t>() == std::vector<std::int32_t>{8, 0, 0, 0});
    CHECK(plan.metrics().at("dropped_fraction") == 0.0);
  }
}

TEST_CASE("topk router: load-balance and z-loss against hand computation") {
  // W = I (d = E = 3), so the logits are the rows of x.
  const std::vector<std::vector<double>> L = {{1, 0, 0}, {0, 2, 0}, {0.5, 0, 0}, {0, 0, 0.7}};
  std::vector<double> xv;
  for (const auto& row : L) xv.insert(xv.end(), row.begin(), row.end());
  Generator gen(0);
  auto r = std::dynamic_pointer_cast<TopKRouter>(
      make_router("topk", config(3, 3, 1, {{"load_balance", "0.01"}, {"z_loss", "0.001"}, {"gates", "softmax-topk"}}),
                  gen));
  set_weight(*r, from_vector(std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}));
  RoutingPlan plan = r->route(Variable(from_vector(xv, {4, 3})));
  // top-1: experts 0, 1, 0, 2 -> f = (2/4, 1/4, 1/4)
  CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, 2});
  const double f[3] = {0.5, 0.25, 0.25};
  double P[3] = {0, 0, 0}, z = 0;
  for (const auto& row : L) {
    double s = 0;
    for (double v : row) s += std::exp(v);
    for (int e = 0; e < 3; ++e) P[e] += std::exp(row[e]) / s / 4;
    z += std::log(s) * std::log(s) / 4;
  }
  const double lb = 3 * (f[0] * P[0] + f[1] * P[1] + f[2] * P[2]);
  REQUIRE(plan.aux_losses.size() == 2);
  CHECK(plan.aux_losses[0].first == "load_balance");
  CHECK(plan.aux_losses[1].first == "z_loss");
  CHECK(std::abs(plan.aux_losses[0].second.data().item<double>() - 0.01 * lb) < kTol);
  CHECK(std::abs(plan.aux_losses[1].second.data().item<double>() - 0.001 * z) < kTol);
  CHECK(std::abs(plan.metrics().at("load_balance_raw") - lb) < kTol);
  CHECK(std::abs(plan.metrics().at("z_loss_raw") - z) < kTol);
}

TEST_CASE("topk router: parameters, bias option, jitter only in training mode") {
  Generator gen(2);
  auto r = make_router("topk", config(4, 3, 1, {{"bias", "true"}, {"jitter", "0.1"}, {"jitter_seed", "7"},
                                                  {"allow_constant_gates", "true"}}),
                       gen);
  const auto named = r->named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "weight");
  CHECK(named[0].second.shape() == Shape({3, 4}));
  CHECK(named[1].first == "bias");
  CHECK(named[1].second.shape() == Shape({3}));
  Tensor x = normal({6, 4}, 0, 1, gen, DType::Float64);
  // k = 1 gates are all 1, so the noise is seen through the logits' z-loss metric.
  const double z_train1 = r->route(Variable(x)).metrics().at("z_loss_raw");
  const double z_train2 = r->route(Variable(x)).metrics().at("z_loss_raw");
  r->eval();
  const double z_eval1 = r->route(Variable(x)).metrics().at("z_loss_raw");
  const double z_eval2 = r->route(Variable(x)).metrics().at("z_loss_raw");
  CHECK(z_train1 != z_train2);  // fresh noise each call
  CHECK(z_eval1 == z_eval2);    // no noise in evaluation
  CHECK(z_train1 != z_eval1);
}

TEST_CASE("topk router: k = 1 with gates that are always 1 is refused unless asked for, saying why") {
  // With k = 1, softmax-topk-renorm and topk-softmax give every token the gate p/p = 1: the task
  // loss then sends the router exactly zero gradient (the shared-top1 scheme of `moelab routers`
  // trained that way, with a router that never moved).
  Generator gen(0);
  for (const char* gates : {"softmax-topk-renorm", "topk-softmax"}) {
    INFO("gates ", gates);
    const std::string why = error_of([&] { make_router("topk", config(4, 4, 1, {{"gates", gates}}), gen); });
    CHECK(why.find("no gradient") != std::string::npos);
    CHECK(why.find("allow_constant_gates") != std::string::npos);
    CHECK(why.find("softmax-topk") != std::string::npos);
    CHECK(error_of([&] {
            make_router("topk", config(4, 4, 1, {{"gates", gates}, {"allow_constant_gates", "true"}}), gen);
          }).empty());
    CHECK(error_of([&] { make_router("topk", config(4, 4, 2, {{"gates", gates}}), gen); }).empty());
  }
  CHECK(error_of([&] { make_router("topk", config(4, 4, 1, {{"gates", "softmax-topk"}}), gen); }).empty());
  // Every default builds: at k = 1 the default gates are Switch's p_t,e (softmax-topk), which
  // gives the router a gradient; at k = 2 Mixtral's renormalised ones.
  auto r = make_router("topk", config(4, 4, 1), gen);
  CHECK(std::dynamic_pointer_cast<TopKRouter>(r)->options().gates == GateMode::SoftmaxTopk);
  CHECK(std::dynamic_pointer_cast<TopKRouter>(make_router("topk", config(4, 4, 2), gen))->options().gates ==
        GateMode::SoftmaxTopkRenorm);
  const Variable x(normal({5, 4}, 0, 1, gen, DType::Float64));
  sum(r->route(x).gates * Variable(normal({5, 1}, 0, 1, gen, DType::Float64))).backward();
  double norm = 0;
  for (const auto& p : r->parameters())
    for (double g : to_doubles(p.grad())) norm += g * g;
  CHECK(norm > 0.0);
}

TEST_CASE("router registry: built-ins, errors naming what is wrong, a scheme registered outside nn/") {
  Generator gen(0);
  const auto names = router_names();
  CHECK(std::find(names.begin(), names.end(), "topk") != names.end());
  CHECK(make_router("topk", config(4, 4, 2), gen)->k() == 2);

  const std::string unknown = error_of([&] { make_router("no-such-router", config(4, 4, 1), gen); });
  CHECK(unknown.find("no-such-router") != std::string::npos);
  CHECK(unknown.find("'topk'") != std::string::npos);

  const std::string bad_key = error_of([&] { make_router("topk", config(4, 4, 1, {{"temprature", "2"}}), gen); });
  CHECK(bad_key.find("temprature") != std::string::npos);
  CHECK(bad_key.find("capacity_factor") != std::string::npos);  // lists the known ones
  const std::string bad_gate = error_of([&] { make_router("topk", config(4, 4, 1, {{"gates", "sofmax"}}), gen); });
  CHECK(bad_gate.find("sofmax") != std::string::npos);
  const std::string bad_num = error_of([&] { make_router("topk", config(4, 4, 1, {{"z_loss", "1e-3x"}}), gen); });
  CHECK(bad_num.find("z_loss") != std::string::npos);
  CHECK(bad_num.find("1e-3x") != std::string::npos);
  CHECK(!error_of([&] { make_router("topk", config(4, 4, 1, {{"load_balance", "-1"}}), gen); }).empty());
  CHECK(!error_of([&] { make_router("topk", config(4, 4, 5), gen); }).empty());  // k > E
  auto r = make_router("topk", config(4, 4, 2), gen);
  CHECK(!error_of([&] { r->route(Variable(zeros({3, 5}, DType::Float64))); }).empty());  // wrong d

  static bool registered = false;  // doctest may run this case once; keep the registration single
  if (!registered) {
    register_router("fixed", [](const RouterConfig& c, Generator&) { return std::make_shared<FixedRouter>(c); });
    registered = true;
  }
  CHECK(!error_of([] { register_router("fixed", [](const RouterConfig& c, Generator&) {
                         return std::make_shared<FixedRouter>(c); }); }).empty());  // duplicate name
  for (const char* bad : {"a,b", "x/y", "top k", "k:v", "a=b", ""})  // unsafe in file names, CSV or --set
    CHECK(!error_of([bad] { register_router(bad, [](const RouterConfig& c, Generator&) {
                              return std::make_shared<FixedRouter>(c); }); }).empty());
  auto fixed = make_router("fixed", config(4, 3, 1), gen);
  RoutingPlan plan = fixed->route(Variable(zeros({5, 4}, DType::Float64)));
  CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 2, 0, 1});
  CHECK(plan.tokens_per_expert.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 2, 1});
  const auto all = router_names();
  CHECK(std::find(all.begin(), all.end(), "fixed") != all.end());
}

TEST_CASE("topk router: gradcheck of gates and aux losses w.r.t. x, weight and bias (float64)") {
  const std::int64_t T = 6, d = 4, E = 5, k = 2;
  Generator gen(42);
  Tensor x = normal({T, d}, 0, 1, gen, DType::Float64);
  Tensor w = normal({E, d}, 0, 1, gen, DType::Float64);
  Tensor b = normal({E}, 0, 0.5, gen, DType::Float64);
  // A clear gap between the k-th and (k+1)-th logit of every token, so the selection cannot flip
  // under the finite-difference step.
  {
    const auto l = host_logits(x, w);
    const auto bv = b.to_vector<double>();
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> row(E);
      for (std::int64_t e = 0; e < E; ++e) row[e] = l[t * E + e] + bv[e];
      std::sort(row.rbegin(), row.rend());
      REQUIRE(row[k - 1] - row[k] > 1e-3);
    }
  }
  for (GateMode mode : {GateMode::SoftmaxTopkRenorm, GateMode::SoftmaxTopk, GateMode::TopkSoftmax, GateMode::Equal}) {
    for (double cf : {0.0, 0.5}) {  // 0.5: C = ceil(0.5 * 12 / 5) = 2 < 12 / 5, so some drop
      CAPTURE(gate_mode_name(mode));
      CAPTURE(cf);
      TopKRouterOptions o;
      o.gates = mode;
      o.load_balance = 0.3;
      o.z_loss = 0.2;
      o.capacity_factor = cf;
      auto f = [&](const std::vector<Variable>& v) {
        RoutingPlan plan = top_k_route(v[0], v[1], v[2], k, o);
        std::vector<Variable> parts = {reshape(plan.gates, {T * k})};
        for (const auto& [name, loss] : plan.aux_losses) parts.push_back(reshape(loss, {1}));
        return concat(parts, 0);
      };
      const GradcheckResult r = gradcheck(f, {x, w, b});
      CHECK_MESSAGE(r.ok, r.report);
    }
  }
  // The gates carry gradient to the weight (not only the aux losses), except in "equal" mode.
  TopKRouterOptions o;
  Variable wv(w, true);
  sum(top_k_route(Variable(x), wv, Variable(), k, o).gates * Variable(normal({T, k}, 0, 1, gen, DType::Float64)))
      .backward();
  REQUIRE(wv.grad().defined());
  const auto gw = to_doubles(wv.grad());
  CHECK(std::any_of(gw.begin(), gw.end(), [](double g) { return std::abs(g) > 1e-6; }));
}

TEST_CASE("topk router: forced = balanced gives every expert the same load, whatever the scores") {
  Generator gen(3);
  auto r = make_router("topk", config(4, 4, 2, {{"forced", "balanced"}}), gen);
  const Tensor x = normal({12, 4}, 0, 1, gen, DType::Float64);
  const RoutingPlan plan = r->route(Variable(x));
  std::vector<std::int32_t> want;
  for (std::int32_t a = 0; a < 24; ++a) want.push_back(a % 4);
  CHECK(plan.experts.to_vector<std::int32_t>() == want);  // token t: experts 2t mod 4, 2t + 1 mod 4
  CHECK(plan.tokens_per_expert.to_vector<std::int32_t>() == std::vector<std::int32_t>{6, 6, 6, 6});
  // The gates are still the renormalised probabilities of those experts: the router learns.
  const std::vector<double> g = plan.gates.data().to_vector<double>();
  for (std::size_t t = 0; t < 12; ++t) CHECK(g[2 * t] + g[2 * t + 1] == doctest::Approx(1.0));
  CHECK_THROWS_AS(make_router("topk", config(4, 4, 2, {{"forced", "random"}}), gen), Error);
}

TEST_CASE("topk router: replay routes recorded experts, with gates from the current weights") {
  Generator gen(5);
  auto r = make_router("topk", config(6, 8, 2), gen);
  auto& topk = dynamic_cast<TopKRouter&>(*r);
  const Tensor x = normal({10, 6}, 0, 1, gen, DType::Float64);
  const Tensor recorded = r->route(Variable(x)).experts;
  // New weights: the router's own choice changes, the replayed one does not.
  Tensor w = topk.weight().data();  // shares the parameter's storage
  kernels::copy(w, normal({8, 6}, 0, 1, gen, DType::Float64));
  const Tensor own = r->route(Variable(x)).experts;
  CHECK(own.to_vector<std::int32_t>() != recorded.to_vector<std::int32_t>());
  topk.replay(recorded);
  CHECK(topk.replaying());
  const RoutingPlan replayed = r->route(Variable(x));
  CHECK(replayed.experts.to_vector<std::int32_t>() == recorded.to_vector<std::int32_t>());
  // Gates: softmax of x W^T under the new weights, at the recorded experts, renormalised.
  const std::vector<double> p = softmax(matmul(Variable(x), topk.weight(), false, true)).data().to_vector<double>();
  const std::vector<std::int32_t> ids = recorded.to_vector<std::int32_t>();
  const std::vector<double> g = replayed.gates.data().to_vector<double>();
  for (std::size_t t = 0; t < 10; ++t) {
    const double a = p[t * 8 + static_cast<std::size_t>(ids[2 * t])], b = p[t * 8 + static_cast<std::size_t>(ids[2 * t + 1])];
    CHECK(g[2 * t] == doctest::Approx(a / (a + b)).epsilon(1e-12));
    CHECK(g[2 * t + 1] == doctest::Approx(b / (a + b)).epsilon(1e-12));
  }
  // A batch of another size, a dropped slot, a token twice: refused.
  CHECK_THROWS_AS(r->route(Variable(normal({4, 6}, 0, 1, gen, DType::Float64))), Error);
  CHECK_THROWS_AS(topk.replay(from_vector(std::vector<std::int32_t>{0, -1}, {1, 2})), Error);
  CHECK_THROWS_AS(topk.replay(from_vector(std::vector<std::int32_t>{3, 3}, {1, 2})), Error);
  topk.stop_replay();
  CHECK(r->route(Variable(x)).experts.to_vector<std::int32_t>() == own.to_vector<std::int32_t>());
}

TEST_CASE("topk router: drop_order=probability ranks by the gates (Megatron's probs), checked by hand") {
  // T = 2 tokens, E = 3 experts, k = 2, capacity ceil(0.75 * 2 * 2 / 3) = 1. x is the identity, so
  // token t's logits are the column t of the weight: log-probabilities, softmax gives them back.
  //   token A: p = (.46, .44, .10): chooses 0, 1; renormalised gates .46/.90 = .511, .44/.90 = .489
  //   token B: p = (.40, .35, .25): chooses 0, 1; renormalised gates .40/.75 = .533, .35/.75 = .467
  // Expert 0 keeps one of A (p .46, gate .511) and B (p .40, gate .533): by the gates it keeps B
  // (ranking by the raw probability, as before, kept A). Expert 1 keeps A either way (.489 > .467).
  // With gates=softmax-topk (the gates are the raw probabilities, Megatron's pre-softmax) it keeps A.
  const std::vector<double> pa = {0.46, 0.44, 0.10}, pb = {0.40, 0.35, 0.25};
  std::vector<double> w(9, 0.0);  // [E, d]: w[e, 0] = log pa[e], w[e, 1] = log pb[e]
  for (int e = 0; e < 3; ++e) w[e * 3 + 0] = std::log(pa[e]), w[e * 3 + 1] = std::log(pb[e]);
  const Variable x(from_vector(std::vector<double>{1, 0, 0, 0, 1, 0}, {2, 3}));
  const Variable weight(from_vector(w, {3, 3}));
  TopKRouterOptions o;
  o.capacity_factor = 0.75;
  o.drop_order = CapacityOrder::Probability;
  const RoutingPlan renorm = top_k_route(x, weight, Variable(), 2, o);
  CHECK(renorm.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{kDroppedSlot, 1, 0, kDroppedSlot});
  const std::vector<double> g = renorm.gates.data().to_vector<double>();
  CHECK(g[1] == doctest::Approx(0.44 / 0.90));
  CHECK(g[2] == doctest::Approx(0.40 / 0.75));
  o.gates = GateMode::SoftmaxTopk;
  const RoutingPlan raw = top_k_route(x, weight, Variable(), 2, o);
  CHECK(raw.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, kDroppedSlot, kDroppedSlot});
}

TEST_CASE("topk router: MoE++ null experts leave the renormalisation (its released gating()), checked by hand") {
  // E = 2 real experts and N = 1 null one (id 2), k = 2. x is the identity, so token t's logits are
  // the weight's column t: log-probabilities, softmax gives them back.
  //   token A: p = (.5, 1/6, 1/3): chooses 0 and the null; MoE++ zeroes the null's .333 before
  //            renormalising: gate .5 / .5 = 1 (keeping it in the denominator gave .5 / .833 = .6)
  //   token B: p = (.5, .3, .2): chooses 0 and 1: gates .5 / .8 = .625 and .375, as without nulls
  const std::vector<double> pa = {0.5, 1.0 / 6.0, 1.0 / 3.0}, pb = {0.5, 0.3, 0.2};
  std::vector<double> w(9, 0.0);  // [E + N, d]: w[e, 0] = log pa[e], w[e, 1] = log pb[e]
  for (int e = 0; e < 3; ++e) w[e * 3 + 0] = std::log(pa[e]), w[e * 3 + 1] = std::log(pb[e]);
  const Variable x(from_vector(std::vector<double>{1, 0, 0, 0, 1, 0}, {2, 3}));
  const Variable weight(from_vector(w, {3, 3}));
  TopKRouterOptions o;
  o.null_experts = 1;
  const RoutingPlan plan = top_k_route(x, weight, Variable(), 2, o);
  CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, kUnusedSlot, 0, 1});
  const std::vector<double> g = plan.gates.data().to_vector<double>();
  CHECK(g[0] == doctest::Approx(1.0));
  CHECK(g[1] == 0.0);
  CHECK(g[2] == doctest::Approx(0.625));
  CHECK(g[3] == doctest::Approx(0.375));
  // With MoE++'s Mixtral gating (softmax over the k chosen logits) the null's share stays: .5 / .833.
  o.gates = GateMode::TopkSoftmax;
  CHECK(top_k_route(x, weight, Variable(), 2, o).gates.data().to_vector<double>()[0] == doctest::Approx(0.6));
  // A token whose k choices are all null gets no output (N = 2 nulls, k = 2; not 0 / 0).
  const Variable w2(from_vector(std::vector<double>{std::log(0.1), std::log(0.45), std::log(0.45)}, {3, 1}));
  TopKRouterOptions two;
  two.null_experts = 2;
  const RoutingPlan nulls = top_k_route(Variable(from_vector(std::vector<double>{1}, {1, 1})), w2, Variable(), 2, two);
  CHECK(nulls.gates.data().to_vector<double>() == std::vector<double>{0.0, 0.0});
}

TEST_CASE("a TopKRouter subclass that overrides route() alone is what the MoE layer calls, with its sequences") {
  // It counts its calls and keeps, from TopKRouter::route inside it, the per-sequence balance loss.
  struct Counting : TopKRouter {
    Counting(const RouterConfig& c, Generator& g, int* calls)
        : TopKRouter(c.d, c.experts, c.k, TopKRouterOptions{}, g, c.dtype), calls_(calls) {}
    RoutingPlan route(const Variable& x) override {
      ++*calls_;
      seen_length = current_sequence_length(x);
      return TopKRouter::route(x);
    }
    int* calls_;
    std::int64_t seen_length = 0;
  };
  static int calls = 0;
  static Counting* last = nullptr;
  static bool registered = false;
  if (!registered) {
    register_router("counting-topk", [](const RouterConfig& c, Generator& g) {
      auto r = std::make_shared<Counting>(c, g, &calls);
      last = r.get();
      return r;
    });
    registered = true;
  }
  Generator gen(5);
  MoEConfig mc;
  mc.d = 4, mc.experts = 4, mc.k = 2, mc.ffn = 3, mc.dtype = DType::Float64, mc.router = "counting-topk";
  MoELayer layer(mc, gen);
  calls = 0;
  layer.forward(Variable(normal({3, 5, 4}, 0.0, 1.0, gen, DType::Float64)));  // [B, S, d]: 3 sequences of 5
  CHECK(calls == 1);
  REQUIRE(last != nullptr);
  CHECK(last->seen_length == 5);
  // Called directly it is one sequence; the length of a layer call does not stay behind.
  last->route(Variable(normal({6, 4}, 0.0, 1.0, gen, DType::Float64)));
  CHECK(calls == 2);
  CHECK(last->seen_length == 6);
}
