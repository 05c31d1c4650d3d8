// tests/test_expert_activation.cpp — relu, gelu and swiglu experts (nn/activation.h) against
// PyTorch, gradchecked, and as a MoE layer's and a decoder's option.
//
// tests/reference/make_expert_fixture.py builds every expert from its own torch.nn.Linear modules
// (swiglu as Mixtral's w2(silu(w1 x) * w3 x)) and runs them on their rows in a Python loop, in
// float64; moelab's ExpertBank (two grouped products with the activation between) must give the
// same output and the same gradients of x and every weight to 1e-12, with and without biases, with
// an expert that gets no rows and a row that belongs to no expert (it must come out 0). The same
// file holds a swiglu MLP (LLaMA's FFN) for nn/mlp.h.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "module_gradcheck.h"
#include "nn/decoder.h"
#include "nn/io/safetensors.h"
#include "nn/mlp.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/moe_layer.h"
#include "reference_fixture.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::check_input;
using moelab::testing::check_module;
using moelab::testing::max_error;
using moelab::testing::to_doubles;
using V = std::vector<Variable>;

namespace {

Tensor randn(const Shape& shape, Generator& gen) { return normal(shape, 0.0, 1.0, gen, DType::Float64); }

void set_values(Variable p, const Tensor& v) {
  REQUIRE(p.shape() == v.shape());
  kernels::copy(p.data(), v);
}

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = read_safetensors(testing::kReferenceDir + "expert_bank_expected.safetensors");
  return f;
}

// sum(y * r) backward from the fixture's r; returns y.
Variable forward_and_backward(const std::function<Variable(const Variable&)>& f, const Variable& x) {
  const Variable y = f(x);
  y.backward(fixture().at("r"));
  return y;
}

}  // namespace

TEST_CASE("activation names: relu, gelu, swiglu; F = 2f for the gated one; anything else refused") {
  CHECK(parse_activation("relu") == Activation::Relu);
  CHECK(parse_activation("gelu") == Activation::Gelu);
  CHECK(parse_activation("swiglu") == Activation::Swiglu);
  for (Activation a : {Activation::Relu, Activation::Gelu, Activation::Swiglu})
    CHECK(parse_activation(activation_name(a)) == a);
  CHECK_THROWS_WITH(parse_activation("silu"), doctest::Contains("relu, gelu or swiglu"));
  CHECK(up_width(Activation::Relu, 7) == 7);
  CHECK(up_width(Activation::Gelu, 7) == 7);
  CHECK(up_width(Activation::Swiglu, 7) == 14);
  // swiglu by hand: u = [gate | linear] -> silu(gate) * linear
  const Tensor u = from_vector(std::vector<double>{1.0, -2.0, 3.0, 0.5}, {1, 4});
  const std::vector<double> h = to_doubles(activate(Activation::Swiglu, Variable(u)).data());
  const auto silu = [](double a) { return a / (1.0 + std::exp(-a)); };
  CHECK(max_error(h, {silu(1.0) * 3.0, silu(-2.0) * 0.5}) <= 1e-15);
  CHECK_THROWS_WITH(activate(Activation::Swiglu, Variable(zeros({2, 3}, DType::Float64))),
                    doctest::Contains("2f wide"));
}

