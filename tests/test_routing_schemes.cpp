// tests/test_routing_schemes.cpp — what defines each newer routing scheme, on designed inputs
// (their contract clauses are in tests/test_router_contract.cpp):
//   top-p      tokens take experts until the mass reaches p; slots says how many; gates are p
//   aux-free   the bias moves against the load after each optimizer step (not in evaluation),
//              selects but never gates, and repeated updates flatten a skewed load
//   balanced   every expert exactly its share in training (T*k divisible or not), top-k in
//              evaluation; the greedy walk takes the best pair first
//   shared     DeepSeekMoE's shared experts: parameter names and the active count
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/moe/aux_free_router.h"
#include "nn/moe/balanced_assignment.h"
#include "nn/moe/balanced_router.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/router_toolkit.h"
#include "nn/moe/top_k_router.h"
#include "nn/moe/top_p_router.h"
#include "tasks/routers/router_schemes.h"
#include "tests/temp_dir.h"

using namespace moelab;

namespace {

RouterConfig config(std::int64_t d, std::int64_t E, std::int64_t k, std::map<std::string, std::string> options = {}) {
  return RouterConfig{d, E, k, DType::Float64, std::move(options)};
}
void set_values(Variable p, const Tensor& v) { kernels::copy(p.data(), v); }
Tensor identity(std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i * n + i)] = 1.0;
  return from_vector(v, {n, n});
}

// Host reference of top-2 routing for token t: the experts by decreasing logit x_t . w_e (ties to
// the lower id) and the two renormalised gates, p_a / (p_a + p_b) = 1 / (1 + exp(z_b - z_a)).
struct HostTop2 {
  std::vector<std::int64_t> order;
  double g0, g1;
};
HostTop2 host_top2(const std::vector<double>& xv, const std::vector<double>& wv, std::int64_t t, std::int64_t d,
                   std::int64_t experts) {
  std::vector<double> z(static_cast<std::size_t>(experts), 0.0);
  for (std::int64_t e = 0; e < experts; ++e)
    for (std::int64_t i = 0; i < d; ++i) z[e] += xv[t * d + i] * wv[e * d + i];
  std::vector<std::int64_t> order(static_cast<std::size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t u, std::int64_t v) { return z[u] > z[v]; });
  const double g0 = 1.0 / (1.0 + std::exp(z[order[1]] - z[order[0]]));
  return {order, g0, 1.0 - g0};
}

}  // namespace

TEST_CASE("top-p: experts by decreasing probability until their mass reaches the threshold") {
  // W = I, x = log p: the router's probabilities are the rows below.
  const std::vector<std::vector<double>> P = {{0.6, 0.2, 0.1, 0.1}, {0.3, 0.1, 0.35, 0.25}, {0.1, 0.2, 0.3, 0.4}};
  std::vector<double> xv;
  for (const auto& row : P)
    for (double p : row) xv.push_back(std::log(p));
  Generator gen(0);
  auto r = std::dynamic_pointer_cast<TopPRouter>(make_router("top-p", config(4, 4, 4, {{"threshold", "0.5"}}), gen));
  REQUIRE(r != nullptr);
  set_values(r->weight(), identity(4));
  const RoutingPlan plan = r->route(Variable(from_vector(xv, {3, 4})));
  // token 0: 0.6 >= 0.5 after expert 0; token 1: 0.35 + 0.3; token 2: 0.4 + 0.3
  CHECK(plan.experts.to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{0, -2, -2, -2, 2, 0, -2, -2, 3, 2, -2, -2});
  CHECK(plan.slots.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 2});
  const std::vector<double> g = plan.gates.data().to_vector<double>();
  const std::vector<double> want = {0.6, 0, 0, 0, 0.35, 0.3, 0, 0, 0.4, 0.3, 0, 0};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-12));
  const auto m = plan.metrics();
  CHECK(m.at("mean_slots") == doctest::Approx(5.0 / 3));
  CHECK(m.at("dropped_fraction") == 0.0);
  // threshold 1 uses every expert a token needs to reach 1 (all four here); a cap k = 2 stops at 2
  Generator g2(0);
  auto capped = std::dynamic_pointer_cast<TopPRouter>(make_router("top-p", config(4, 4, 2, {{"threshold", "1"}}), g2));
  set_values(capped->weight(), identity(4));
  CHECK(capped->route(Variable(from_vector(xv, {3, 4}))).slots.to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{2, 2, 2});
  CHECK_THROWS_WITH_AS(make_router("top-p", config(4, 4, 2, {{"threshold", "1.5"}}), g2),
                       doctest::Contains("threshold"), Error);
}

