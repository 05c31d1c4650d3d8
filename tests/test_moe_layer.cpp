// tests/test_moe_layer.cpp — the expert bank, the top-k MoE layer and the MoE decoder.
//
//   - E = 1, k = 1 (gate 1) equals the dense MLP with the same weights (with and without biases)
//   - tokens per expert sum to T*k; the output equals a naive per-token loop
//       y_t = sum_j g_tj * expert_{e_tj}(x_t)        (E = 4, k = 2, float64, 1e-12)
//   - capacity dropping: dropped assignments contribute nothing
//   - float64 gradcheck w.r.t. x and every parameter, router logits with a clear gap between the
//     k-th and (k+1)-th (checked, so a seed change cannot silently put a tie inside the step)
//   - MoE decoder: parameter names and shapes for L = 2, total / active counts by formula, the
//     summed aux loss, and a short training run whose loss falls
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/top_k_router.h"
#include "nn/nn.h"
#include "tests/parameter_gradcheck.h"
#include "tests/router_contract.h"
#include "nn/optim/adam.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::check_parameters;
using moelab::testing::max_error;
using V = std::vector<Variable>;

namespace {

Tensor randn(const Shape& shape, Generator& gen, double std = 1.0) {
  return normal(shape, 0.0, std, gen, DType::Float64);
}
std::vector<double> values(const Tensor& t) { return moelab::testing::to_doubles(t); }
// Overwrites a parameter's values in place (its storage is shared with the module).
void set_values(Variable p, const Tensor& v) { kernels::copy(p.data(), v); }

// The reference: for every token, sum over its kept assignments of g * relu(x w_in[e] + b_in[e]) w_out[e] + b_out[e]
// (the router contract's per-token loop, tests/router_contract.h).
std::vector<double> naive_moe(MoELayer& moe, const Tensor& x) {
  const std::int64_t d = moe.config().d, T = x.numel() / d;
  const Tensor flat = x.reshape({T, d});
  return moelab::testing::contract_detail::per_token_loop(moe, moe.router().route(Variable(flat)), flat);
}

// Smallest gap, over tokens, between the k-th and (k+1)-th largest router logit.
double min_topk_gap(MoELayer& moe, const Tensor& x) {
  const std::int64_t d = moe.config().d, E = moe.config().experts, k = moe.config().k, T = x.numel() / d;
  const std::vector<double> xv = values(x), w = values(moe.router().parameter("weight").data());
  const Variable b = moe.router().named_parameters().size() > 1 ? moe.router().parameter("bias") : Variable();
  const std::vector<double> bv = b.defined() ? values(b.data()) : std::vector<double>(static_cast<std::size_t>(E), 0.0);
  double gap = 1e300;
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> logits(bv);
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t i = 0; i < d; ++i)
        logits[static_cast<std::size_t>(e)] +=
            xv[static_cast<std::size_t>(t * d + i)] * w[static_cast<std::size_t>(e * d + i)];
    std::sort(logits.begin(), logits.end(), std::greater<double>());
    if (k < E) gap = std::min(gap, logits[static_cast<std::size_t>(k - 1)] - logits[static_cast<std::size_t>(k)]);
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
  return c;
}

}  // namespace

TEST_CASE("MoEConfig with only d and experts set builds a layer whose router learns (every default works)") {
  Generator gen(3);
  MoEConfig c;
  c.d = 6, c.experts = 4, c.dtype = DType::Float64;  // k = 1, topk, its default gates
  MoELayer moe(c, gen);
  const Variable x(normal({5, 6}, 0.0, 1.0, gen, DType::Float64));
  const Variable y = moe.forward(x);
  sum(y * y).backward();
  double norm = 0;
  for (const Variable& p : moe.router().parameters())
    for (double g : p.grad().to_vector<double>()) norm += g * g;
  CHECK(norm > 0.0);  // the default top-1 gate is p itself, not p/p = 1
}

TEST_CASE("MoE layer with E = 1, k = 1 equals the dense MLP with the same weights") {
  for (bool bias : {false, true}) {
    INFO("bias ", bias);
    Generator gen(11);
    const std::int64_t d = 6, f = 10;
    MLP mlp(d, f, gen, bias, DType::Float64);
    MoEConfig one = f64_config(d, 1, 1, f, bias);
    one.router_options = {{"allow_constant_gates", "true"}};  // one expert: the gate is 1 whatever the mode
    MoELayer moe(one, gen);
    // Linear stores [out, in]; the bank stores [in, out] per expert.
    set_values(moe.experts().w_in(), kernels::transpose(mlp.up().weight().data()).reshape({1, d, f}));
    set_values(moe.experts().w_out(), kernels::transpose(mlp.down().weight().data()).reshape({1, f, d}));
    if (bias) {
      set_values(moe.experts().b_in(), mlp.up().bias().data().reshape({1, f}));
      set_values(moe.experts().b_out(), mlp.down().bias().data().reshape({1, d}));
    }
    const Tensor x = randn({2, 3, d}, gen);
    const Variable y = moe.forward(Variable(x));
    CHECK(y.shape() == x.shape());
    CHECK(max_error(y.data(), values(mlp.forward(Variable(x)).data())) <= 1e-12);
    CHECK(moe.last_tokens_per_expert().to_vector<std::int32_t>() == std::vector<std::int32_t>{6});
  }
}