TEST_CASE("ExpertBank with relu, gelu and swiglu experts agrees with PyTorch's per-expert Linears (float64, 1e-12)") {
  const SafetensorsFile& f = fixture();
  const std::int64_t E = 3, d = 5, ffn = 4;
  const Tensor& offsets = f.at("offsets");
  for (const char* act : {"relu", "gelu", "swiglu"})
    for (bool bias : {false, true}) {
      const std::string key = std::string(act) + "_bias" + (bias ? "1" : "0") + ".";
      INFO(key);
      Generator gen(0);
      ExpertBank bank(E, d, ffn, gen, bias, DType::Float64, parse_activation(act));
      set_values(bank.w_in(), f.at(key + "w_in"));
      set_values(bank.w_out(), f.at(key + "w_out"));
      if (bias) set_values(bank.b_in(), f.at(key + "b_in")), set_values(bank.b_out(), f.at(key + "b_out"));
      CHECK(bank.parameters_per_expert() == (std::string(act) == "swiglu" ? 3 : 2) * d * ffn +
                                                (bias ? up_width(bank.activation(), ffn) + d : 0));
      Variable x(f.at("x"), /*requires_grad=*/true);
      const Variable y = forward_and_backward([&](const Variable& v) { return bank.forward(v, offsets); }, x);
      CHECK(max_error(y.data(), to_doubles(f.at(key + "y"))) <= 1e-12);
      CHECK(max_error(x.grad(), to_doubles(f.at(key + "grad.x"))) <= 1e-12);
      for (const auto& [name, p] : bank.named_parameters()) {
        INFO("parameter ", name);
        CHECK(max_error(p.grad(), to_doubles(f.at(key + "grad." + name))) <= 1e-12);
      }
      // The last row is in no expert's group: zero, whatever the activation.
      const std::vector<double> all = to_doubles(y.data());
      CHECK(std::vector<double>(all.end() - d, all.end()) == std::vector<double>(d, 0.0));
    }
}

TEST_CASE("a swiglu MLP (LLaMA's FFN) agrees with PyTorch's silu(w1 x) * w3 x -> w2 (float64, 1e-12)") {
  const SafetensorsFile& f = fixture();
  for (bool bias : {false, true}) {
    const std::string key = std::string("mlp_swiglu_bias") + (bias ? "1" : "0") + ".";
    INFO(key);
    Generator gen(0);
    MLP mlp(5, 4, gen, bias, DType::Float64, Activation::Swiglu);
    CHECK(mlp.up().weight().shape() == Shape{8, 5});  // gate's 4 rows, then the linear one's
    for (const auto& [name, p] : mlp.named_parameters()) set_values(p, f.at(key + name));
    Variable x(f.at("x"), /*requires_grad=*/true);
    const Variable y = forward_and_backward([&](const Variable& v) { return mlp.forward(v); }, x);
    CHECK(max_error(y.data(), to_doubles(f.at(key + "y"))) <= 1e-12);
    CHECK(max_error(x.grad(), to_doubles(f.at(key + "grad.x"))) <= 1e-12);
    for (const auto& [name, p] : mlp.named_parameters()) {
      INFO("parameter ", name);
      CHECK(max_error(p.grad(), to_doubles(f.at(key + "grad." + name))) <= 1e-12);
    }
  }
}

TEST_CASE("ExpertBank gradcheck for every activation: grouped rows, forward_each and forward_mixed") {
  for (Activation act : {Activation::Relu, Activation::Gelu, Activation::Swiglu})
    for (bool bias : {false, true}) {
      INFO(activation_name(act), ", bias ", bias);
      Generator gen(7);
      ExpertBank bank(3, 4, 3, gen, bias, DType::Float64, act);
      const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 2, 2, 5}, {4});
      const Tensor rows = randn({6, 4}, gen);  // row 5 in no group
      check_input([&](const V& v) { return bank.forward(v[0], offsets); }, rows);
      check_module(bank, [&] { return bank.forward(Variable(rows), offsets); });
      const Tensor each = randn({3, 2, 4}, gen);
      check_input([&](const V& v) { return bank.forward_each(v[0]); }, each);
      check_module(bank, [&] { return bank.forward_each(Variable(each)); });
      // Soft MoE's token-order path: B = 2, m = 3, E = 3 experts of p = 2 slots.
      const Tensor x = randn({2, 3, 4}, gen);
      const Variable dispatch(softmax(Variable(randn({2, 3, 3, 2}, gen)), 1).data());
      const Variable combine(softmax(Variable(randn({2, 3, 3, 2}, gen)), 2).data());
      check_input([&](const V& v) { return bank.forward_mixed(v[0], dispatch, combine); }, x);
      check_module(bank, [&] { return bank.forward_mixed(Variable(x), dispatch, combine); });
    }
}