TEST_CASE("aux-free: the bias follows the load after each step, selects but never gates") {
  const std::int64_t T = 8, E = 4;
  Generator gen(0);
  auto r = std::dynamic_pointer_cast<AuxFreeRouter>(
      make_router("aux-free", config(E, E, 1, {{"update_rate", "0.25"}}), gen));
  REQUIRE(r != nullptr);
  CHECK(r->named_buffers().size() == 1);
  CHECK(r->named_buffers()[0].first == "expert_bias");
  set_values(r->weight(), identity(E));
  // Every token prefers expert 0: x = (2, 0, 0, 0) + small per-token noise in the others.
  std::vector<double> xv;
  for (std::int64_t t = 0; t < T; ++t) xv.insert(xv.end(), {2.0, 0.01 * t, 0.0, -0.01 * t});
  const Variable x(from_vector(xv, {T, E}));
  r->eval();
  r->route(x);
  r->after_optimizer_step();  // evaluation forwards are not counted
  CHECK(r->expert_bias().to_vector<double>() == std::vector<double>{0, 0, 0, 0});
  r->train();
  CHECK(r->route(x).tokens_per_expert.to_vector<std::int32_t>() == std::vector<std::int32_t>{8, 0, 0, 0});
  r->after_optimizer_step();  // counts (8, 0, 0, 0), mean 2: expert 0 down, the others up
  CHECK(r->expert_bias().to_vector<double>() == std::vector<double>{-0.25, 0.25, 0.25, 0.25});
  r->after_optimizer_step();  // nothing counted since: no change
  CHECK(r->expert_bias().to_vector<double>() == std::vector<double>{-0.25, 0.25, 0.25, 0.25});
  // A large bias selects expert 3, but the gate is the unbiased score: sigmoid of expert 3's
  // logit. At k = 1 that holds with the default renorm = true too (Megatron-LM renormalises only
  // when k > 1; s/s = 1 would leave the router without a gradient).
  for (const char* renorm : {"false", "true"}) {
    INFO("renorm ", renorm);
    Generator g2(0);
    auto raw = std::dynamic_pointer_cast<AuxFreeRouter>(
        make_router("aux-free", config(E, E, 1, {{"renorm", renorm}}), g2));
    set_values(raw->weight(), identity(E));
    Tensor b = raw->expert_bias();
    kernels::copy(b, from_vector(std::vector<double>{0, 0, 0, 5}, {E}));
    const RoutingPlan plan = raw->route(x);
    for (std::int64_t t = 0; t < T; ++t) {
      CHECK(plan.experts.to_vector<std::int32_t>()[static_cast<std::size_t>(t)] == 3);
      CHECK(plan.gates.data().to_vector<double>()[static_cast<std::size_t>(t)] ==
            doctest::Approx(1.0 / (1.0 + std::exp(0.01 * t))).epsilon(1e-12));
    }
  }
}

TEST_CASE("aux-free: the expert bias is a buffer checkpoints save, restore and require") {
  MoEConfig c;
  c.d = 4, c.experts = 4, c.k = 1, c.router = "aux-free", c.dtype = DType::Float64;
  Generator gen(1);
  MoELayer moe(c, gen);
  Tensor bias = moe.named_buffers().at(0).second;
  CHECK(moe.named_buffers().at(0).first == "router.expert_bias");
  kernels::copy(bias, from_vector(std::vector<double>{0.125, -0.5, 0.25, 1e-300}, {4}));
  moelab::testing::TempDir dir;
  save_checkpoint(dir.file("a.safetensors"), moe, nullptr, 0, nullptr);
  const SafetensorsFile file = read_safetensors(dir.file("a.safetensors"));
  bool found = false;
  for (const auto& [name, t] : file.tensors) found = found || name == "model.router.expert_bias";
  CHECK(found);
  Generator g2(2);
  MoELayer other(c, g2);
  load_checkpoint(dir.file("a.safetensors"), other, nullptr, nullptr);
  CHECK(other.named_buffers().at(0).second.to_vector<double>() == std::vector<double>{0.125, -0.5, 0.25, 1e-300});
  // Weights saved without the buffer (a layer with the topk router has none) do not load silently.
  MoEConfig plain = c;
  plain.router = "topk";
  plain.router_options = {{"gates", "softmax-topk"}};
  Generator g3(3);
  MoELayer topk(plain, g3);
  save_checkpoint(dir.file("b.safetensors"), topk, nullptr, 0, nullptr);
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("b.safetensors"), other, nullptr, nullptr),
                       doctest::Contains("router.expert_bias"), Error);
}