TEST_CASE("MoE layer E = 4, k = 2: tokens per expert sum to T*k and the output equals the per-token loop") {
  for (bool bias : {false, true}) {
    INFO("bias ", bias);
    Generator gen(12);
    MoELayer moe(f64_config(5, 4, 2, 7, bias), gen);
    const Tensor x = randn({3, 4, 5}, gen);
    const Variable y = moe.forward(Variable(x));
    const std::vector<std::int32_t> load = moe.last_tokens_per_expert().to_vector<std::int32_t>();
    REQUIRE(load.size() == 4);
    CHECK(load[0] + load[1] + load[2] + load[3] == 12 * 2);
    CHECK(moe.last_metrics().at("dropped_fraction") == 0.0);
    CHECK(max_error(y.data(), naive_moe(moe, x)) <= 1e-12);
    CHECK(moe.named_parameters().size() == (bias ? 5u : 3u));
    CHECK(moe.parameter("router.weight").shape() == Shape{4, 5});
    CHECK(moe.parameter("experts.w_in").shape() == Shape{4, 5, 7});
    CHECK(moe.parameter("experts.w_out").shape() == Shape{4, 7, 5});
  }
}

TEST_CASE("MoE layer with a capacity: dropped assignments contribute nothing") {
  Generator gen(13);
  MoEConfig c = f64_config(4, 4, 2, 6);
  c.router_options = {{"capacity_factor", "0.5"}};
  MoELayer moe(c, gen);
  const std::int64_t T = 16;
  const Tensor x = randn({T, 4}, gen);
  const Variable y = moe.forward(Variable(x));
  CHECK(moe.last_metrics().at("dropped_fraction") > 0.0);
  const RoutingPlan plan = moe.router().route(Variable(x));
  const std::vector<std::int32_t> ex = plan.experts.to_vector<std::int32_t>();
  const std::int64_t kept = std::count_if(ex.begin(), ex.end(), [](std::int32_t e) { return e >= 0; });
  CHECK(kept < T * 2);
  const std::vector<std::int32_t> load = moe.last_tokens_per_expert().to_vector<std::int32_t>();
  std::int64_t load_sum = 0;
  for (std::int32_t l : load) {
    CHECK(l <= 4);  // C = ceil(0.5 * 16 * 2 / 4)
    load_sum += l;
  }
  CHECK(load_sum == kept);
  CHECK(max_error(y.data(), naive_moe(moe, x)) <= 1e-12);  // the loop skips expert -1
  // A token whose assignments were all dropped gets exactly 0.
  const std::vector<double> yv = values(y.data());
  for (std::int64_t t = 0; t < T; ++t)
    if (ex[static_cast<std::size_t>(2 * t)] < 0 && ex[static_cast<std::size_t>(2 * t + 1)] < 0)
      for (std::int64_t i = 0; i < 4; ++i) CHECK(yv[static_cast<std::size_t>(4 * t + i)] == 0.0);
  // Gradients still flow to the kept experts and the router.
  sum(y).backward();
  CHECK(moe.parameter("router.weight").grad().defined());
  CHECK(moe.parameter("experts.w_in").grad().defined());
}

TEST_CASE("MoE layer gradcheck in float64: x and every parameter (top-2 of 4, clear logit gaps)") {
  for (bool bias : {false, true}) {
    INFO("bias ", bias);
    Generator gen(14);
    MoEConfig c = f64_config(4, 4, 2, 5, bias);
    if (bias) c.router_options = {{"bias", "true"}, {"gates", "softmax-topk"}};
    MoELayer moe(c, gen);
    // A larger router weight spreads the logits; the test asserts the gap it relies on.
    set_values(moe.router().parameter("weight"), randn({4, 4}, gen, 2.0));
    if (bias) set_values(moe.router().parameter("bias"), randn({4}, gen, 0.1));
    // Draw x until every token's k-th and (k+1)-th logits are at least 0.05 apart (far outside
    // the 1e-6 finite-difference step), so the selection is constant inside the check.
    Tensor x = randn({2, 3, 4}, gen);
    for (int tries = 0; tries < 100 && min_topk_gap(moe, x) <= 0.05; ++tries) x = randn({2, 3, 4}, gen);
    REQUIRE(min_topk_gap(moe, x) > 0.05);
    const GradcheckResult r = gradcheck([&](const V& v) { return moe.forward(v[0]); }, {x});
    CHECK_MESSAGE(r.ok, r.report);
    std::int64_t checked = 0;
    const std::string report = check_parameters(moe, [&] { return moe.forward(Variable(x)); }, checked);
    CHECK_MESSAGE(report.empty(), report);
    CHECK(checked == moe.num_parameters());
  }
}

