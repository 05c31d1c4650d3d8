// tests/test_soft_moe_order.cpp — Soft MoE's two summation orders compute the same layer.
//
// nn/moe/soft_moe.h: the full layer can run its experts in slot order (form the slot inputs Xs
// [B, S, d], run each expert, mix its outputs Ys back) or in token order (the first expert layer
// on the tokens before the dispatch mix, the second after the combine mix; no [B, S, d] tensor).
//   - forward outputs and the gradients of x and of every parameter agree to 1e-12 in float64:
//     normalize off, on with the slots mixing X_hat (the default) or X, p = 1 and p = 2,
//     expert biases, more tokens than Auto would send to token order (m = 9 > 4p), and gelu and
//     swiglu experts (swiglu activates the mixed [B, 2f, E, p] along its feature axis)
//   - float64 gradcheck of x and every parameter with expert_order = Tokens
//   - a proper subset (a mask dropping experts) gives the same output whatever the order (it
//     always runs in slot order); a full mask equals forward(x) bitwise in token order too
//   - Auto: token order for the MNIST model's narrow experts (n = 64, 128: f = 784/n < 16, m = 4,
//     p = 1), slot order for its wider ones (n = 8, 16, 32) and for many tokens per slot (m > 4p);
//     parse_expert_order reads the three names and rejects others
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/moe/soft_moe.h"
#include "tests/parameter_gradcheck.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::check_parameters;
using V = std::vector<Variable>;

namespace {

std::vector<double> values(const Tensor& t) { return moelab::testing::to_doubles(t); }

double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / (1.0 + std::abs(y[i])));
  return worst;
}

struct Case {
  const char* name;
  std::int64_t d, n, p, h, m;
  bool normalize, bias;
  SlotInputs slots;
  Activation act = Activation::Relu;
};

SoftMoEConfig config_of(const Case& c, ExpertOrder order) {
  SoftMoEConfig s;
  s.d = c.d, s.experts = c.n, s.slots_per_expert = c.p, s.hidden = c.h;
  s.normalize = c.normalize, s.bias = c.bias, s.slot_inputs = c.slots;
  s.dtype = DType::Float64;
  s.expert_order = order;
  s.activation = c.act;
  return s;
}

// Output and gradients (x first, then every parameter) of sum(forward(x) * r).
std::vector<Tensor> run(const Case& c, ExpertOrder order) {
  Generator gen(21);  // the same parameters for both orders
  SoftMoE moe(config_of(c, order), gen);
  REQUIRE(moe.token_order(c.m) == (order == ExpertOrder::Tokens));
  Generator data(22);
  Variable x(normal({3, c.m, c.d}, 0.0, 1.0, data, DType::Float64), /*requires_grad=*/true);
  const Variable y = moe.forward(x);
  const Tensor r = normal(y.shape(), 0.0, 1.0, data, DType::Float64);
  y.backward(r);
  std::vector<Tensor> out{y.data(), x.grad()};
  for (const Variable& p : moe.parameters()) out.push_back(p.grad());
  return out;
}

const std::vector<Case> kCases = {
    {"normalize, slots mix X_hat, p = 1", 6, 5, 1, 3, 4, true, false, SlotInputs::Normalized},
    {"normalize, slots mix X (raw), p = 1", 6, 5, 1, 3, 4, true, false, SlotInputs::Raw},
    {"no normalize, p = 2, biases", 5, 3, 2, 4, 3, false, true, SlotInputs::Normalized},
    {"normalize, p = 2, biases, m = 9 > 4p", 7, 4, 2, 5, 9, true, true, SlotInputs::Normalized},
    {"normalize, p = 2, biases, gelu experts", 6, 3, 2, 4, 3, true, true, SlotInputs::Normalized, Activation::Gelu},
    {"normalize, p = 2, biases, swiglu experts", 6, 3, 2, 4, 3, true, true, SlotInputs::Normalized,
     Activation::Swiglu},
    {"no normalize, p = 1, swiglu experts, m = 9", 5, 4, 1, 3, 9, false, false, SlotInputs::Normalized,
     Activation::Swiglu},
};

}  // namespace