TEST_CASE("aux-free: repeated updates flatten a skewed load; update_rate 0 leaves it") {
  const std::int64_t T = 64, d = 8, E = 4;
  Generator data(3);
  Tensor x = normal({T, d}, 0, 1, data, DType::Float64);
  // Skew: shift every token toward the first weight row.
  std::map<double, double> cv;  // update rate -> load_cv after 200 updates
  double cv_before = 0;
  for (double u : {0.0, 0.02}) {
    Generator gen(5);
    auto r = make_router("aux-free", config(d, E, 1, {{"update_rate", std::to_string(u)}}), gen);
    auto* af = dynamic_cast<AuxFreeRouter*>(r.get());
    const Tensor w0 = kernels::narrow(af->weight().data(), 0, 0, 1);  // [1, d]
    const Tensor shift = kernels::mul(w0, 10.0);  // [1, d]
    const Tensor skewed = kernels::add(x, shift);
    cv_before = r->route(Variable(skewed)).metrics().at("load_cv");
    for (int step = 0; step < 200; ++step) {
      r->route(Variable(skewed));
      r->after_optimizer_step();
    }
    cv[u] = r->route(Variable(skewed)).metrics().at("load_cv");
  }
  CHECK(cv_before > 0.5);
  CHECK(cv[0.0] == doctest::Approx(cv_before));
  CHECK(cv[0.02] < 0.25 * cv_before);
}

TEST_CASE("balanced: every expert exactly its share in training, top-k in evaluation") {
  Generator gen(2);
  for (auto [T, E, k] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
           {16, 4, 1}, {12, 4, 2}, {10, 4, 1}, {7, 3, 3}, {30, 8, 3}}) {
    CAPTURE(T);
    CAPTURE(k);
    auto r = make_router("balanced", config(5, E, k), gen);
    // skewed inputs, so that plain top-k would be unbalanced
    Tensor x = kernels::add(normal({T, 5}, 0, 1, gen, DType::Float64), 1.0);
    const RoutingPlan plan = r->route(Variable(x));
    const std::vector<std::int32_t> counts = plan.tokens_per_expert.to_vector<std::int32_t>();
    for (std::int64_t e = 0; e < E; ++e)
      CHECK(counts[static_cast<std::size_t>(e)] == (T * k) / E + (e < (T * k) % E ? 1 : 0));
    const std::vector<std::int32_t> ids = plan.experts.to_vector<std::int32_t>();
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<std::int32_t> row(ids.begin() + t * k, ids.begin() + (t + 1) * k);
      std::sort(row.begin(), row.end());
      CHECK(std::adjacent_find(row.begin(), row.end()) == row.end());  // k distinct experts
      CHECK(row.front() >= 0);
    }
    if ((T * k) % E == 0) CHECK(plan.metrics().at("load_cv") == 0.0);
    r->eval();
    const Tensor logits = kernels::matmul(x, dynamic_cast<BalancedRouter*>(r.get())->weight().data(), false, true);
    CHECK(r->route(Variable(x)).experts.to_vector<std::int32_t>() ==
          kernels::topk(logits, static_cast<int>(k)).indices.to_vector<std::int32_t>());
  }
  // The greedy walk: the best pair (token 1, expert 0) first, so token 0 goes to expert 1.
  CHECK(greedy_balanced_assignment({0.5, 0.1, 0.9, 0.2}, 2, 2, 1) == std::vector<std::int32_t>{1, 0});
}