TEST_CASE("MoE decoder: parameter names, shapes and total / active counts") {
  DecoderConfig c;
  c.vocab = 16;
  c.d = 8;
  c.layers = 2;
  c.heads = 2;
  c.ffn = 12;
  c.max_seq = 16;
  MoEConfig m;
  m.experts = 4;
  m.k = 2;
  Generator gen(15);
  Decoder model(c, gen, moe_feed_forward(m));
  const std::int64_t d = 8, f = 12, E = 4, k = 2, L = 2, vocab = 16;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".ffn.";
    CHECK(model.parameter(p + "router.weight").shape() == Shape{E, d});
    CHECK(model.parameter(p + "experts.w_in").shape() == Shape{E, d, f});
    CHECK(model.parameter(p + "experts.w_out").shape() == Shape{E, f, d});
  }
  const MoECounts counts = moe_parameter_counts(model);
  const std::int64_t attention_norms = 4 * d * d + 2 * d;
  CHECK(counts.non_embedding == L * (attention_norms + E * d + E * 2 * d * f) + d);
  CHECK(counts.active == L * (attention_norms + E * d + k * 2 * d * f) + d);
  CHECK(counts.total == counts.non_embedding + 2 * vocab * d);
  CHECK(counts.total == model.num_parameters());
  // A dense decoder: active == non-embedding.
  Decoder dense(c, gen);
  const MoECounts dc = moe_parameter_counts(dense);
  CHECK(dc.active == dc.non_embedding);
  AuxLosses aux;
  dense.forward(from_vector(std::vector<std::int32_t>{1, 2, 3}, {1, 3}), aux);
  CHECK(aux.terms.empty());
}

TEST_CASE("a tiny MoE decoder trains: the loss falls, aux losses are summed over layers") {
  DecoderConfig c;
  c.vocab = 12;
  c.d = 16;
  c.layers = 2;
  c.heads = 2;
  c.ffn = 16;
  c.max_seq = 16;
  MoEConfig m;
  m.experts = 4;
  m.k = 2;
  m.router_options = {{"load_balance", "0.01"}, {"z_loss", "0.001"}};
  Generator gen(16);
  Decoder model(c, gen, moe_feed_forward(m));
  // A fixed batch of a repeating sequence: next token = (token + 1) mod V.
  std::vector<std::int32_t> ids, targets;
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 8; ++t) {
      ids.push_back((b * 3 + t) % 12);
      targets.push_back((b * 3 + t + 1) % 12);
    }
  const Tensor ids_t = from_vector(ids, {4, 8}), targets_t = from_vector(targets, {4, 8});
  AdamW opt(model.parameters(), {.lr = 1e-2});
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    AuxLosses aux_losses;
    const Variable task = nn::cross_entropy(model.forward(ids_t, aux_losses), targets_t);
    const Variable aux = aux_losses.total();
    REQUIRE(aux.defined());
    if (step == 0) {
      std::vector<std::string> names;
      for (const auto& [name, loss] : aux_losses.terms) names.push_back(name);
      CHECK(names == std::vector<std::string>{"layers.0.load_balance", "layers.0.z_loss", "layers.1.load_balance",
                                              "layers.1.z_loss"});
    }
    REQUIRE(aux.numel() == 1);
    if (step == 0) {
      // Two layers, each with load_balance (>= 0.01 * 1) and z_loss terms.
      CHECK(aux.data().to(DType::Float64).to_vector<double>()[0] >= 2 * 0.01 - 1e-6);
      CHECK(moe_metrics(model).count("layers.1.router_entropy") == 1);
      first = task.data().to(DType::Float64).to_vector<double>()[0];
    }
    last = task.data().to(DType::Float64).to_vector<double>()[0];
    (task + aux).backward();
    opt.step();
    opt.zero_grad();
  }
  INFO("first ", first, " last ", last);
  CHECK(std::isfinite(last));
  CHECK(last < 0.5 * first);
}