TEST_CASE("Soft MoE: slot order and token order give the same output and gradients (float64, 1e-12)") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const std::vector<Tensor> slots = run(c, ExpertOrder::Slots), tokens = run(c, ExpertOrder::Tokens);
    REQUIRE(slots.size() == tokens.size());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      INFO("tensor ", i, " (0: y, 1: dx, then the parameters' gradients)");
      REQUIRE(slots[i].defined());
      CHECK(max_diff(tokens[i], slots[i]) < 1e-12);
    }
  }
}

TEST_CASE("Soft MoE: token order passes gradcheck for x and every parameter") {
  for (const Case& c : kCases) {
    INFO(c.name);
    Generator gen(31);
    SoftMoE moe(config_of(c, ExpertOrder::Tokens), gen);
    REQUIRE(moe.token_order(c.m));
    const Tensor x = normal({2, c.m, c.d}, 0.0, 1.0, gen, DType::Float64);
    const GradcheckResult g = gradcheck([&](const V& v) { return moe.forward(v[0]); }, {x});
    CHECK_MESSAGE(g.ok, g.report);
    std::int64_t checked = 0;
    const std::string report = check_parameters(moe, [&] { return moe.forward(Variable(x)); }, checked);
    CHECK_MESSAGE(report.empty(), report);
    CHECK(checked == moe.num_parameters());
  }
}

TEST_CASE("Soft MoE: subsets under token order - proper masks as in slot order, a full mask bitwise forward(x)") {
  const Case c = kCases[2];  // p = 2, biases
  Generator gen(41);
  SoftMoE tokens(config_of(c, ExpertOrder::Tokens), gen);
  Generator gen2(41);
  SoftMoE slots(config_of(c, ExpertOrder::Slots), gen2);
  const Variable x(normal({3, c.m, c.d}, 0.0, 1.0, gen, DType::Float64));
  const Tensor drop = from_vector(std::vector<std::int32_t>{1, 0, 1}, {3});
  const Variable yt = tokens.forward(x, ExpertSubset::from_mask(drop));
  CHECK(values(yt.data()) == values(slots.forward(x, ExpertSubset::from_mask(drop)).data()));
  CHECK(tokens.last_computed_slots() == 3 * 2 * c.p);  // two kept experts of p slots, 3 examples
  const Tensor all = from_vector(std::vector<std::int32_t>{1, 1, 1}, {3});
  CHECK(values(tokens.forward(x, ExpertSubset::from_mask(all)).data()) == values(tokens.forward(x).data()));
  CHECK(values(tokens.forward(x, ExpertSubset::top_k(c.n)).data()) == values(tokens.forward(x).data()));
}

TEST_CASE("Soft MoE: Auto takes token order for narrow experts and few tokens per slot") {
  Generator gen(51);
  for (std::int64_t n : {8, 16, 32, 64, 128}) {
    SoftMoEConfig c;
    c.d = 196, c.experts = n, c.hidden = 784 / n;  // the MNIST model's layer
    const SoftMoE moe(c, gen);
    INFO("n = ", n);
    CHECK(moe.token_order(4) == (n >= 64));
    CHECK_FALSE(moe.token_order(5));  // m > 4p
    c.expert_order = ExpertOrder::Tokens;
    CHECK(SoftMoE(c, gen).token_order(100));
    c.expert_order = ExpertOrder::Slots;
    CHECK_FALSE(SoftMoE(c, gen).token_order(4));
  }
  CHECK(parse_expert_order("auto") == ExpertOrder::Auto);
  CHECK(parse_expert_order("slots") == ExpertOrder::Slots);
  CHECK(parse_expert_order("tokens") == ExpertOrder::Tokens);
  CHECK_THROWS_AS(parse_expert_order("rows"), Error);
}