TEST_CASE("shared experts: one MLP beside the routed experts, counted as active") {
  DecoderConfig dc;
  dc.vocab = 10, dc.d = 8, dc.layers = 1, dc.heads = 2, dc.max_seq = 4;
  MoEConfig moe;
  moe.experts = 8, moe.k = 2, moe.ffn = 4, moe.shared_experts = 2, moe.shared_ffn = 6;
  Generator gen(0);
  Decoder model(dc, gen, moe_feed_forward(moe));
  const Variable up = model.parameter("layers.0.ffn.shared.up.weight");
  CHECK(up.shape() == Shape({12, 8}));  // 2 shared experts of width 6, as one MLP of width 12
  CHECK(model.parameter("layers.0.ffn.shared.down.weight").shape() == Shape({8, 12}));
  const MoECounts c = moe_parameter_counts(model);
  CHECK(c.non_embedding - c.active == (8 - 2) * 2 * 8 * 4);  // only unrouted experts are inactive
  MoEConfig none = moe;
  none.shared_experts = 0;
  Generator g2(0);
  Decoder plain(dc, g2, moe_feed_forward(none));
  CHECK(moe_parameter_counts(model).active - moe_parameter_counts(plain).active == 2 * 8 * 12);
}

TEST_CASE("gated shared experts (Qwen2-MoE): y = routed + sigmoid(x . w_s) * shared(x), gradients to w_s") {
  Generator gen(4);
  MoEConfig c;
  c.d = 5, c.experts = 4, c.k = 2, c.ffn = 3, c.shared_experts = 1, c.shared_gate = true, c.dtype = DType::Float64;
  MoELayer gated(c, gen);
  REQUIRE(gated.shared_gate() != nullptr);
  CHECK(gated.shared_gate()->weight().shape() == Shape({1, 5}));
  CHECK(gated.shared_gate()->bias().defined() == false);
  // The same layer without the gate: the routed part and the shared MLP from the same draws.
  Generator same(4);
  MoEConfig plain_c = c;
  plain_c.shared_gate = false;
  MoELayer plain(plain_c, same);
  const Tensor x = normal({6, 5}, 0.0, 1.0, gen, DType::Float64);
  const std::vector<double> yg = gated.forward(Variable(x)).data().to_vector<double>();
  const std::vector<double> yp = plain.forward(Variable(x)).data().to_vector<double>();
  const std::vector<double> sh = gated.shared()->forward(Variable(x)).data().to_vector<double>();
  const std::vector<double> xv = x.to_vector<double>(), w = gated.shared_gate()->weight().data().to_vector<double>();
  double worst = 0;
  for (int t = 0; t < 6; ++t) {
    double z = 0;
    for (int i = 0; i < 5; ++i) z += xv[t * 5 + i] * w[i];
    const double gate = 1.0 / (1.0 + std::exp(-z));
    for (int i = 0; i < 5; ++i)  // plain = routed + shared, so routed = plain - shared
      worst = std::max(worst, std::abs(yg[t * 5 + i] - (yp[t * 5 + i] - sh[t * 5 + i] + gate * sh[t * 5 + i])));
  }
  CHECK(worst < 1e-12);
  // The gate learns: a loss through the layer reaches w_s.
  gated.zero_grad();
  const Variable y = gated.forward(Variable(x));
  sum(y * y).backward();
  const std::vector<double> gw = gated.shared_gate()->weight().grad().to_vector<double>();
  CHECK(std::any_of(gw.begin(), gw.end(), [](double v) { return std::abs(v) > 1e-8; }));
  // Without shared experts there is nothing to gate.
  MoEConfig bad = c;
  bad.shared_experts = 0;
  Generator g3(1);
  CHECK_THROWS_WITH(MoELayer(bad, g3), doctest::Contains("needs shared_experts"));
  // As a custom scheme of `moelab routers`.
  const std::vector<RouterScheme> schemes = parse_custom_schemes("qwen:topk:shared=1:shared_gate=1");
  REQUIRE(schemes.size() == 1u);
  CHECK(schemes[0].shared_gate);
  CHECK_THROWS_WITH(parse_custom_schemes("q:topk:shared_gate=1"), doctest::Contains("needs shared experts"));
  CHECK_THROWS_WITH(parse_custom_schemes("q:topk:shared=1:shared_gate=yes"), doctest::Contains("0 or 1"));
}