TEST_CASE("forward, forward_each and forward_mixed compute the same experts for swiglu") {
  Generator gen(8);
  const std::int64_t E = 3, d = 4, R = 2;
  ExpertBank bank(E, d, 5, gen, /*bias=*/true, DType::Float64, Activation::Swiglu);
  const Tensor each = randn({E, R, d}, gen);
  const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 2, 4, 6}, {E + 1});
  const std::vector<double> by_rows = to_doubles(bank.forward(Variable(each.reshape({E * R, d})), offsets).data());
  CHECK(max_error(bank.forward_each(Variable(each)).data(), by_rows) <= 1e-13);
}

TEST_CASE("MoE layer with swiglu experts: E = 1, k = 1 equals the swiglu MLP; shared experts follow the option") {
  Generator gen(11);
  const std::int64_t d = 6, f = 5;
  MLP mlp(d, f, gen, /*bias=*/false, DType::Float64, Activation::Swiglu);
  MoEConfig one{.d = d, .experts = 1, .k = 1, .ffn = f, .dtype = DType::Float64,
                .expert_activation = Activation::Swiglu};
  one.router_options = {{"allow_constant_gates", "true"}};
  MoELayer moe(one, gen);
  set_values(moe.experts().w_in(), kernels::transpose(mlp.up().weight().data()).reshape({1, d, 2 * f}));
  set_values(moe.experts().w_out(), kernels::transpose(mlp.down().weight().data()).reshape({1, f, d}));
  const Tensor x = randn({2, 3, d}, gen);
  CHECK(max_error(moe.forward(Variable(x)).data(), to_doubles(mlp.forward(Variable(x)).data())) <= 1e-12);

  MoEConfig shared{.d = d, .experts = 4, .k = 2, .ffn = f, .dtype = DType::Float64, .shared_experts = 2,
                   .expert_activation = Activation::Swiglu};
  MoELayer with_shared(shared, gen);
  REQUIRE(with_shared.shared() != nullptr);
  CHECK(with_shared.shared()->activation() == Activation::Swiglu);
  CHECK(with_shared.shared()->up().weight().shape() == Shape{2 * 2 * f, d});
  CHECK(with_shared.experts().w_in().shape() == Shape{4, d, 2 * f});
}

TEST_CASE("decoders with swiglu FFNs: 3 d f per FFN in the counts, and a training step's gradients reach them") {
  DecoderConfig c{.vocab = 7, .d = 8, .layers = 2, .heads = 2, .ffn = 6};
  Generator gen(12);
  Decoder relu(c, gen);
  c.ffn_activation = Activation::Swiglu;
  Decoder swiglu(c, gen);
  CHECK(swiglu.num_non_embedding_parameters() - relu.num_non_embedding_parameters() == 2 * 8 * 6);  // L d f
  Decoder moe(c, gen, moe_feed_forward(MoEConfig{.experts = 4, .k = 2, .expert_activation = Activation::Swiglu}));
  const MoECounts counts = moe_parameter_counts(moe);
  // The router is [E, d]; each of the E experts 3 d f; active keeps k of them.
  CHECK(counts.non_embedding - counts.active == 2 * (4 - 2) * 3 * 8 * 6);
  const Tensor ids = from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {1, 6});
  AuxLosses aux;
  const Variable logits = moe.forward(ids, aux);
  sum(logits * logits).backward();
  for (const auto& [name, p] : moe.named_parameters())
    if (name.find("experts.w_in") != std::string::npos) {
      INFO(name);
      CHECK(to_doubles(p.grad()) != std::vector<double>(static_cast<std::size_t>(p.numel()), 0.0));
    }
}