TEST_CASE("topk balance_scope: the Switch loss over the whole batch or per sequence") {
  Generator gen(12);
  const std::int64_t d = 5, E = 6, k = 2, B = 4, S = 6, T = B * S;
  const double a = 0.01;
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  Generator g1(3), g2(3);
  auto batch = std::dynamic_pointer_cast<TopKRouter>(make_router("topk", config(d, E, k, {{"load_balance", "0.01"}}), g1));
  auto per_seq = std::dynamic_pointer_cast<TopKRouter>(
      make_router("topk", config(d, E, k, {{"load_balance", "0.01"}, {"balance_scope", "sequence"}}), g2));
  REQUIRE(batch);
  REQUIRE(per_seq);

  // Host reference: p = softmax(x W^T); f and P over tokens [lo, hi); loss a E sum_e f_e P_e.
  const std::vector<double> xv = x.to_vector<double>(), wv = batch->weight().data().to_vector<double>();
  std::vector<double> p(static_cast<std::size_t>(T * E));
  for (std::int64_t t = 0; t < T; ++t) {
    double mx = -1e300, total = 0;
    std::vector<double> z(static_cast<std::size_t>(E));
    for (std::int64_t e = 0; e < E; ++e) {
      for (std::int64_t i = 0; i < d; ++i) z[e] += xv[t * d + i] * wv[e * d + i];
      mx = std::max(mx, z[e]);
    }
    for (std::int64_t e = 0; e < E; ++e) total += std::exp(z[e] - mx);
    for (std::int64_t e = 0; e < E; ++e) p[t * E + e] = std::exp(z[e] - mx) / total;
  }
  const RoutingPlan pb = batch->route_sequences(Variable(x), S), ps = per_seq->route_sequences(Variable(x), S);
  const std::vector<std::int32_t> chosen = pb.experts.to_vector<std::int32_t>();
  CHECK(ps.experts.to_vector<std::int32_t>() == chosen);  // the same router weights: the same selection
  const auto loss = [&](std::int64_t lo, std::int64_t hi) {
    std::vector<double> f(static_cast<std::size_t>(E), 0.0), P(static_cast<std::size_t>(E), 0.0);
    const double n = static_cast<double>(hi - lo);
    for (std::int64_t t = lo; t < hi; ++t) {
      for (std::int64_t j = 0; j < k; ++j) f[chosen[t * k + j]] += 1.0 / (n * k);
      for (std::int64_t e = 0; e < E; ++e) P[e] += p[t * E + e] / n;
    }
    double l = 0;
    for (std::int64_t e = 0; e < E; ++e) l += a * E * f[e] * P[e];
    return l;
  };
  double sequences = 0;
  for (std::int64_t b = 0; b < B; ++b) sequences += loss(b * S, (b + 1) * S) / B;
  REQUIRE(pb.aux_losses.size() == 1);
  REQUIRE(ps.aux_losses.size() == 1);
  CHECK(pb.aux_losses[0].second.data().item<double>() == doctest::Approx(loss(0, T)));
  CHECK(ps.aux_losses[0].second.data().item<double>() == doctest::Approx(sequences));
  CHECK(loss(0, T) != doctest::Approx(sequences));  // the two scopes differ on this batch
  // One sequence (route(x)): the two scopes agree.
  CHECK(per_seq->route(Variable(x)).aux_losses[0].second.data().item<double>() == doctest::Approx(loss(0, T)));
  // The per-sequence loss trains the router.
  ps.aux_losses[0].second.backward();
  const std::vector<double> grad = per_seq->weight().grad().to_vector<double>();
  CHECK(std::any_of(grad.begin(), grad.end(), [](double g) { return g != 0.0; }));
  CHECK_THROWS_AS(make_router("topk", config(d, E, k, {{"balance_scope", "micro"}}), gen), Error);
}

TEST_CASE("topk null_experts: zero-computation slots, their share in the gates, the loss and the metric") {
  Generator gen(21);
  const std::int64_t d = 5, E = 4, N = 2, E_all = E + N, k = 2, T = 30;
  const double a = 0.01;
  auto r = std::dynamic_pointer_cast<TopKRouter>(
      make_router("topk", config(d, E, k, {{"null_experts", "2"}, {"load_balance", "0.01"}}), gen));
  REQUIRE(r);
  CHECK(r->weight().shape() == Shape{E_all, d});
  CHECK(r->gate_sum() == GateSum::AtMostOne);
  const Tensor x = normal({T, d}, 0.0, 1.0, gen, DType::Float64);
  const RoutingPlan plan = r->route(Variable(x));

  // Host reference: p over the E + N experts, the top k of them, gates p / (sum of the k chosen p).
  const std::vector<double> xv = x.to_vector<double>(), wv = r->weight().data().to_vector<double>();
  const std::vector<std::int32_t> experts = plan.experts.to_vector<std::int32_t>();
  const std::vector<double> gates = plan.gates.data().to_vector<double>();
  std::vector<double> f(static_cast<std::size_t>(E_all), 0.0), P(static_cast<std::size_t>(E_all), 0.0);
  double nulls = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> z(static_cast<std::size_t>(E_all), 0.0), p(static_cast<std::size_t>(E_all));
    double mx = -1e300, total = 0;
    for (std::int64_t e = 0; e < E_all; ++e) {
      for (std::int64_t i = 0; i < d; ++i) z[e] += xv[t * d + i] * wv[e * d + i];
      mx = std::max(mx, z[e]);
    }
    for (std::int64_t e = 0; e < E_all; ++e) total += std::exp(z[e] - mx);
    for (std::int64_t e = 0; e < E_all; ++e) p[e] = std::exp(z[e] - mx) / total;
    std::vector<std::int64_t> order(static_cast<std::size_t>(E_all));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t u, std::int64_t v) { return z[u] > z[v]; });
    // MoE++'s gating(): the null experts' p are zeroed before the renormalisation.
    double chosen_mass = 0;
    for (std::int64_t j = 0; j < k; ++j) chosen_mass += order[j] < E ? p[order[j]] : 0.0;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t e = order[j];
      f[e] += 1.0 / (T * k);
      INFO("token ", t, " slot ", j);
      if (e >= E) {
        nulls += 1;
        CHECK(experts[t * k + j] == kUnusedSlot);
        CHECK(gates[t * k + j] == 0.0);
      } else {
        CHECK(experts[t * k + j] == e);
        CHECK(gates[t * k + j] == doctest::Approx(p[e] / chosen_mass));
      }
    }
    for (std::int64_t e = 0; e < E_all; ++e) P[e] += p[e] / T;
  }
  CHECK(nulls > 0);  // some choices went to a null expert: the case tests something
  CHECK(plan.metrics()["null_fraction"] == doctest::Approx(nulls / (T * k)));
  const std::vector<std::int32_t> slots = plan.slots.to_vector<std::int32_t>();
  CHECK(std::accumulate(slots.begin(), slots.end(), 0.0) == doctest::Approx(T * k - nulls));
  double lb = 0;
  for (std::int64_t e = 0; e < E_all; ++e) lb += a * E_all * f[e] * P[e];
  REQUIRE(plan.aux_losses.size() == 1);
  CHECK(plan.aux_losses[0].second.data().item<double>() == doctest::Approx(lb));

  // The gates are ratios of real experts' p alone, so the null rows get no gradient from them (a
  // token of real + null gives its real expert gate 1, constant); they learn from the balance loss.
  sum(plan.gates * Variable(normal({T, k}, 0.0, 1.0, gen, DType::Float64))).backward();
  std::vector<double> grad = r->weight().grad().to_vector<double>();
  CHECK(std::all_of(grad.begin() + E * d, grad.end(), [](double g) { return std::fabs(g) < 1e-15; }));
  CHECK(std::any_of(grad.begin(), grad.begin() + E * d, [](double g) { return g != 0.0; }));
  r->zero_grad();
  r->route(Variable(x)).aux_losses[0].second.backward();  // a fresh graph
  grad = r->weight().grad().to_vector<double>();
  CHECK(std::any_of(grad.begin() + E * d, grad.end(), [](double g) { return g != 0.0; }));

  CHECK_THROWS_AS(make_router("topk", config(d, E, k, {{"null_experts", "1"}, {"forced", "balanced"}}), gen), Error);
  CHECK_THROWS_AS(r->replay(plan.experts), Error);
}

TEST_CASE("topk copy_experts: identity slots add their gate times the token, beside null and real experts") {
  Generator gen(22);
  const std::int64_t d = 5, E = 4, N = 1, M = 2, E_all = E + N + M, k = 2, T = 40;
  auto r = std::dynamic_pointer_cast<TopKRouter>(
      make_router("topk", config(d, E, k, {{"null_experts", "1"}, {"copy_experts", "2"}}), gen));
  REQUIRE(r);
  CHECK(r->weight().shape() == Shape{E_all, d});
  CHECK(r->gate_sum() == GateSum::AtMostOne);
  // Larger inputs, so that some tokens pick the special experts.
  const Tensor x = normal({T, d}, 0.0, 3.0, gen, DType::Float64);
  const RoutingPlan plan = r->route(Variable(x));
  REQUIRE(plan.direct_output.defined());
  CHECK(plan.direct_output.shape() == Shape{T, d});

  // Host reference: the top k of E + N + M logits, gates p / (sum of the k chosen p); a copy slot
  // is an unused slot for the experts and adds gate * x to the direct output.
  const std::vector<double> xv = x.to_vector<double>(), wv = r->weight().data().to_vector<double>();
  const std::vector<std::int32_t> experts = plan.experts.to_vector<std::int32_t>();
  const std::vector<double> gates = plan.gates.data().to_vector<double>();
  const std::vector<double> direct = plan.direct_output.data().to_vector<double>();
  double copies = 0, nulls = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const auto [order, g0, g1] = host_top2(xv, wv, t, d, E_all);
    // A null slot's p leaves the renormalisation (MoE++'s gating()): the other slot gets gate 1.
    const bool null0 = order[0] >= E && order[0] < E + N, null1 = order[1] >= E && order[1] < E + N;
    const double h0 = null0 ? 0.0 : null1 ? 1.0 : g0, h1 = null1 ? 0.0 : null0 ? 1.0 : g1;
    double copy_gate = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t e = order[j];
      const double g = j == 0 ? h0 : h1;
      INFO("token ", t, " slot ", j);
      if (e >= E) {
        CHECK(experts[t * k + j] == kUnusedSlot);
        CHECK(gates[t * k + j] == 0.0);
        if (e >= E + N) {
          copy_gate += g;
          copies += 1;
        } else {
          nulls += 1;
        }
      } else {
        CHECK(experts[t * k + j] == e);
        CHECK(gates[t * k + j] == doctest::Approx(g));
      }
    }
    for (std::int64_t i = 0; i < d; ++i) CHECK(direct[t * d + i] == doctest::Approx(copy_gate * xv[t * d + i]));
  }
  CHECK(copies > 0);  // the case tests something
  CHECK(plan.metrics()["copy_fraction"] == doctest::Approx(copies / (T * k)));
  CHECK(plan.metrics()["null_fraction"] == doctest::Approx(nulls / (T * k)));

  // In a layer: the output is the experts' part plus the copies; the copy rows of the router learn.
  MoEConfig mc;
  mc.d = d, mc.experts = E, mc.k = k, mc.ffn = 3, mc.dtype = DType::Float64;
  mc.router_options = {{"copy_experts", "2"}};
  Generator g2(23);
  MoELayer moe(mc, g2);
  const Variable y = moe.forward(Variable(x));
  sum(y * Variable(normal({T, d}, 0.0, 1.0, gen, DType::Float64))).backward();
  const std::vector<double> grad = moe.router().parameters()[0].grad().to_vector<double>();
  CHECK(std::any_of(grad.begin() + E * d, grad.end(), [](double v) { return v != 0.0; }));
  CHECK_THROWS_AS(make_router("topk", config(d, E, k, {{"copy_experts", "1"}, {"forced", "balanced"}}), gen), Error);
  CHECK_THROWS_AS(make_router("topk", config(d, E, k, {{"copy_experts", "-1"}}), gen), Error);
}

TEST_CASE("topk constant_experts: MoE++'s a0 x + a1 v with [a0, a1] = softmax(W_c x), beside copy and real experts") {
  Generator gen(31);
  const std::int64_t d = 4, E = 3, N = 0, M = 1, C = 2, E_all = E + N + M + C, k = 2, T = 60;
  auto r = std::dynamic_pointer_cast<TopKRouter>(
      make_router("topk", config(d, E, k, {{"copy_experts", "1"}, {"constant_experts", "2"}}), gen));
  REQUIRE(r);
  CHECK(r->weight().shape() == Shape{E_all, d});
  CHECK(r->constant_vectors().shape() == Shape{C, d});
  CHECK(r->constant_mix().shape() == Shape{2 * C, d});
  CHECK(r->gate_sum() == GateSum::AtMostOne);
  const Tensor x = normal({T, d}, 0.0, 3.0, gen, DType::Float64);
  const RoutingPlan plan = r->route(Variable(x));
  REQUIRE(plan.direct_output.defined());

  // Host reference for the direct output: copy slots add g x, constant slot c adds g (a0 x + a1 v_c).
  const std::vector<double> xv = x.to_vector<double>(), wv = r->weight().data().to_vector<double>();
  const std::vector<double> vv = r->constant_vectors().data().to_vector<double>();
  const std::vector<double> mv = r->constant_mix().data().to_vector<double>();
  const std::vector<double> direct = plan.direct_output.data().to_vector<double>();
  const std::vector<std::int32_t> experts = plan.experts.to_vector<std::int32_t>();
  double constants = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const auto [order, g0, g1] = host_top2(xv, wv, t, d, E_all);
    std::vector<double> want(static_cast<std::size_t>(d), 0.0);
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t e = order[j];
      const double g = j == 0 ? g0 : g1;
      if (e < E) {
        CHECK(experts[t * k + j] == e);
        continue;
      }
      CHECK(experts[t * k + j] == kUnusedSlot);
      if (e < E + N + M) {
        for (std::int64_t i = 0; i < d; ++i) want[i] += g * xv[t * d + i];
        continue;
      }
      const std::int64_t c = e - (E + N + M);
      constants += 1;
      double l0 = 0, l1 = 0;
      for (std::int64_t i = 0; i < d; ++i) l0 += mv[(2 * c) * d + i] * xv[t * d + i], l1 += mv[(2 * c + 1) * d + i] * xv[t * d + i];
      const double a0 = 1.0 / (1.0 + std::exp(l1 - l0)), a1 = 1.0 - a0;
      for (std::int64_t i = 0; i < d; ++i) want[i] += g * (a0 * xv[t * d + i] + a1 * vv[c * d + i]);
    }
    for (std::int64_t i = 0; i < d; ++i) CHECK(direct[t * d + i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
  CHECK(constants > 0);  // the case tests something
  CHECK(plan.metrics()["constant_fraction"] == doctest::Approx(constants / (T * k)));

  // In a layer, every new parameter learns: the constant rows of the router, v and W.
  MoEConfig mc;
  mc.d = d, mc.experts = E, mc.k = k, mc.ffn = 3, mc.dtype = DType::Float64;
  mc.router_options = {{"constant_experts", "2"}};
  Generator g2(32);
  MoELayer moe(mc, g2);
  sum(moe.forward(Variable(x)) * Variable(normal({T, d}, 0.0, 1.0, gen, DType::Float64))).backward();
  for (const Variable& p : moe.router().parameters()) {
    const std::vector<double> grad = p.grad().to_vector<double>();
    CHECK(std::any_of(grad.begin(), grad.end(), [](double v) { return v != 0.0; }));
  }
  CHECK_THROWS_AS(make_router("topk", config(d, E, k, {{"constant_experts", "1"}, {"forced", "balanced"}}), gen), Error);
  CHECK_THROWS_AS(make_router("topk", config(d, E, k, {{"constant_experts", "-1"}}), gen), Error);
  CHECK_THROWS_AS(r->replay(plan.experts), Error);
}
